import { subscribes, webhookEventsOf, webhookMessage } from "../workers/shared/events/webhooks/catalogue";
import { stubAt } from "./contract/shard-address";
import type { AuditEvent, WebhookMessageInput } from "./contract/verbs";

/**
 * From the audit trail to the webhook queues (issue 25): called by a store's alarm with the events it
 * has just written to D1, before it deletes them from its outbox, so an event that made it to D1 is
 * queued for every endpoint subscribed to it, at least once (a retry of the flush queues nothing twice:
 * a message's key is its event and endpoint). Nothing of this is on a request's path.
 *
 * The enabled endpoints of a tenant are read from D1 at most every CACHE_MS per isolate: an endpoint
 * created or enabled gets the events that flush from then on, within that much.
 */
const CACHE_MS = 5_000;

interface Subscriber {
  id: string;
  events: string[];
  shard: string;
}

const subscribers = new Map<string, { at: number; list: Subscriber[] }>();

/** Forgets this isolate's copy of the endpoints (tests: an endpoint created a moment ago counts at once). */
export function forgetWebhookSubscribers(): void {
  subscribers.clear();
}

/** A store's D1 and, in a deployment with webhooks, the WebhookOutbox binding (STORE_BINDINGS.webhook). */
export interface WebhookHandOffEnv {
  DB: D1Database;
  WEBHOOKS?: object;
}

/** The one WebhookOutbox verb the hand-over calls (webhook-outbox.ts). */
interface WebhookEnqueue {
  enqueue(messages: WebhookMessageInput[], now: number): Promise<unknown>;
}

export async function handOffToWebhooks(env: WebhookHandOffEnv, events: AuditEvent[], now = Date.now()): Promise<void> {
  // A Worker without the webhook queues (none in this deployment's config) hands nothing over.
  if (!env.WEBHOOKS) return;
  const made = events.flatMap((event) => {
    try {
      return webhookEventsOf(event).map((w) => ({ event, w }));
    } catch {
      // An event the catalogue cannot read makes no webhook; it must not hold up the audit trail.
      return [];
    }
  });
  if (made.length === 0) return;
  const tenantOf = (e: AuditEvent) => e.tenant ?? "default";
  const stale = [...new Set(made.map(({ event }) => tenantOf(event)))].filter(
    (t) => (subscribers.get(t)?.at ?? Number.NEGATIVE_INFINITY) <= now - CACHE_MS,
  );
  if (stale.length) {
    const { results } = await env.DB.prepare(
      "SELECT id, tenant, events, shard FROM webhook_endpoints WHERE enabled = 1 AND tenant IN (SELECT value FROM json_each(?))",
    )
      .bind(JSON.stringify(stale))
      .all<{ id: string; tenant: string; events: string; shard: string }>();
    if (subscribers.size > 10_000) subscribers.clear();
    for (const t of stale) subscribers.set(t, { at: now, list: [] });
    for (const r of results)
      subscribers.get(r.tenant)?.list.push({ id: r.id, events: JSON.parse(r.events) as string[], shard: r.shard });
  }
  const byShard = new Map<string, WebhookMessageInput[]>();
  for (const { event, w } of made) {
    const tenant = tenantOf(event);
    const to = (subscribers.get(tenant)?.list ?? []).filter((s) => subscribes(s.events, w.type));
    if (to.length === 0) continue;
    const message = webhookMessage(event.id, event.at, tenant, w);
    for (const s of to) {
      const queue = byShard.get(s.shard) ?? [];
      queue.push({ ...message, endpoint_id: s.id, tenant });
      byShard.set(s.shard, queue);
    }
  }
  await Promise.all(
    [...byShard].map(([address, messages]) => stubAt<WebhookEnqueue>(env, "webhook", address).enqueue(messages, now)),
  );
}
