import type { Context } from "hono";
import { decodeJwt } from "jose";
import type { AuditBuffer } from "../../durable-objects/audit-buffer";
import type { AppEnv } from "./app";
import type { Config, ShardConfig } from "./config";
import { hmac, randomToken } from "./crypto";
import { errorField, log } from "./log";
import { objectName, routeKey } from "./sharding";

/**
 * The audit trail: events land in D1 `audit_events`, written behind the request through an outbox in
 * a Durable Object's SQLite storage, which its alarm flushes to D1 in batches. The events of a
 * successful login (code_sent, sign_in, token_issued) go with the store call the step already makes,
 * in its transaction; any other event goes to an AuditBuffer shard in `waitUntil` (after the
 * response). A code grant's token_issued is therefore written when the code is redeemed: if signing
 * then fails, the code is spent all the same, and the event records that redemption. No event
 * carries a code, token or cookie.
 */
export const AUDIT_KINDS = [
  "sign_in",
  "code_sent",
  "code_failed",
  "mail_failed",
  "lockout",
  "token_issued",
  "refresh_reuse",
  "logout",
  "admin_change",
  "key_rotation",
] as const;
export type AuditKind = (typeof AUDIT_KINDS)[number];

/** One row of `audit_events`. `id` is random and makes a repeated flush harmless (INSERT OR IGNORE). */
export interface AuditEvent {
  id: string;
  at: number;
  kind: AuditKind;
  user_id: string | null;
  /** HMAC of the normalized email (the ChallengeStore key): which address, without storing it. */
  email_key: string | null;
  client_id: string | null;
  ip: string | null;
  detail: Record<string, unknown> | null;
}

export interface AuditInput {
  kind: AuditKind;
  user?: string | null | undefined;
  emailKey?: string | null | undefined;
  client?: string | null | undefined;
  detail?: Record<string, unknown> | undefined;
}

interface AuditEnv {
  AUDIT: DurableObjectNamespace<AuditBuffer>;
}

export function auditEvent(input: AuditInput, ip: string | null = null, at = Date.now()): AuditEvent {
  return {
    id: randomToken(16),
    at,
    kind: input.kind,
    user_id: input.user ?? null,
    email_key: input.emailKey ?? null,
    client_id: input.client ?? null,
    ip,
    detail: input.detail ?? null,
  };
}

/**
 * The AuditBuffer shard for an event: by its user or email when it has one (one user's events stay
 * in order in one buffer), else at random. Named like every store shard: `audit:g<gen>:s<shard>`.
 */
export function auditShardName(shards: ShardConfig, key?: string | null): string {
  return objectName(routeKey(shards, "audit", key ?? randomToken(8)));
}

/** Hands events to their buffer. Never throws: the audit trail must not fail a login. */
export async function emitAudit(env: AuditEnv, shardName: string, events: AuditEvent[]): Promise<void> {
  if (events.length === 0) return;
  try {
    await env.AUDIT.get(env.AUDIT.idFromName(shardName)).append(events);
  } catch (err) {
    log("error", "audit: could not buffer", { kinds: events.map((e) => e.kind), error: errorField(err) });
  }
}

/**
 * An event of this request, for a store verb to write in its own transaction (the events of a
 * successful login travel this way; see durable-objects/audit-outbox.ts).
 */
export function requestAuditEvent(c: Context<AppEnv>, input: AuditInput): AuditEvent {
  return auditEvent(input, c.req.header("cf-connecting-ip") ?? null);
}

/** `audit(c, {...})`: one line in a handler; the event is written after the response. */
export function audit(c: Context<AppEnv>, input: AuditInput): void {
  const config = c.get("config");
  const event = requestAuditEvent(c, input);
  const promise = emitAudit(c.env, auditShardName(config.SHARDS, event.user_id ?? event.email_key), [event]);
  try {
    c.executionCtx.waitUntil(promise);
  } catch {
    // No execution context (a scheduled handler passes its own): the promise still runs.
  }
}

/** The key an address has in the ChallengeStore and the audit trail (same as email-code.ts's `emailKeyOf`). */
export const auditEmailKey = (config: Pick<Config, "OTP_HMAC_SECRET">, normalizedEmail: string) =>
  hmac(config.OTP_HMAC_SECRET, `email:${normalizedEmail}`);

/** For code without a request context (a cron, a failure path that already waits): written before it returns. */
export function recordAudit(env: AuditEnv, config: Pick<Config, "SHARDS">, input: AuditInput): Promise<void> {
  const event = auditEvent(input);
  return emitAudit(env, auditShardName(config.SHARDS, event.user_id ?? event.email_key), [event]);
}

/** The subject of a token response (read from the access token just signed). */
export function subjectOf(body: { access_token?: unknown }): string | null {
  try {
    const sub = typeof body.access_token === "string" ? decodeJwt(body.access_token).sub : undefined;
    return sub ?? null;
  } catch {
    return null;
  }
}
