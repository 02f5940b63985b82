import type { Context } from "hono";
import { z } from "zod";
import { auditMonths, monthBounds, pageEntrySql, pagesTable } from "../../../durable-objects/contract/audit-trail";
import type { PasskeyCounters, ShardStats } from "../../../durable-objects/contract/verbs";
import { askPeers, type IsolateCounters, isolateSnapshot } from "../../shared/app/isolate";
import { STORE_NAMES } from "../../shared/config/shards";
import type { Env } from "../../shared/platform/env";
import { json, NO_STORE } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { currentGeneration, type ShardedStore, shardsIn } from "../../shared/routing/generations";
import { allShards, type ShardRef } from "../../shared/routing/shard-refs";
import { shard } from "../../shared/routing/stores";
import { billLines, type PerLogin } from "./bill";
import { body } from "./validation";

/** The counters a store's shards sum to, and the deployment's totals sum over stores. */
const SUMMED = [
  "rows_written",
  "table_rows_written",
  "rows_read",
  "alarms_set",
  "alarm_runs",
  "d1_queries",
  "d1_rows_read",
  "d1_rows_written",
  "pending_deletes",
  "audit_events_flushed",
  "storage_bytes",
] as const;
type Summed = Record<(typeof SUMMED)[number], number>;
const sumOf = <T extends Summed>(items: T[]): Summed =>
  Object.fromEntries(SUMMED.map((k) => [k, items.reduce((a, x) => a + (x[k] ?? 0), 0)])) as Summed;

/**
 * Every sharded Durable Object: the five stores, the write-behind objects, and the entity store (which
 * no login calls: counted here so a budget test would see one that did).
 */
const OBJECTS: ShardedStore[] = [...STORE_NAMES, "mail", "audit", "webhook", "entity"];

function statsOf(env: Env, ref: ShardRef): Promise<ShardStats> {
  // Every one of these classes has `stats()`; the stub's type is not narrowed over the union here.
  return (
    shard(env, ref.store, ref) as unknown as { stats(o: { pendingDeletes: boolean }): Promise<ShardStats> }
  ).stats({ pendingDeletes: true });
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
  return json(await platformStats(c), 200, NO_STORE);
}

/** The platform's counters, as `GET /admin/v1/stats` answers them. */
async function platformStats(c: Context<AppEnv>) {
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
            ...sumOf(rows),
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
  // This isolate's counters and those of op-auth's and op-token's isolates it reaches.
  const isolates: IsolateCounters[] = [
    isolateSnapshot(),
    ...peers.filter((p): p is IsolateCounters => p !== null && typeof p === "object"),
  ];
  const workers = (k: keyof IsolateCounters) => isolates.reduce((a, p) => a + (p[k] ?? 0), 0);
  const objects = sumOf(stores.map(([, s]) => s));
  const calls = stores.reduce((a, [, s]) => a + s.total, 0);
  // Issue 42: passkeys held and what their verbs did, over every ChallengeStore shard.
  const passkeys: PasskeyCounters = {
    sign_ins: 0,
    refused: 0,
    counter_regressions: 0,
    registered: 0,
    removed: 0,
    stored: 0,
  };
  for (const row of stores.find(([name]) => name === "challenge")?.[1].shards ?? [])
    for (const k of Object.keys(passkeys) as (keyof PasskeyCounters)[]) passkeys[k] += row.passkeys?.[k] ?? 0;
  return {
    stores: Object.fromEntries(stores),
    webhooks: webhooks.reduce(
      (sum, w) => {
        for (const k of Object.keys(sum) as (keyof typeof sum)[]) sum[k] += w[k];
        return sum;
      },
      { pending: 0, delivered: 0, failed: 0, attempts_ok: 0, attempts_failed: 0 },
    ),
    passkeys,
    totals: {
      durable_object_calls: calls,
      rows_written: objects.rows_written,
      // Of those, the rows that made expiry buckets' and outboxes' tables (shared by every row they take).
      table_rows_written: objects.table_rows_written,
      // The Workers' D1 statements (a login's budget is none once its client and user are known).
      d1_queries: workers("d1_queries"),
    },
    // Everything Cloudflare bills, for `npm run cost` and an operator's own sums (issue 28, docs/cost.md).
    billing: {
      worker_requests: workers("requests"),
      durable_object_requests: calls + objects.alarm_runs,
      durable_object_rows_written: objects.rows_written + objects.alarms_set,
      durable_object_rows_read: objects.rows_read,
      durable_object_alarms_set: objects.alarms_set,
      durable_object_alarm_runs: objects.alarm_runs,
      durable_object_pending_deletes: objects.pending_deletes,
      durable_object_storage_bytes: objects.storage_bytes,
      d1_queries: workers("d1_queries") + objects.d1_queries,
      d1_rows_written: workers("d1_rows_written") + objects.d1_rows_written,
      d1_rows_read: workers("d1_rows_read") + objects.d1_rows_read,
      // The largest size a statement reported last: D1's size, as of the latest write anyone saw.
      d1_size_bytes: Math.max(
        ...isolates.map((p) => p.d1_size_bytes ?? 0),
        ...stores.flatMap(([, s]) => s.shards.map((x) => x.d1_size_bytes ?? 0)),
      ),
    },
  };
}

/**
 * `GET /admin/v1/tenants/{tenant}/stats`: what a tenant holds (users, clients, signing keys) and its
 * sign-ins over the last 24 hours, from D1. The Durable Object shards are shared by every tenant, so
 * their counters are the platform's (`GET /admin/v1/stats`).
 */
export async function tenantStats(c: Context<AppEnv>): Promise<Response> {
  const tenant = c.get("config").TENANT;
  const since = Date.now() - 86_400_000;
  // Sign-ins from the trail's pages (each counts its own), in the months the last day touches, and
  // from the table before the months.
  const months = (await auditMonths(c.env.DB)).filter((m) => monthBounds(m).end > since);
  const [users, clients, keys, signIns, ...monthly] = await c.env.DB.batch<{ n: number }>([
    c.env.DB.prepare("SELECT COUNT(*) AS n FROM users WHERE tenant = ?").bind(tenant),
    c.env.DB.prepare("SELECT COUNT(*) AS n FROM clients WHERE tenant = ?").bind(tenant),
    c.env.DB.prepare(
      "SELECT COUNT(*) AS n FROM signing_keys WHERE tenant = ? AND (retires_at IS NULL OR retires_at > ?)",
    ).bind(tenant, Date.now()),
    c.env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE tenant = ? AND at >= ? AND kind = 'sign_in'").bind(
      tenant,
      since,
    ),
    ...months.map((m) =>
      c.env.DB.prepare(
        `SELECT COALESCE(SUM(sign_ins), 0) AS n FROM ${pagesTable(m)} WHERE tenant = ? AND at >= ?`,
      ).bind(tenant, since),
    ),
  ]);
  const n = (r: D1Result<{ n: number }> | undefined) => r?.results[0]?.n ?? 0;
  return json(
    {
      tenant,
      users: n(users),
      clients: n(clients),
      signing_keys: n(keys),
      sign_ins_24h: n(signIns) + monthly.reduce((a, r) => a + n(r), 0),
    },
    200,
    NO_STORE,
  );
}

/** The platform's shard counters at `/admin/v1/stats`; a tenant's own figures under its path. */
export function stats(c: Context<AppEnv>): Promise<Response> {
  return c.get("tenantRoute").via === "path" ? tenantStats(c) : shardStats(c);
}

export const billInput = z
  .object({
    /** How long to watch the counters and count the logins. */
    window_seconds: z.number().int().min(1).max(60).default(10),
  })
  .strict();

/**
 * The audit outboxes flush an event to D1 within 5 s (AUDIT_FLUSH_DELAY_MS, durable-objects/audit-outbox.ts);
 * the logins of a window are counted once the last of them is there.
 */
const AUDIT_SETTLE_MS = 8_000;

/**
 * Sign-ins of every tenant between `from` (inclusive) and `to` (exclusive), from the audit trail's
 * monthly pages (durable-objects/contract/audit-trail.ts): each page lists its events' kinds and times,
 * so no event row is read. Every tenant's pages of the month are scanned: admin use only.
 */
export async function signInsBetween(db: D1Database, from: number, to: number): Promise<number> {
  const entry = pageEntrySql("e");
  const months = (await auditMonths(db)).filter((m) => {
    const b = monthBounds(m);
    return b.end > from && b.start < to;
  });
  if (!months.length) return 0;
  const results = await db.batch<{ n: number }>(
    months.map((m) =>
      db
        .prepare(
          `SELECT COUNT(*) AS n FROM ${pagesTable(m)} AS p, json_each(p.events) AS e
           WHERE p.at >= ? AND p.first_at < ? AND ${entry.kind} = 'sign_in' AND ${entry.at} >= ? AND ${entry.at} < ?`,
        )
        .bind(from, to, from, to),
    ),
  );
  return results.reduce((a, r) => a + (r.results[0]?.n ?? 0), 0);
}

export type PlatformStats = Awaited<ReturnType<typeof platformStats>>;
type ShardRow = PlatformStats["stores"][string]["shards"][number];

/** Counters a shard adds to from its start (reset when it restarts), as opposed to levels it reports (storage). */
const RESET_COUNTERS = [
  "served",
  "rows_written",
  "rows_read",
  "alarms_set",
  "alarm_runs",
  "d1_rows_read",
  "d1_rows_written",
] as const;
const LEVELS = ["pending_deletes", "storage_bytes"] as const;

/**
 * What each billed counter grew by between two reads of the stats, shard by shard: a shard that
 * restarted in between (its `since` moved: evicted while idle, its counters reset) counts what it did
 * since, and levels (storage, rows due for deletion) their difference. The Workers' isolates report no
 * start: a counter that went down is an isolate replaced, and counts what the new one did.
 */
export function billGrowth(a: PlatformStats, b: PlatformStats) {
  const keyOf = (store: string, r: ShardRow) => `${store}/${r.region}/${r.generation}/${r.shard}`;
  const earlier = new Map<string, ShardRow>();
  for (const [store, s] of Object.entries(a.stores)) for (const r of s.shards) earlier.set(keyOf(store, r), r);
  const objects = Object.fromEntries([...RESET_COUNTERS, ...LEVELS].map((k) => [k, 0])) as Record<
    (typeof RESET_COUNTERS)[number] | (typeof LEVELS)[number],
    number
  >;
  const stores: Record<string, { calls: number; rows: number }> = {};
  for (const [store, s] of Object.entries(b.stores)) {
    const mine = { calls: 0, rows: 0 };
    for (const r of s.shards) {
      const was = earlier.get(keyOf(store, r));
      const restarted = !was || was.since !== r.since;
      const grew = (k: (typeof RESET_COUNTERS)[number]) => (r[k] ?? 0) - (restarted ? 0 : (was?.[k] ?? 0));
      for (const k of RESET_COUNTERS) objects[k] += grew(k);
      for (const k of LEVELS) objects[k] += (r[k] ?? 0) - (was?.[k] ?? 0);
      mine.calls += grew("served");
      mine.rows += grew("rows_written") + grew("alarms_set");
    }
    stores[store] = mine;
  }
  // The Workers' part of the billing block: what the Durable Objects' rows do not make of it.
  const sumObjects = (x: PlatformStats, k: "d1_rows_read" | "d1_rows_written") =>
    Object.values(x.stores).reduce((sum, s) => sum + s.shards.reduce((t, r) => t + (r[k] ?? 0), 0), 0);
  const isolate = (k: "worker_requests" | "d1_rows_read" | "d1_rows_written") => {
    const of = (x: PlatformStats) => x.billing[k] - (k === "worker_requests" ? 0 : sumObjects(x, k));
    const [before, now] = [of(a), of(b)];
    return now >= before ? now - before : now;
  };
  const billed: PerLogin = {
    worker_requests: isolate("worker_requests"),
    durable_object_requests: objects.served + objects.alarm_runs,
    durable_object_rows_written: objects.rows_written + objects.alarms_set,
    durable_object_later_deletes: objects.pending_deletes,
    durable_object_rows_read: objects.rows_read,
    d1_rows_written: isolate("d1_rows_written") + objects.d1_rows_written,
    d1_rows_read: isolate("d1_rows_read") + objects.d1_rows_read,
    durable_object_storage_bytes: objects.storage_bytes,
    d1_storage_bytes: b.billing.d1_size_bytes - a.billing.d1_size_bytes,
  };
  return { billed, stores };
}

/**
 * `POST /admin/v1/stats/bill` (issue 43, docs/cost.md): what a login costs on the deployment as it runs.
 * The counters of `GET /admin/v1/stats` are read twice, `window_seconds` apart; the logins in between
 * are the audit trail's sign-ins (counted once the outboxes have flushed them); each billed counter's
 * difference over the logins is priced per million logins (bill.ts). Also each store's calls and rows
 * per login. With no login in the window there is nothing to divide by: `logins` 0 and no lines.
 */
export async function measureBill(c: Context<AppEnv>): Promise<Response> {
  const { window_seconds } = await body(c, billInput);
  const read = async () => {
    const started = Date.now();
    const stats = await platformStats(c);
    return { stats, at: Math.round((started + Date.now()) / 2) };
  };
  const before = await read();
  await scheduler.wait(window_seconds * 1000);
  const after = await read();
  await scheduler.wait(AUDIT_SETTLE_MS);
  const logins = await signInsBetween(c.env.DB, before.at, after.at);
  const growth = billGrowth(before.stats, after.stats);
  const per = (n: number) => (logins ? n / logins : 0);
  const perLogin = Object.fromEntries(
    Object.entries(growth.billed).map(([k, v]) => [k, per(v)]),
  ) as unknown as PerLogin;
  const stores = Object.fromEntries(
    Object.entries(growth.stores).map(([store, g]) => [store, { calls: per(g.calls), rows_written: per(g.rows) }]),
  );
  const lines = logins ? billLines(perLogin) : [];
  return json(
    {
      window_seconds,
      from: new Date(before.at).toISOString(),
      to: new Date(after.at).toISOString(),
      logins,
      per_login: logins ? perLogin : null,
      stores: logins ? stores : null,
      lines,
      usd_per_million: logins ? lines.reduce((s, l) => s + l.usd_per_million, 0) : null,
      not_priced: ["Workers CPU (no counter has it: npm run cost measures it)", "mail (priced by its provider)"],
    },
    200,
    NO_STORE,
  );
}
