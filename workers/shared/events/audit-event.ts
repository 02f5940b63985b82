import { randomToken } from "../../../durable-objects/contract/crypto";
import { errorField, log } from "../../../durable-objects/contract/log";
import type { AuditEvent, AuditKind } from "../../../durable-objects/contract/verbs";
import type { AuditBuffer } from "../../../durable-objects/namespaces";
import { type Routing, routeKey, shardAddress } from "../routing/router";
import { shardNamed } from "../routing/stores";

/**
 * Making and handing over audit events, with no request in sight: what a Worker's handler
 * (audit.ts) and a Durable Object (MailOutbox) share. A leaf module: the stores may import it.
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

export interface AuditEnv {
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
    ...(input.tenant && input.tenant !== "default" ? { tenant: input.tenant } : {}),
  };
}

/**
 * The AuditBuffer shard for an event: by its user or email when it has one (one user's events stay
 * in order in one buffer), else at random. Placed in the region given (the request's), and named by its address (router.ts shardAddress).
 */
export function auditShardName(routing: Routing, region: string, key?: string | null): string {
  return shardAddress(routeKey(routing, "audit", key ?? randomToken(8), region));
}

/** Hands events to their buffer. Never throws: the audit trail must not fail a login. */
export async function emitAudit(env: AuditEnv, shardName: string, events: AuditEvent[]): Promise<void> {
  if (events.length === 0) return;
  try {
    await shardNamed(env, "audit", shardName).append(events);
  } catch (err) {
    log("error", "audit: could not buffer", { kinds: events.map((e) => e.kind), error: errorField(err) });
  }
}
