import type { AuditEvent } from "../../../../durable-objects/contract/verbs";

/**
 * The webhook events (docs/webhooks.md), each made from an audit event the system already records in
 * the transaction that makes it true: a sign-in writes nothing more for its webhook, and waits for
 * nothing. One audit event can make more than one webhook event (a sign-up's first sign-in).
 */
export const WEBHOOK_EVENT_TYPES = [
  "user.signed_in",
  "user.sign_in_failed",
  "user.locked",
  "user.created",
  "user.updated",
  "user.deleted",
  "user.revoked",
  "users.imported",
  "session.ended",
  "refresh_token.reuse_detected",
  "grant.revoked",
  "device.approved",
  "device.denied",
  "client.created",
  "client.updated",
  "client.deleted",
  "key.rotated",
  "webhook.test",
  "passkey.created",
  "passkey.deleted",
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export interface WebhookEvent {
  type: WebhookEventType;
  data: Record<string, unknown>;
}

/** An admin API change, by its method and path (the tenant prefix removed), as a webhook event. */
const ADMIN_CHANGES: [string, RegExp, WebhookEventType][] = [
  ["POST", /^\/admin\/v1\/users$/, "user.created"],
  ["POST", /^\/admin\/v1\/users\/import$/, "users.imported"],
  ["PATCH", /^\/admin\/v1\/users\/([^/]+)$/, "user.updated"],
  ["DELETE", /^\/admin\/v1\/users\/([^/]+)$/, "user.deleted"],
  ["POST", /^\/admin\/v1\/users\/([^/]+)\/revoke$/, "user.revoked"],
  ["POST", /^\/admin\/v1\/clients$/, "client.created"],
  ["PATCH", /^\/admin\/v1\/clients\/([^/]+)$/, "client.updated"],
  ["POST", /^\/admin\/v1\/clients\/([^/]+)\/rotate-secret$/, "client.updated"],
  ["DELETE", /^\/admin\/v1\/clients\/([^/]+)$/, "client.deleted"],
];

/** The webhook events an audit event makes (none for most: token issues, mail, shard changes). */
export function webhookEventsOf(e: AuditEvent): WebhookEvent[] {
  const d = e.detail ?? {};
  const who = { ...(e.user_id ? { user_id: e.user_id } : {}), ...(e.client_id ? { client_id: e.client_id } : {}) };
  switch (e.kind) {
    case "sign_in": {
      // Issue 42: how the person signed in (`passkey` or `email_code`; logins sealed before it, `email_code`).
      const method = d.method === "passkey" ? "passkey" : "email_code";
      const signedIn: WebhookEvent = {
        type: "user.signed_in",
        data: { ...who, sid: d.sid ?? null, ip: e.ip, method },
      };
      return d.created === true ? [{ type: "user.created", data: { ...who, via: "sign_up" } }, signedIn] : [signedIn];
    }
    case "code_failed":
      return [{ type: "user.sign_in_failed", data: { email_key: e.email_key, ip: e.ip } }];
    case "lockout":
      return [{ type: "user.locked", data: { email_key: e.email_key, ip: e.ip } }];
    case "logout":
      return [{ type: "session.ended", data: { ...who, sids: d.sid ?? [] } }];
    case "grant_revoked":
      return [{ type: "grant.revoked", data: { ...who, sid: d.sid ?? null } }];
    case "refresh_reuse":
      return [{ type: "refresh_token.reuse_detected", data: { ...who, sid: d.sid ?? null } }];
    case "device_decision":
      return [{ type: d.approved === true ? "device.approved" : "device.denied", data: who }];
    case "client_registration": {
      // Issue 40: the same events as the admin API's client changes, by dynamic registration.
      const type = { created: "client.created", updated: "client.updated", deleted: "client.deleted" }[
        String(d.action)
      ] as WebhookEventType | undefined;
      return type ? [{ type, data: { id: e.client_id, via: "dynamic_registration" } }] : [];
    }
    case "passkey_created":
      return [{ type: "passkey.created", data: { ...who, id: d.credential_id ?? null, aaguid: d.aaguid ?? null } }];
    case "passkey_deleted":
      return [{ type: "passkey.deleted", data: { ...who, id: d.credential_id ?? null, via: d.via ?? null } }];
    case "key_rotation":
      return [{ type: "key.rotated", data: { trigger: d.trigger ?? null } }];
    case "admin_change": {
      const path = String(d.path ?? "").replace(/^\/admin\/v1\/tenants\/[^/]+/, "/admin/v1");
      for (const [method, pattern, type] of ADMIN_CHANGES) {
        const m = d.method === method ? pattern.exec(path) : null;
        if (m) return [{ type, data: { ...(m[1] ? { id: decodeURIComponent(m[1]) } : {}), via: "admin_api" } }];
      }
      return [];
    }
    default:
      return [];
  }
}

/**
 * The message of one webhook event: its `webhook-id` (stable across endpoints, retries and replays,
 * for receivers to deduplicate by) and the versioned JSON envelope every subscribed endpoint is sent.
 */
export function webhookMessage(
  eventId: string,
  at: number,
  tenant: string,
  w: WebhookEvent,
): { id: string; type: WebhookEventType; body: string } {
  const body = JSON.stringify({
    type: w.type,
    timestamp: new Date(at).toISOString(),
    tenant,
    data: w.data,
    api_version: 1,
  });
  return { id: `msg_${eventId}_${w.type}`, type: w.type, body };
}

/** Whether an endpoint subscribed to `type` (`*` is every event). */
export const subscribes = (events: readonly string[], type: string) => events.includes("*") || events.includes(type);
