import { randomToken } from "./crypto";
import { errorField, log } from "./log";
import { stubAt } from "./shard-address";
import type { AuditEvent, AuditKind } from "./verbs";

/**
 * Making and handing over audit events, with no request in sight: what a Worker's handler
 * (workers/shared/events/audit.ts) and a Durable Object (MailOutbox, WebhookOutbox) share. Which
 * buffer an event goes to is the router's choice (events/audit.ts auditShardName); the event's shape
 * and the hand-over are the contract's.
 */

export interface AuditInput {
  kind: AuditKind;
  user?: string | null | undefined;
  emailKey?: string | null | undefined;
  client?: string | null | undefined;
  detail?: Record<string, unknown> | undefined;
  /** The tenant the event is about; `default` when absent. */
  tenant?: string | undefined;
}

/** The AuditBuffer binding (STORE_BINDINGS.audit), whichever class types it on the caller's side. */
export interface AuditEnv {
  AUDIT: object;
}

/** The one AuditBuffer verb the hand-over calls (durable-objects/audit-buffer.ts). */
interface AuditAppend {
  append(events: AuditEvent[]): Promise<unknown>;
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
    ...(input.tenant && input.tenant !== "default" ? { tenant: input.tenant } : {}),
  };
}

/** Hands events to their buffer. Never throws: the audit trail must not fail a login. */
export async function emitAudit(env: AuditEnv, shardName: string, events: AuditEvent[]): Promise<void> {
  if (events.length === 0) return;
  try {
    await stubAt<AuditAppend>(env, "audit", shardName).append(events);
  } catch (err) {
    log("error", "audit: could not buffer", { kinds: events.map((e) => e.kind), error: errorField(err) });
  }
}
