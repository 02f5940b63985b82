import { errorField, log } from "../../../durable-objects/contract/log";
import type { Config } from "../config/config";
import { LIVE_STORES, type LiveStoreName } from "../config/shards";
import type { Env } from "../platform/env";
import { unavailable } from "../platform/errors";
import { firstLiveGeneration, withGenerations } from "./generations";

/**
 * Shard generations appended live (issue 13): rows of D1 `shard_generations`, after the generations
 * SHARDS lists, read by each isolate at most every `shard_config_cache_seconds`. A generation is
 * routed as soon as an isolate reads it, and issued into only from its `issue_from`, which the admin
 * API sets beyond that cache: by then every isolate routes it (accept before issue).
 */
interface LiveGeneration {
  store: LiveStoreName;
  gen: number;
  shards: number;
  issue_from: number;
}

let cache: { readAt: number; rows: LiveGeneration[] } | null = null;
const merged = new WeakMap<Config, { rows: LiveGeneration[]; config: Config }>();

/** The live generations, from this isolate's cache or D1. A failed read keeps what was known. */
export async function liveGenerations(env: Env, config: Config, now = Date.now()): Promise<LiveGeneration[]> {
  const ttl = config.POLICY.shard_config_cache_seconds * 1000;
  if (cache && now - cache.readAt < ttl && now >= cache.readAt) return cache.rows;
  try {
    const { results } = await env.DB.prepare(
      "SELECT store, gen, shards, issue_from FROM shard_generations ORDER BY store, gen",
    ).all<LiveGeneration>();
    cache = { readAt: now, rows: results.filter((r) => (LIVE_STORES as readonly string[]).includes(r.store)) };
  } catch (err) {
    // Without them an isolate would refuse every id of a live generation as made up: with nothing
    // known yet, answer 503 (retry) rather than guess; with something known, keep it and retry soon.
    log("warn", "live shard generations could not be read", { error: errorField(err) });
    if (!cache) throw unavailable(1);
    cache = { readAt: now - ttl + 5_000, rows: cache.rows };
  }
  return cache.rows;
}

/** The config with the live generations appended to SHARDS (the same object while nothing changed). */
export async function withLiveShards(env: Env, config: Config): Promise<Config> {
  const rows = await liveGenerations(env, config);
  if (rows.length === 0) return config;
  const hit = merged.get(config);
  if (hit && hit.rows === rows) return hit.config;
  // A row continues its store's generations; one SHARDS already lists (the operator folded it into
  // the config) is ignored. The first row may leave a gap after SHARDS' list: the generations in it
  // were drained and their rows deleted (retireDrainedGenerations). Any later gap ends the list.
  const next = { ...Object.fromEntries(LIVE_STORES.map((s) => [s, config.SHARDS[s].length])) } as Record<
    LiveStoreName,
    number
  >;
  const seen = new Set<LiveStoreName>();
  const extra: LiveGeneration[] = [];
  for (const row of rows) {
    const listed = config.SHARDS[row.store][row.gen];
    if (listed !== undefined && listed !== row.shards)
      log("error", "SHARDS and a live generation disagree; SHARDS wins, and ids of the other count may be refused", {
        store: row.store,
        gen: row.gen,
        shards: listed,
        live: row.shards,
      });
    if (row.gen < next[row.store] || (seen.has(row.store) && row.gen !== next[row.store])) continue;
    seen.add(row.store);
    next[row.store] = row.gen;
    extra.push(row);
    next[row.store]++;
  }
  const out: Config = { ...config, SHARDS: withGenerations(config.SHARDS, extra) };
  merged.set(config, { rows, config: out });
  return out;
}

/** Forgets the cached generations, so the next request reads D1 (after an append in this isolate). */
export function forgetLiveGenerations(): void {
  cache = null;
}

/**
 * Deletes the rows of live generations that are drained (generations.ts firstLiveGeneration), so a store's
 * list stops growing however often its count changes (issue 38 item 14). Only a prefix of each store's
 * rows goes: the generation ids are routed to now, and every one after it, keep theirs. An isolate
 * that still holds the deleted rows routes nothing new by them: their ids are refused as drained.
 * Returns how many rows went.
 */
export async function retireDrainedGenerations(env: Env, config: Config, now: number): Promise<number> {
  const live = await withLiveShards(env, config);
  const deletes = LIVE_STORES.map((store) =>
    env.DB.prepare("DELETE FROM shard_generations WHERE store = ? AND gen < ?").bind(
      store,
      firstLiveGeneration(live.SHARDS, store, now),
    ),
  );
  const results = await env.DB.batch(deletes);
  const deleted = results.reduce((n, r) => n + (r.meta.changes ?? 0), 0);
  if (deleted) forgetLiveGenerations();
  return deleted;
}
