import type { Config } from "../config/config";
import { GLOBAL_REGION } from "../config/regions";
import type { ShardConfig } from "../config/shards";
import { currentGeneration, firstLiveGeneration, type ShardedStore, shardsIn } from "./generations";
import { type Placement, placementOf } from "./placement";

/**
 * The shard of a key: a store's shard for a key is `fnv1a(key) mod count`, where count is the store's
 * shard count in a region's current generation (the last entry of its list, `shardsIn`). An id carries
 * the region, generation and shard it was placed in (ids.ts) and is routed by them, never by today's
 * count. Also a shard's object name and address, every shard of a store (fan-outs, stats), and a key's
 * shards in earlier generations.
 */

export interface ShardRef {
  store: ShardedStore;
  /** The region and how its objects are placed (location hint, jurisdiction). */
  place: Placement;
  gen: number;
  shard: number;
}

/** What routing reads of the config. */
export type Routing = Pick<Config, "SHARDS" | "REGIONS">;

/** A region's shard counts (its own lists, or the default ones); null for a region the config lacks. */
export function regionShards(routing: Routing, region: string): ShardConfig | null {
  if (!(region in routing.REGIONS.regions)) return null;
  return shardsIn(routing.SHARDS, region);
}

export function fnv1a(input: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < input.length; i++) {
    h ^= input.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The addresses of a key's shards in the generations before `ref`'s in its region that were current
 * at some time in the last `windowMs` (newest first): where state a limit counts may still be, after
 * a shard count change moved the key (issue 27 item 9). A generation whose successor has no known
 * start (a static SHARDS list without `from`) counts as recent: nothing says its counts are gone.
 */
export function recentEarlierShards(
  routing: Routing,
  ref: ShardRef,
  key: string,
  windowMs: number,
  now = Date.now(),
): string[] {
  const from = shardsIn(routing.SHARDS, ref.place.region).issueFrom[ref.store] ?? [];
  const out: string[] = [];
  const first = firstLiveGeneration(shardsIn(routing.SHARDS, ref.place.region), ref.store, now);
  for (let gen = ref.gen - 1; gen >= first; gen--) {
    // Generation `gen` was current until generation `gen + 1` began.
    const began = from[gen + 1] ?? 0;
    if (began > 0 && began <= now - windowMs) break;
    const earlier = routeKeyIn(routing, ref.store, key, gen, ref.place.region);
    if (earlier) out.push(shardAddress(earlier));
  }
  return out;
}

/**
 * The shard a key belongs to in a region's current generation (for keys, like an email, that are
 * not issued ids). Throws for a region the config lacks: callers pass a region placement chose.
 */
export function routeKey(routing: Routing, store: ShardedStore, key: string, region: string): ShardRef {
  const shards = regionShards(routing, region);
  if (!shards) throw new Error(`region ${region} is not configured`);
  return routeKeyIn(routing, store, key, currentGeneration(shards, store), region) as ShardRef;
}

/**
 * The shard of a key in generation `gen` of a region, for a login that pinned the generation it
 * began in (its later steps find the same shard after a count changed). Null for a region or
 * generation the config lacks.
 */
export function routeKeyIn(
  routing: Routing,
  store: ShardedStore,
  key: string,
  gen: number,
  region: string,
): ShardRef | null {
  const place = placementOf(routing.REGIONS, region);
  const count = place ? shardsIn(routing.SHARDS, region)[store][gen] : undefined;
  if (!place || count === undefined) return null;
  return { store, place, gen, shard: fnv1a(key) % count };
}

/** A shard's object name: `session:apac:g0:s3`; the global region keeps the names from before regions. */
export function objectName(ref: ShardRef): string {
  const region = ref.place.region === GLOBAL_REGION ? "" : `${ref.place.region}:`;
  return `${ref.store}:${region}g${ref.gen}:s${ref.shard}`;
}

/**
 * A shard's full address, for write-behind items that name the shard their events go to:
 * `[<jurisdiction>/]<object name>[@<hint>]` (stores.ts shardNamed reads it back).
 */
export function shardAddress(ref: ShardRef): string {
  const j = ref.place.jurisdiction ? `${ref.place.jurisdiction}/` : "";
  const hint = ref.place.hint ? `@${ref.place.hint}` : "";
  return `${j}${objectName(ref)}${hint}`;
}

/** Every shard of a store: each configured region's, in each of its generations (admin fan-outs, stats). */
export function allShards(routing: Routing, store: ShardedStore): ShardRef[] {
  return Object.keys(routing.REGIONS.regions).flatMap((region) => {
    const place = placementOf(routing.REGIONS, region) as Placement;
    const shards = shardsIn(routing.SHARDS, region);
    const first = firstLiveGeneration(shards, store);
    return shards[store].flatMap((count, gen) =>
      gen < first ? [] : Array.from({ length: count }, (_, shard) => ({ store, place, gen, shard })),
    );
  });
}

/** A key's shard in every generation of every configured region (fan-outs that must reach all of a key's copies). */
export function keyShardsEverywhere(routing: Routing, store: ShardedStore, key: string): ShardRef[] {
  return Object.keys(routing.REGIONS.regions).flatMap((region) => {
    const shards = shardsIn(routing.SHARDS, region);
    const first = firstLiveGeneration(shards, store);
    return shards[store].flatMap((_, gen) =>
      gen < first ? [] : [routeKeyIn(routing, store, key, gen, region) as ShardRef],
    );
  });
}
