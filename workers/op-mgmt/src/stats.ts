import type { Context } from "hono";
import type { AppEnv } from "../../shared/app";
import { STORE_NAMES } from "../../shared/config";
import type { Env } from "../../shared/env";
import { json, NO_STORE } from "../../shared/http";
import { askPeers, isolateCounters } from "../../shared/isolate";
import { allShards, currentGeneration, type ShardedStore, type ShardRef, shardsIn } from "../../shared/router";
import { shard } from "../../shared/stores";

interface ShardStats {
  served: number;
  rows_written: number;
  since: number;
}

/** Every sharded Durable Object a login can touch: the five stores and the two write-behind objects. */
const OBJECTS: ShardedStore[] = [...STORE_NAMES, "mail", "audit", "webhook"];

function statsOf(env: Env, ref: ShardRef): Promise<ShardStats> {
  // Every one of these classes has `stats()`; the stub's type is not narrowed over the union here.
  return (shard(env, ref.store, ref) as unknown as { stats(): Promise<ShardStats> }).stats();
}

/**
 * `GET /admin/v1/stats`: calls served and rows written per Durable Object shard (every generation of
 * the five stores, the MailOutbox and the AuditBuffer) since each shard started, and D1 statements
 * made by the Workers' isolates (this one, and op-auth's and op-token's where op-mgmt is bound to
 * them). `totals` sums them, so a benchmark or a test divides a difference by the logins in between.
 * Counters live in memory: a shard's reset when it is evicted, an isolate's when it is replaced. Asking
 * wakes idle shards; admin use only.
 */
export async function shardStats(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  const [stores, peers, webhooks] = await Promise.all([
    Promise.all(
      OBJECTS.map(async (store) => {
        const rows = await Promise.all(
          allShards(config, store).map(async (ref) => ({
            region: ref.place.region,
            generation: ref.gen,
            shard: ref.shard,
            ...(await statsOf(c.env, ref)),
          })),
        );
        const served = rows.map((r) => r.served);
        const total = served.reduce((a, b) => a + b, 0);
        const current = rows
          .filter((r) => r.generation === currentGeneration(shardsIn(config.SHARDS, r.region), store))
          .map((r) => r.served);
        return [
          store,
          {
            total,
            rows_written: rows.reduce((a, r) => a + r.rows_written, 0),
            // Busiest shard of the current generations over the mean: 1.0 is a perfect spread.
            imbalance: total ? Math.max(...current) / (current.reduce((a, b) => a + b, 0) / current.length || 1) : null,
            shards: rows.map((r) => ({ ...r, since: new Date(r.since).toISOString() })),
          },
        ] as const;
      }),
    ),
    askPeers(c.env, config.ADMIN_TOKEN, "GET", "/__keyway/counters"),
    // Webhook messages by status in every queue, and attempts since each queue started (issue 25).
    Promise.all(allShards(config, "webhook").map((ref) => shard(c.env, "webhook", ref).webhookCounts())),
  ]);
  const d1FromPeers = peers.reduce<number>(
    (sum, p) => sum + ((p as { d1_queries?: number } | null)?.d1_queries ?? 0),
    0,
  );
  return json(
    {
      stores: Object.fromEntries(stores),
      webhooks: webhooks.reduce(
        (sum, w) => {
          for (const k of Object.keys(sum) as (keyof typeof sum)[]) sum[k] += w[k];
          return sum;
        },
        { pending: 0, delivered: 0, failed: 0, attempts_ok: 0, attempts_failed: 0 },
      ),
      totals: {
        durable_object_calls: stores.reduce((a, [, s]) => a + s.total, 0),
        rows_written: stores.reduce((a, [, s]) => a + s.rows_written, 0),
        d1_queries: isolateCounters.d1_queries + d1FromPeers,
      },
    },
    200,
    NO_STORE,
  );
}

/**
 * `GET /admin/v1/tenants/{tenant}/stats`: what a tenant holds (users, clients, signing keys) and its
 * sign-ins over the last 24 hours, from D1. The Durable Object shards are shared by every tenant, so
 * their counters are the platform's (`GET /admin/v1/stats`).
 */
export async function tenantStats(c: Context<AppEnv>): Promise<Response> {
  const tenant = c.get("config").TENANT;
  const since = Date.now() - 86_400_000;
  const [users, clients, keys, signIns] = await c.env.DB.batch<{ n: number }>([
    c.env.DB.prepare("SELECT COUNT(*) AS n FROM users WHERE tenant = ?").bind(tenant),
    c.env.DB.prepare("SELECT COUNT(*) AS n FROM clients WHERE tenant = ?").bind(tenant),
    c.env.DB.prepare(
      "SELECT COUNT(*) AS n FROM signing_keys WHERE tenant = ? AND (retires_at IS NULL OR retires_at > ?)",
    ).bind(tenant, Date.now()),
    c.env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE tenant = ? AND at >= ? AND kind = 'sign_in'").bind(
      tenant,
      since,
    ),
  ]);
  const n = (r: D1Result<{ n: number }> | undefined) => r?.results[0]?.n ?? 0;
  return json(
    { tenant, users: n(users), clients: n(clients), signing_keys: n(keys), sign_ins_24h: n(signIns) },
    200,
    NO_STORE,
  );
}

/** The platform's shard counters at `/admin/v1/stats`; a tenant's own figures under its path. */
export function stats(c: Context<AppEnv>): Promise<Response> {
  return c.get("tenantRoute").via === "path" ? tenantStats(c) : shardStats(c);
}
