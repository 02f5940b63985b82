/**
 * The shard planner (issue 13): each store's shard count from expected traffic, by the two limits of
 * docs/sharding.md. A shard should take at most about 300 calls a second at peak (one Durable Object
 * serves about 1,000 simple ones, and latency climbs well before), and at least about 3 a second at
 * typical load to stay warm. Where both cannot hold, the peak wins: a cold start costs tens of
 * milliseconds, an overloaded shard seconds or a 503. Pure and import-free, so `npm run plan` (Node)
 * and `POST /admin/v1/shards/plan` (op-mgmt) run the same code.
 */

export const PEAK_CALLS_PER_SHARD = 300;
export const WARM_CALLS_PER_SHARD = 3;
/**
 * The most shards one generation of a store may have: what `POST /admin/v1/shards` accepts, and so the
 * most a plan proposes (issue 27 item 13). Past it (300,000 calls a second in one region), traffic is
 * split over regions, each with its own counts.
 */
export const MAX_SHARDS = 1024;

export interface TrafficInput {
  /** Logins a second at the busiest minute. */
  peak: number;
  /** Logins a second on an ordinary hour. */
  typical: number;
  /** Refreshes each login makes in its life, on average. */
  refresh_per_login?: number;
  /** Userinfo and introspection calls a second (they read the revocation store). */
  userinfo_per_s?: number;
  /** Issue 24: entities (with their grants) the entity store will hold; it is sized by them, not by logins. */
  entities?: number;
}

/**
 * An entity with ten attributes and its indexes, with room for its grants: `npm run bench:import`
 * measured 551 bytes an entity at 10 million (5.5 GB in 16 shards, docs/benchmarks/2026-11-25-entities.md).
 */
export const ENTITY_BYTES = 700;
/** What an entity shard is planned to hold: half of where the controller splits it (4 GiB by default). */
export const ENTITY_SHARD_TARGET_BYTES = 2 * 1024 ** 3;

/**
 * The entity store's shard count for `entities`: enough that each holds at most
 * ENTITY_SHARD_TARGET_BYTES (no fewer than the default 16), so the first split is far off.
 */
export function planEntityShards(entities: number): EntityPlan {
  const bytes = entities * ENTITY_BYTES;
  const needed = Math.max(16, Math.ceil(bytes / ENTITY_SHARD_TARGET_BYTES));
  const shards = Math.min(needed, MAX_SHARDS);
  return {
    store: "entity",
    entities,
    bytes,
    shards,
    bytes_per_shard: Math.round(bytes / shards),
    reasoning:
      `${entities} entities at about ${ENTITY_BYTES} bytes each (attributes, indexes, grants) is ${round(bytes / 1024 ** 3)} GiB; ` +
      `at most ${ENTITY_SHARD_TARGET_BYTES / 1024 ** 3} GiB a shard (half the 4 GiB split point, well under a Durable Object's 10 GB) needs ${needed}` +
      (needed > MAX_SHARDS ? `: capped at ${MAX_SHARDS}; split the tenants over regions` : ""),
  };
}

export interface EntityPlan {
  store: "entity";
  entities: number;
  bytes: number;
  shards: number;
  bytes_per_shard: number;
  reasoning: string;
}

export interface StorePlan {
  store: "session" | "challenge" | "code" | "revocation" | "refresh";
  /** From the model of a login (`planShards`); null for a plan from measured rates. */
  calls_per_login: number | null;
  peak_calls_per_s: number;
  typical_calls_per_s: number;
  shards: number;
  peak_per_shard: number;
  typical_per_shard: number;
  reasoning: string;
}

/**
 * Durable Object calls per login by store, as `test/login/login-budget.test.ts` asserts them for a
 * returning user with `offline_access`, plus what each refresh adds: a rotation in the family's shard
 * and a check in the revocation shard.
 */
function callsPerLogin(refreshes: number): Record<StorePlan["store"], number> {
  return { session: 1, challenge: 2, code: 1, refresh: 1 + refreshes, revocation: 1 + refreshes };
}

const round = (n: number) => Math.round(n * 10) / 10;

export function planShards(input: TrafficInput): StorePlan[] {
  const perLogin = callsPerLogin(input.refresh_per_login ?? 0);
  const extra = (store: StorePlan["store"]) => (store === "revocation" ? (input.userinfo_per_s ?? 0) : 0);
  return (Object.keys(perLogin) as StorePlan["store"][]).map((store) =>
    planStore(
      store,
      perLogin[store],
      input.peak * perLogin[store] + extra(store),
      input.typical * perLogin[store] + extra(store),
    ),
  );
}

/**
 * The plan from calls a second measured on each store (`POST /admin/v1/shards/plan` with `measured`):
 * what was measured is the typical load, `peakFactor` times it the peak. No calls-per-login model:
 * whatever the traffic mix, these are the calls the stores took.
 */
export function planFromRates(measured: Record<StorePlan["store"], number>, peakFactor: number): StorePlan[] {
  return (Object.keys(measured) as StorePlan["store"][]).map((store) =>
    planStore(store, null, measured[store] * peakFactor, measured[store]),
  );
}

function planStore(store: StorePlan["store"], perLogin: number | null, peak: number, typical: number): StorePlan {
  const needed = Math.max(1, Math.ceil(peak / PEAK_CALLS_PER_SHARD));
  const warmAtMost = Math.max(1, Math.floor(typical / WARM_CALLS_PER_SHARD));
  const shards = Math.min(needed, MAX_SHARDS);
  const reasoning =
    `${round(peak)} calls/s at peak needs ${needed} shard(s) at ${PEAK_CALLS_PER_SHARD}/s each; ` +
    `${round(typical)} calls/s typical keeps at most ${warmAtMost} warm at ${WARM_CALLS_PER_SHARD}/s each` +
    (needed > MAX_SHARDS
      ? `: capped at ${MAX_SHARDS}, the most one generation may have (POST /admin/v1/shards); ` +
        `split this traffic over regions, each with its own counts`
      : needed > warmAtMost
        ? `: the bounds cross, so the peak wins (${shards}; some shards go cold between peaks)`
        : `: ${shards}`);
  return {
    store,
    calls_per_login: perLogin,
    peak_calls_per_s: round(peak),
    typical_calls_per_s: round(typical),
    shards,
    peak_per_shard: round(peak / shards),
    typical_per_shard: round(typical / shards),
    reasoning,
  };
}
