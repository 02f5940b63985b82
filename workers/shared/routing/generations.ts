import {
  type Generations,
  type LiveStoreName,
  type ShardConfig,
  type ShardedName,
  shardConfig,
} from "../config/shards";

/**
 * Each region's generations of shard counts, and the live ones appended through the admin API: which
 * generation new ids and keys go to (`currentGeneration`), which ones are drained and retired
 * (`DRAIN_MS`, `firstLiveGeneration`), the counts a region follows (`shardsIn`) and SHARDS with the live
 * generations appended (`withGenerations`). The lists themselves are parsed by config/shards.ts.
 */

/** Every sharded object: the five login stores, the mail outbox and the audit buffer. */
export type ShardedStore = Exclude<keyof ShardConfig, "issueFrom" | "regions">;

/**
 * The generation new ids and keys go to: the newest one whose `from` has come. A generation appended
 * with a later `from` is routed (parseId, routeKeyIn) but not yet issued into.
 */
export function currentGeneration(shards: ShardConfig, store: ShardedStore, now = Date.now()): number {
  const from = shards.issueFrom?.[store] ?? [];
  const counts = shards[store];
  // A hole is a retired generation whose row was deleted (retireDrainedGenerations): never current.
  for (let gen = counts.length - 1; gen > 0; gen--)
    if (counts[gen] !== undefined && (from[gen] ?? 0) <= now) return gen;
  return 0;
}

const DAY = 86_400_000;

/**
 * How long after a generation stopped being issued into (its successor began) it can still hold live
 * state, by store: the longest any policy (a tenant's included) lets that state live, and a day more.
 * Past it the generation is drained and retired (issue 27 item 13): its ids are refused like made-up
 * ones (they would be expired), and fan-outs, stats and plans no longer wake its shards.
 */
export const DRAIN_MS: Record<ShardedStore, number> = {
  // A login transaction (at most an hour) and an address's counts (a day, carried to the next generation).
  challenge: 2 * DAY,
  // Codes (at most 10 minutes), spent-code marks (at most an access token's life, a day), device requests.
  code: 2 * DAY,
  // Sessions (at most 30 days) and login transactions.
  session: 31 * DAY,
  // sids and jtis: a sid is made with its session (up to 30 days), and a refresh family begun late in
  // that session names it for 365 days more.
  revocation: (30 + 365 + 2) * DAY,
  refresh: 366 * DAY,
  // Mail retries and audit events waiting for D1: hours.
  mail: 2 * DAY,
  audit: 2 * DAY,
  // An endpoint's queue stays where it was created: never retired.
  webhook: Number.POSITIVE_INFINITY,
  // Entities live until deleted: never retired.
  entity: Number.POSITIVE_INFINITY,
};

/**
 * The oldest generation of a store that may still hold live state: every one before it is drained.
 * A generation whose successor has no known start (a static SHARDS list without `from`) is never
 * retired.
 */
export function firstLiveGeneration(shards: ShardConfig, store: ShardedStore, now = Date.now()): number {
  const from = shards.issueFrom[store] ?? [];
  for (let gen = shards[store].length - 1; gen > 0; gen--) {
    const began = from[gen] ?? 0;
    if (began > 0 && began <= now - DRAIN_MS[store]) return gen;
  }
  return 0;
}

const inRegion = new WeakMap<ShardConfig, Map<string, ShardConfig>>();

/**
 * The counts a region's shards follow: its own list for a store SHARDS.regions gives it, the default
 * list (live generations included) for every other store.
 */
export function shardsIn(shards: ShardConfig, region: string): ShardConfig {
  const own = shards.regions[region];
  if (!own) return shards;
  let byRegion = inRegion.get(shards);
  if (!byRegion) {
    byRegion = new Map();
    inRegion.set(shards, byRegion);
  }
  const hit = byRegion.get(region);
  if (hit) return hit;
  const names = Object.keys(shards) as ShardedName[];
  const lists = Object.fromEntries(
    names.map((n) => [n, own[n] ?? { counts: shards[n], from: [...shards.issueFrom[n]] }]),
  ) as Record<ShardedName, Generations>;
  const out = shardConfig(lists, {});
  byRegion.set(region, out);
  return out;
}

/**
 * SHARDS with generations appended (live ones, from D1): counts and issue times at their generation's
 * number, after each store's own. Generations between SHARDS' last and the first row were retired and
 * their rows deleted: they stay holes, routed by nothing. The result is a ShardConfig like the parsed one.
 */
export function withGenerations(
  base: ShardConfig,
  extra: { store: LiveStoreName; gen: number; shards: number; issue_from: number }[],
): ShardConfig {
  const names = Object.keys(base) as ShardedName[];
  const counts = Object.fromEntries(names.map((n) => [n, [...base[n]]])) as Record<string, number[]>;
  const from = Object.fromEntries(names.map((n) => [n, [...base.issueFrom[n]]])) as Record<string, number[]>;
  for (const g of extra) {
    (counts[g.store] as number[])[g.gen] = g.shards;
    (from[g.store] as number[])[g.gen] = g.issue_from;
  }
  const lists = Object.fromEntries(
    names.map((n) => [n, { counts: counts[n] as number[], from: from[n] as number[] }]),
  ) as Record<ShardedName, Generations>;
  return shardConfig(lists, base.regions as Record<string, Partial<Record<ShardedName, Generations>>>);
}
