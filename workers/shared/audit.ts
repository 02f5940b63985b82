import type { Context } from "hono";
import { decodeJwt } from "jose";
import type { AuditEvent } from "../../durable-objects/contract";
import type { AppEnv } from "./app";
import { type AuditEnv, type AuditInput, auditEvent, auditShardName, emitAudit } from "./audit-event";
import type { Config } from "./config";
import { hmac } from "./crypto";
import type { Routing } from "./sharding";

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
  const promise = emitAudit(c.env, auditShardName(config, c.get("region"), event.user_id ?? event.email_key), [event]);
  try {
    c.executionCtx.waitUntil(promise);
  } catch {
    // No execution context (a scheduled handler passes its own): the promise still runs.
  }
}

/** The key an address has everywhere: its ChallengeStore shard, its MailOutbox shard, the audit trail. */
export const auditEmailKey = (config: Pick<Config, "OTP_HMAC_SECRET">, normalizedEmail: string) =>
  hmac(config.OTP_HMAC_SECRET, `email:${normalizedEmail}`);

/** For code without a request context (a cron, a failure path that already waits): written before it returns. */
export function recordAudit(env: AuditEnv, config: Routing, input: AuditInput): Promise<void> {
  const event = auditEvent(input);
  return emitAudit(env, auditShardName(config, config.REGIONS.default, event.user_id ?? event.email_key), [event]);
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
