import type { Context } from "hono";
import { z } from "zod";
import { randomToken } from "../../../durable-objects/contract/crypto";
import type { WebhookMessageStatus } from "../../../durable-objects/contract/verbs";
import { WEBHOOK_EVENT_TYPES, webhookMessage } from "../../shared/events/webhooks/catalogue";
import { sealWebhookSecret, type WebhookEndpointRow, webhookUrlProblem } from "../../shared/events/webhooks/endpoints";
import { newWebhookSecret } from "../../shared/events/webhooks/signature";
import { OAuthError } from "../../shared/platform/errors";
import { json, NO_STORE } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { routeKey, shardAddress } from "../../shared/routing/shard-refs";
import { shardNamed } from "../../shared/routing/stores";
import { body, queryLimit } from "./validation";

/**
 * Webhook endpoints through the admin API (issue 25, docs/webhooks.md): per tenant, each with a
 * signing secret shown once (at creation and at each rotation) and sealed at rest; recent attempts,
 * a test event, and replay of one message or of everything since a time.
 */

/** How long a rotated-out secret still signs (both signatures are sent meanwhile), by default. */
const ROTATION_OVERLAP_SECONDS = 86_400;

const events = z
  .array(z.union([z.enum(WEBHOOK_EVENT_TYPES), z.literal("*")]))
  .min(1)
  .max(WEBHOOK_EVENT_TYPES.length + 1);

export const webhookInput = z
  .object({
    url: z.string().max(2000),
    events,
    description: z.string().trim().max(500).optional(),
    enabled: z.boolean().default(true),
  })
  .strict();
export const webhookPatch = z
  .object({
    url: z.string().max(2000),
    events,
    description: z.string().trim().max(500).nullable(),
    enabled: z.boolean(),
  })
  .partial()
  .strict();
export const rotateInput = z
  .object({
    overlap_seconds: z
      .number()
      .int()
      .min(0)
      .max(7 * 86_400)
      .default(ROTATION_OVERLAP_SECONDS),
  })
  .strict();
export const replayInput = z.union([
  z.object({ message_id: z.string().min(1).max(200) }).strict(),
  z.object({ since: z.iso.datetime() }).strict(),
]);

function checkUrl(c: Context<AppEnv>, url: string): void {
  const problem = webhookUrlProblem(url, c.get("config").ENVIRONMENT === "production");
  if (problem) throw new OAuthError("invalid_request", problem);
}

function view(row: WebhookEndpointRow) {
  return {
    id: row.id,
    url: row.url,
    events: JSON.parse(row.events) as string[],
    description: row.description,
    enabled: row.enabled === 1,
    disabled_reason: row.disabled_reason,
    consecutive_failures: row.consecutive_failures,
    failing_since: row.failing_since ? new Date(row.failing_since).toISOString() : null,
    secret_rotation_ends:
      row.previous_until && row.previous_until > Date.now() ? new Date(row.previous_until).toISOString() : null,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
  };
}

async function load(c: Context<AppEnv>, id: string): Promise<WebhookEndpointRow> {
  const row = await c.env.DB.prepare("SELECT * FROM webhook_endpoints WHERE id = ? AND tenant = ?")
    .bind(id, c.get("config").TENANT)
    .first<WebhookEndpointRow>();
  if (!row) throw new OAuthError("not_found", "no such webhook endpoint");
  return row;
}

const queueOf = (c: Context<AppEnv>, row: WebhookEndpointRow) => shardNamed(c.env, "webhook", row.shard);

export async function createWebhook(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, webhookInput);
  checkUrl(c, input.url);
  const config = c.get("config");
  const id = `kwh_${randomToken(16)}`;
  const secret = newWebhookSecret();
  const now = Date.now();
  const cap = config.POLICY.webhook_endpoints_per_tenant;
  // The count and the insert are one statement (one D1 transaction): two creates at once cannot both
  // take the last place.
  const { meta } = await c.env.DB.prepare(
    `INSERT INTO webhook_endpoints (id, tenant, url, events, description, enabled, secret_sealed, shard, created_at, updated_at)
     SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE (SELECT COUNT(*) FROM webhook_endpoints WHERE tenant = ?) < ?`,
  )
    .bind(
      id,
      config.TENANT,
      input.url,
      JSON.stringify([...new Set(input.events)]),
      input.description ?? null,
      input.enabled ? 1 : 0,
      await sealWebhookSecret(config.KEY_ENCRYPTION_SECRET, id, secret),
      shardAddress(routeKey(config, "webhook", id, config.REGIONS.default)),
      now,
      now,
      config.TENANT,
      cap,
    )
    .run();
  if (!meta.changes)
    throw new OAuthError(
      "conflict",
      `this tenant has ${cap} webhook endpoints, the most webhook_endpoints_per_tenant allows; delete one first`,
    );
  // The secret is shown once; it is kept only sealed.
  return json({ ...view(await load(c, id)), secret }, 201, NO_STORE);
}

/** `GET /webhooks?limit=&after=`: by id, pages of `limit` after `after`, as users and tenants are listed. */
export async function listWebhooks(c: Context<AppEnv>): Promise<Response> {
  const limit = queryLimit(c, 100, 1000);
  const after = c.req.query("after") ?? "";
  const { results } = await c.env.DB.prepare(
    "SELECT * FROM webhook_endpoints WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?",
  )
    .bind(c.get("config").TENANT, after, limit)
    .all<WebhookEndpointRow>();
  const last = results.at(-1);
  return json({ webhooks: results.map(view), next: results.length === limit && last ? last.id : null });
}

export async function getWebhook(c: Context<AppEnv>): Promise<Response> {
  return json(view(await load(c, c.req.param("id") ?? "")));
}

export async function patchWebhook(c: Context<AppEnv>): Promise<Response> {
  const row = await load(c, c.req.param("id") ?? "");
  const patch = await body(c, webhookPatch);
  if (patch.url !== undefined) checkUrl(c, patch.url);
  // Enabling again starts a new run: the failures that disabled it are forgotten.
  const reenabled = patch.enabled === true && row.enabled === 0;
  await c.env.DB.prepare(
    `UPDATE webhook_endpoints SET url = ?, events = ?, description = ?, enabled = ?, updated_at = ?,
       consecutive_failures = CASE WHEN ? THEN 0 ELSE consecutive_failures END,
       failing_since = CASE WHEN ? THEN NULL ELSE failing_since END,
       disabled_reason = CASE WHEN ? THEN NULL ELSE disabled_reason END
     WHERE id = ? AND tenant = ?`,
  )
    .bind(
      patch.url ?? row.url,
      patch.events ? JSON.stringify([...new Set(patch.events)]) : row.events,
      patch.description === undefined ? row.description : patch.description,
      patch.enabled === undefined ? row.enabled : patch.enabled ? 1 : 0,
      Date.now(),
      reenabled ? 1 : 0,
      reenabled ? 1 : 0,
      reenabled ? 1 : 0,
      row.id,
      row.tenant,
    )
    .run();
  return json(view(await load(c, row.id)));
}

export async function deleteWebhook(c: Context<AppEnv>): Promise<Response> {
  const { meta } = await c.env.DB.prepare("DELETE FROM webhook_endpoints WHERE id = ? AND tenant = ?")
    .bind(c.req.param("id") ?? "", c.get("config").TENANT)
    .run();
  if (!meta.changes) throw new OAuthError("not_found", "no such webhook endpoint");
  // Its queued messages fail at their next attempt ("the endpoint was deleted") and expire.
  return new Response(null, { status: 204 });
}

/** A new secret, shown once; the old one keeps signing beside it for `overlap_seconds`. */
export async function rotateWebhookSecret(c: Context<AppEnv>): Promise<Response> {
  const row = await load(c, c.req.param("id") ?? "");
  const { overlap_seconds } = await body(c, rotateInput);
  const config = c.get("config");
  const secret = newWebhookSecret();
  const now = Date.now();
  await c.env.DB.prepare(
    `UPDATE webhook_endpoints SET secret_sealed = ?, previous_secret_sealed = ?, previous_until = ?, updated_at = ?
     WHERE id = ? AND tenant = ?`,
  )
    .bind(
      await sealWebhookSecret(config.KEY_ENCRYPTION_SECRET, row.id, secret),
      overlap_seconds > 0 ? row.secret_sealed : null,
      overlap_seconds > 0 ? now + overlap_seconds * 1000 : null,
      now,
      row.id,
      row.tenant,
    )
    .run();
  return json({ ...view(await load(c, row.id)), secret }, 200, NO_STORE);
}

/** Queues a `webhook.test` event for this endpoint alone, delivered like any other. */
export async function testWebhook(c: Context<AppEnv>): Promise<Response> {
  const row = await load(c, c.req.param("id") ?? "");
  const now = Date.now();
  const message = webhookMessage(randomToken(16), now, row.tenant, {
    type: "webhook.test",
    data: { endpoint: row.id, message: "a test event from the admin API" },
  });
  await queueOf(c, row).enqueue([{ ...message, endpoint_id: row.id, tenant: row.tenant }], now);
  return json({ message_id: message.id }, 202);
}

const STATUSES = new Set<WebhookMessageStatus>(["pending", "delivered", "failed"]);
const limitOf = (c: Context<AppEnv>) => queryLimit(c, 50, 200);

/** The endpoint's latest attempts: status, latency, error, and when its message is tried next. */
export async function webhookAttempts(c: Context<AppEnv>): Promise<Response> {
  const row = await load(c, c.req.param("id") ?? "");
  const attempts = await queueOf(c, row).recentAttempts(row.id, limitOf(c));
  const iso = (t: number | null) => (t === null ? null : new Date(t).toISOString());
  return json({ attempts: attempts.map((a) => ({ ...a, at: iso(a.at), next_at: iso(a.next_at) })) }, 200, NO_STORE);
}

/** The endpoint's messages, newest first; `status` picks pending, delivered or failed (the dead letters). */
export async function webhookMessages(c: Context<AppEnv>): Promise<Response> {
  const row = await load(c, c.req.param("id") ?? "");
  const status = c.req.query("status");
  if (status !== undefined && !STATUSES.has(status as WebhookMessageStatus))
    throw new OAuthError("invalid_request", "status must be pending, delivered or failed");
  const messages = await queueOf(c, row).listMessages(row.id, (status as WebhookMessageStatus) ?? null, limitOf(c));
  const iso = (t: number | null) => (t === null ? null : new Date(t).toISOString());
  return json(
    { messages: messages.map((m) => ({ ...m, created_at: iso(m.created_at), next_at: iso(m.next_at) })) },
    200,
    NO_STORE,
  );
}

/** Sends a delivered or failed message again (`message_id`), or every one queued since a time (`since`). */
export async function replayWebhook(c: Context<AppEnv>): Promise<Response> {
  const row = await load(c, c.req.param("id") ?? "");
  const input = await body(c, replayInput);
  const replayed = await queueOf(c, row).replay(
    row.id,
    "message_id" in input ? { id: input.message_id } : { since: Date.parse(input.since) },
    Date.now(),
  );
  return json({ replayed }, 202);
}
