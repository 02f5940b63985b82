import { errorField, log } from "../../../durable-objects/contract/log";
import type { Config } from "../../shared/config/config";
import { MAX_SHARDS } from "../../shared/config/shard-plan";
import { STORE_NAMES, type StoreName } from "../../shared/config/shards";
import { recordAudit } from "../../shared/events/audit";
import type { Env } from "../../shared/platform/env";
import { OAuthError } from "../../shared/platform/errors";
import { currentGeneration } from "../../shared/routing/generations";
import { withLiveShards } from "../../shared/routing/live-shards";
import { type Placement, placementOf } from "../../shared/routing/placement";
import { shard } from "../../shared/routing/stores";
import { appendShardGeneration } from "./shards";

/**
 * The cron that runs only the shard controller (the hourly one runs it too). Not exported from the
 * Worker's entry module: workerd takes every export there as a handler.
 */
export const CONTROLLER_CRON = "*/5 * * * *";

interface Sample {
  shard: number;
  served: number;
  since: number;
}

export interface ControllerDecision {
  store: StoreName | "entity";
  /** Calls a second of the busiest shard and of the whole generation since the last run; null on the first. */
  busiest: number | null;
  total: number | null;
  action: "none" | "grow" | "shrink" | "waiting";
  from?: number;
  to?: number;
}

/**
 * The shard controller (issue 13), run by op-mgmt's cron when `POLICY.shard_controller.enabled`. Each
 * run samples every shard of each store's current generation (its served-call counter) and compares
 * with the last run's samples (D1 `shard_samples`): a counter that restarted (the object was evicted)
 * gives the rate of what it served since it started. A store whose busiest shard is above the ceiling for `runs` runs in a row
 * gets a generation with twice the shards (capped); one whose every shard is below the floor, half.
 * Never sooner than `min_interval_minutes` after its last change, never while a generation is pending.
 * Each change is appended like `POST /admin/v1/shards` and is a `shard_change` audit event.
 */
export async function runShardController(env: Env, base: Config, now: number): Promise<ControllerDecision[]> {
  const policy = base.POLICY.shard_controller;
  const config = await withLiveShards(env, base);
  const decisions: ControllerDecision[] = [];
  // Entity shards grow with what they hold, not with traffic: checked at every run (issue 24).
  try {
    decisions.push(await controlEntitySize(env, config, now));
  } catch (err) {
    log("error", "shard controller: the entity shards could not be sized", { error: errorField(err) });
  }
  if (!policy.enabled) return decisions;
  for (const store of STORE_NAMES) {
    try {
      decisions.push(await controlStore(env, config, store, now));
    } catch (err) {
      log("error", "shard controller: a store could not be sampled", { store, error: errorField(err) });
    }
  }
  return decisions;
}

/**
 * Issue 24: the entity store splits before any shard nears Cloudflare's 10 GB per Durable Object.
 * When the largest shard of the current generation passes `entity_shard_split_bytes`, a generation
 * with twice the shards is appended (the controller on), so new entities go there; existing ones stay
 * in the shard their id names, which then grows only by their grants. With the controller off, the
 * run logs an error instead: the operator appends one (`POST /admin/v1/shards {"store": "entity"}`).
 */
async function controlEntitySize(env: Env, config: Config, now: number): Promise<ControllerDecision> {
  const gen = currentGeneration(config.SHARDS, "entity", now);
  const count = config.SHARDS.entity[gen] as number;
  const place = placementOf(config.REGIONS, config.REGIONS.default) as Placement;
  const sizes = await Promise.all(
    Array.from({ length: count }, async (_, s) => {
      const stats = await shard(env, "entity", { store: "entity", place, gen, shard: s }).stats();
      return stats.storage_bytes;
    }),
  );
  const largest = Math.max(0, ...sizes);
  const limit = config.POLICY.entity_shard_split_bytes;
  if (largest <= limit)
    return { store: "entity", busiest: largest, total: sizes.reduce((a, b) => a + b, 0), action: "none" };
  const to = Math.min(MAX_SHARDS, count * 2);
  if (!config.POLICY.shard_controller.enabled || to === count) {
    log("error", "entity shards: the largest holds more than entity_shard_split_bytes; append a generation", {
      largest,
      limit,
      shards: count,
    });
    return { store: "entity", busiest: largest, total: null, action: "waiting" };
  }
  try {
    await appendShardGeneration(env, config, "entity", to, now);
  } catch (err) {
    if (!(err instanceof OAuthError && err.code === "conflict")) throw err;
    return { store: "entity", busiest: largest, total: null, action: "waiting" };
  }
  await recordAudit(env, config, {
    kind: "shard_change",
    detail: { store: "entity", from: count, to, largest_bytes: largest, trigger: "entity_size" },
  });
  return { store: "entity", busiest: largest, total: null, action: "grow", from: count, to };
}

async function controlStore(env: Env, config: Config, store: StoreName, now: number): Promise<ControllerDecision> {
  const policy = config.POLICY.shard_controller;
  const gen = currentGeneration(config.SHARDS, store, now);
  const count = config.SHARDS[store][gen] as number;
  // The live generations extend the default lists: every region without its own counts for this
  // store follows them, so its shards are sampled together (the busiest of any of them decides).
  const regions = Object.keys(config.REGIONS.regions).filter((r) => !config.SHARDS.regions[r]?.[store]);
  const samples: (Sample & { region: string })[] = await Promise.all(
    regions.flatMap((region) =>
      Array.from({ length: count }, async (_, s) => {
        const ref = { store, place: placementOf(config.REGIONS, region) as Placement, gen, shard: s };
        // Every store has `stats()`; the stub's type is not narrowed over the union of stores here.
        const stub = shard(env, store, ref) as unknown as { stats(): Promise<Sample> };
        const stats = await stub.stats();
        return { region, shard: s, served: stats.served, since: stats.since };
      }),
    ),
  );
  const { results: previous } = await env.DB.prepare(
    "SELECT region, shard, served, since, at FROM shard_samples WHERE store = ? AND gen = ?",
  )
    .bind(store, gen)
    .all<Sample & { region: string; at: number }>();
  await env.DB.batch([
    env.DB.prepare("DELETE FROM shard_samples WHERE store = ? AND gen != ?").bind(store, gen),
    ...samples.map((x) =>
      env.DB.prepare(
        `INSERT INTO shard_samples (store, region, gen, shard, served, since, at) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(store, region, gen, shard) DO UPDATE SET served = excluded.served, since = excluded.since,
           at = excluded.at`,
      ).bind(store, x.region, gen, x.shard, x.served, x.since, now),
    ),
  ]);
  const before = new Map(previous.map((p) => [`${p.region}:${p.shard}`, p]));
  const rates: number[] = [];
  for (const x of samples) {
    const p = before.get(`${x.region}:${x.shard}`);
    if (!p || now <= p.at) continue;
    // A shard evicted and started again since the last sample (idle objects are) counts what it served
    // since it started, as the measured plan does: one idle shard does not stall every decision.
    const restarted = p.since !== x.since || x.served < p.served;
    const from = restarted ? Math.max(p.at, x.since) : p.at;
    if (now <= from) continue;
    rates.push((((restarted ? x.served : x.served - p.served) as number) * 1000) / (now - from));
  }
  if (samples.length === 0 || rates.length < samples.length)
    return { store, busiest: null, total: null, action: "none" };
  const busiest = Math.max(...rates);
  const total = rates.reduce((a, b) => a + b, 0);
  const hot = busiest > policy.ceiling_per_shard;
  const cold = count > 1 && rates.every((r) => r < policy.floor_per_shard);
  const state = (await env.DB.prepare(
    "SELECT hot_runs, cold_runs, last_change_at FROM shard_controller WHERE store = ?",
  )
    .bind(store)
    .first<{ hot_runs: number; cold_runs: number; last_change_at: number }>()) ?? {
    hot_runs: 0,
    cold_runs: 0,
    last_change_at: 0,
  };
  const hotRuns = hot ? state.hot_runs + 1 : 0;
  const coldRuns = cold ? state.cold_runs + 1 : 0;
  let action: ControllerDecision["action"] = "none";
  let to = count;
  if (hotRuns >= policy.runs && count < policy.max_shards) to = Math.min(policy.max_shards, count * 2);
  else if (coldRuns >= policy.runs) to = Math.max(1, Math.floor(count / 2));
  let lastChange = state.last_change_at;
  if (to !== count) {
    if (now - state.last_change_at < policy.min_interval_minutes * 60_000) action = "waiting";
    else {
      try {
        await appendShardGeneration(env, config, store, to, now);
        action = to > count ? "grow" : "shrink";
        lastChange = now;
        await recordAudit(env, config, {
          kind: "shard_change",
          detail: {
            store,
            from: count,
            to,
            busiest: Math.round(busiest),
            total: Math.round(total),
            trigger: "controller",
          },
        });
      } catch (err) {
        if (!(err instanceof OAuthError && err.code === "conflict")) throw err;
        action = "waiting"; // a generation is pending: decide again once it is live
      }
    }
  }
  const changed = action === "grow" || action === "shrink";
  await env.DB.prepare(
    `INSERT INTO shard_controller (store, hot_runs, cold_runs, last_change_at) VALUES (?, ?, ?, ?)
     ON CONFLICT(store) DO UPDATE SET hot_runs = excluded.hot_runs, cold_runs = excluded.cold_runs,
       last_change_at = excluded.last_change_at`,
  )
    .bind(store, changed ? 0 : hotRuns, changed ? 0 : coldRuns, lastChange)
    .run();
  return { store, busiest, total, action, ...(to !== count ? { from: count, to } : {}) };
}
