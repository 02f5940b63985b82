import type { Context } from "hono";
import { decodeJwt } from "jose";
import { type AuditEnv, type AuditInput, auditEvent, emitAudit } from "../../../durable-objects/contract/audit-event";
import { hmac, randomToken } from "../../../durable-objects/contract/crypto";
import type { AuditEvent } from "../../../durable-objects/contract/verbs";
import type { Config } from "../config/config";
import type { AppEnv } from "../request/context";
import { type IdCodec, parseId } from "../routing/ids";
import { type Routing, routeKey, shardAddress } from "../routing/shard-refs";
import { tenantScoped } from "../routing/tenant-route";

/**
 * The AuditBuffer shard for an event: by its user or email when it has one (one user's events stay
 * in order in one buffer), else at random. Placed in the region given (the request's), and named by
 * its address (routing/shard-refs.ts shardAddress).
 */
export function auditShardName(routing: Routing, region: string, key?: string | null): string {
  return shardAddress(routeKey(routing, "audit", key ?? randomToken(8), region));
}

/**
 * An event of this request, for a store verb to write in its own transaction (the events of a
 * successful login travel this way; see durable-objects/audit-outbox.ts).
 */
export function requestAuditEvent(c: Context<AppEnv>, input: AuditInput): AuditEvent {
  return auditEvent({ tenant: c.get("config").TENANT, ...input }, c.req.header("cf-connecting-ip") ?? null);
}

/**
 * `audit(c, {...})`: one line in a handler; the event is written after the response, to an
 * AuditBuffer shard of `region`: the region of the login the event is about, where there is one
 * (so an EU resident's events stay in the EU jurisdiction until D1), else the request's.
 */
export function audit(c: Context<AppEnv>, input: AuditInput, region: string = c.get("region")): void {
  const config = c.get("config");
  const event = requestAuditEvent(c, input);
  const promise = emitAudit(c.env, auditShardName(config, region, event.user_id ?? event.email_key), [event]);
  try {
    c.executionCtx.waitUntil(promise);
  } catch {
    // No execution context (a scheduled handler passes its own): the promise still runs.
  }
}

/**
 * Keys made by this isolate, per secret: a login asks for its address's key at generate, at verify and
 * (locally) at the mailbox, usually in one isolate, and each is an HMAC (issue 44 item 2). Cleared
 * whole when full, like the ids' MACs (routing/ids.ts).
 */
const emailKeys = new Map<string, Map<string, Promise<string>>>();
const EMAIL_KEYS_MAX = 1024;

/** The key an address has everywhere: its ChallengeStore shard, its MailOutbox shard, the audit trail. */
export function auditEmailKey(config: Pick<Config, "OTP_HMAC_SECRET" | "TENANT">, normalizedEmail: string) {
  const message = `email:${tenantScoped(config, normalizedEmail)}`;
  let keys = emailKeys.get(config.OTP_HMAC_SECRET);
  if (!keys) {
    keys = new Map();
    emailKeys.set(config.OTP_HMAC_SECRET, keys);
  }
  let key = keys.get(message);
  if (!key) {
    if (keys.size >= EMAIL_KEYS_MAX) keys.clear();
    key = hmac(config.OTP_HMAC_SECRET, message);
    keys.set(message, key);
    // A failed HMAC is not kept: the next ask tries again.
    key.catch(() => keys.delete(message));
  }
  return key;
}

/** For code without a request context (a cron, a failure path that already waits): written before it returns. */
export function recordAudit(
  env: AuditEnv,
  config: Routing & { TENANT?: string },
  input: AuditInput,
  region: string = config.REGIONS.default,
): Promise<void> {
  const event = auditEvent({ tenant: config.TENANT, ...input });
  return emitAudit(env, auditShardName(config, region, event.user_id ?? event.email_key), [event]);
}

/** The region of the login a sid belongs to (regions.ts); undefined for one no longer accepted. */
export function loginRegion(config: IdCodec, sid: unknown): string | undefined {
  return parseId(config, "sid", sid)?.ref.place.region;
}

/** The login region of a token response (the sid of the access token just signed), if it has one. */
export function regionOf(config: IdCodec, body: { access_token?: unknown }): string | undefined {
  try {
    return typeof body.access_token === "string" ? loginRegion(config, decodeJwt(body.access_token).sid) : undefined;
  } catch {
    return undefined;
  }
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
