import type { Context } from "hono";
import { z } from "zod";
import type { Config } from "../../shared/config/config";
import { MAX_SHARDS, planEntityShards, planFromRates, planShards } from "../../shared/config/shard-plan";
import {
  LIVE_STORES,
  type LiveStoreName,
  type ShardConfig,
  STORE_NAMES,
  type StoreName,
} from "../../shared/config/shards";
import type { Env } from "../../shared/platform/env";
import { OAuthError } from "../../shared/platform/errors";
import { json } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { currentGeneration, firstLiveGeneration, shardsIn } from "../../shared/routing/generations";
import { ID_GENERATIONS } from "../../shared/routing/ids";
import { forgetLiveGenerations } from "../../shared/routing/live-shards";
import { placementOf } from "../../shared/routing/placement";
import { allShards } from "../../shared/routing/shard-refs";
import { shard } from "../../shared/routing/stores";
import { body } from "./validation";

/**
 * `GET /admin/v1/shards`: each store's generations (shard counts), the generation new ids go to now,
 * and, for a generation appended with a `from`, when ids start going to it (until then it is routed,
 * not issued into).
 */
export function listShards(c: Context<AppEnv>): Response {
  const config = c.get("config");
  const now = Date.now();
  // Under a tenant (CONTRACT §5, §8: every §5 route is a tenant's too) only what §5 promises: each
  // store's current generation and count. The regions, their jurisdictions and the generations'
  // history are the deployment's layout, not a tenant's to read (issue 38 item 2).
  if (c.get("tenantRoute").via === "path") {
    const current = (store: (typeof LIVE_STORES)[number]) => {
      const generation = currentGeneration(config.SHARDS, store, now);
      return [store, { generation, shards: config.SHARDS[store][generation] }];
    };
    return json({ stores: Object.fromEntries(LIVE_STORES.map(current)) });
  }
  const storesOf = (shards: ShardConfig) =>
    Object.fromEntries(
      LIVE_STORES.map((store) => {
        const generation = currentGeneration(shards, store, now);
        const first = firstLiveGeneration(shards, store, now);
        // Only the live generations, from `first_live_generation` on: the drained ones before it are
        // retired, routed no more (routing/generations.ts DRAIN_MS), and their rows deleted by the cron.
        const live = Array.from({ length: shards[store].length - first }, (_, i) => first + i);
        return [
          store,
          {
            generation,
            shards: shards[store][generation],
            first_live_generation: first,
            generations: live.map((g) => shards[store][g] ?? null),
            issue_from: live.map((g) => {
              const t = shards.issueFrom[store][g];
              return t ? new Date(t).toISOString() : null;
            }),
          },
        ];
      }),
    );
  const r = config.REGIONS;
  return json({
    // The default counts: those of every region without its own (issue 12).
    stores: storesOf(config.SHARDS),
    regions: Object.fromEntries(
      Object.keys(r.regions).map((region) => [
        region,
        {
          ...placementOf(r, region),
          own_counts: region in config.SHARDS.regions,
          stores: storesOf(shardsIn(config.SHARDS, region)),
        },
      ]),
    ),
    default_region: r.default,
    home_region: r.home,
  });
}

const rate = z.number().min(0).max(1_000_000);
const trafficInput = z
  .object({
    peak: rate,
    typical: rate,
    refresh_per_login: rate.optional(),
    userinfo_per_s: rate.optional(),
    /** Issue 24: entities the entity store will hold (it is sized by them). */
    entities: z.number().int().min(0).max(1e12).optional(),
  })
  .strict()
  .refine((v) => v.typical <= v.peak, { message: "typical cannot exceed peak", path: ["typical"] });
const measuredInput = z
  .object({
    measured: z
      .object({
        /** How long to watch the stores' counters. */
        window_seconds: z.number().int().min(1).max(30).default(10),
        /** The peak, as a multiple of what was measured (what was measured is the typical load). */
        peak_factor: z.number().min(1).max(100).default(3),
      })
      .strict(),
  })
  .strict();
export const planInput = z.union([trafficInput, measuredInput]);

/**
 * `POST /admin/v1/shards/plan` (issue 13): each store's shard count for the traffic given, with its
 * reasoning, and the SHARDS value it makes (workers/shared/config/shard-plan.ts, as `npm run plan`). With
 * `{"measured": {...}}`, for the traffic the stores take now instead: every shard's served counter is
 * read twice, `window_seconds` apart, and each region gets its own plan from its own calls a second
 * (docs/sharding.md, per-region counts). Reading every shard wakes idle ones: admin use only.
 */
export async function planShardCounts(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, planInput);
  if (!("measured" in input)) {
    const plan = planShards(input);
    const entity = input.entities !== undefined ? planEntityShards(input.entities) : null;
    return json({
      plan,
      ...(entity ? { entity } : {}),
      shards: {
        ...Object.fromEntries(plan.map((p) => [p.store, p.shards])),
        ...(entity ? { entity: entity.shards } : {}),
      },
    });
  }
  const { window_seconds, peak_factor } = input.measured;
  const rates = await measuredRates(c.env, c.get("config"), window_seconds * 1000);
  return json({
    window_seconds,
    peak_factor,
    regions: Object.fromEntries(
      Object.entries(rates).map(([region, measured]) => {
        const plan = planFromRates(measured, peak_factor);
        return [region, { measured, plan, shards: Object.fromEntries(plan.map((p) => [p.store, p.shards])) }];
      }),
    ),
  });
}

/**
 * Calls a second each store took in each region over `windowMs`: every shard of every generation
 * (live ids still route to old ones), read before and after. A shard that restarted in between (its
 * counter reset) counts what it served since.
 */
async function measuredRates(
  env: Env,
  config: Config,
  windowMs: number,
): Promise<Record<string, Record<StoreName, number>>> {
  const refs = STORE_NAMES.flatMap((store) => allShards(config, store));
  const read = () =>
    Promise.all(
      refs.map((ref) =>
        (shard(env, ref.store, ref) as unknown as { stats(): Promise<{ served: number; since: number }> }).stats(),
      ),
    );
  const before = await read();
  const started = Date.now();
  await scheduler.wait(windowMs);
  const after = await read();
  const seconds = Math.max(1, Date.now() - started) / 1000;
  const out: Record<string, Record<StoreName, number>> = {};
  refs.forEach((ref, i) => {
    const a = before[i] as { served: number; since: number };
    const b = after[i] as { served: number; since: number };
    const calls = b.since === a.since ? b.served - a.served : b.served;
    const region =
      out[ref.place.region] ?? (Object.fromEntries(STORE_NAMES.map((s) => [s, 0])) as Record<StoreName, number>);
    out[ref.place.region] = region;
    region[ref.store as StoreName] += calls / seconds;
  });
  for (const r of Object.values(out)) for (const s of STORE_NAMES) r[s] = Math.round(r[s] * 10) / 10;
  return out;
}

export const appendInput = z
  .object({ store: z.enum(LIVE_STORES), shards: z.number().int().min(1).max(MAX_SHARDS) })
  .strict();

/**
 * `POST /admin/v1/shards` (issue 13): appends a generation to a store, live. Nothing else can be
 * changed: an existing generation may still have ids that route to it. The new generation is routed
 * by every isolate within `shard_config_cache_seconds` and issued into a minute after that
 * (`issue_from`), so no Worker meets an id it does not know; one generation may be pending at a time.
 */
export async function appendGeneration(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, appendInput);
  const appended = await appendShardGeneration(c.env, c.get("config"), input.store, input.shards, Date.now());
  return json(
    {
      store: input.store,
      generation: appended.generation,
      shards: input.shards,
      issue_from: new Date(appended.issueFrom).toISOString(),
    },
    201,
  );
}

/**
 * Appends a generation of `shards` to `store` (the admin API and the controller): its index follows
 * every generation SHARDS and D1 hold; it is issued into from `shard_config_cache_seconds` plus
 * `shard_issue_margin_seconds` (a minute) on. `conflict` while the store's newest generation is still pending, or when another append
 * won the race.
 */
export async function appendShardGeneration(
  env: Env,
  config: Config,
  store: LiveStoreName,
  shards: number,
  now: number,
): Promise<{ generation: number; issueFrom: number }> {
  // From D1, not this isolate's cache: an append another isolate made a moment ago counts.
  const last = await env.DB.prepare(
    "SELECT MAX(gen) AS gen, MAX(issue_from) AS issue_from FROM shard_generations WHERE store = ?",
  )
    .bind(store)
    .first<{ gen: number | null; issue_from: number | null }>();
  const pendingUntil = Math.max(config.SHARDS.issueFrom[store].at(-1) ?? 0, last?.issue_from ?? 0);
  if (pendingUntil > now)
    throw new OAuthError(
      "conflict",
      `a generation of ${store} is issued into from ${new Date(pendingUntil).toISOString()}; append after that`,
    );
  const generation = Math.max(config.SHARDS[store].length, (last?.gen ?? -1) + 1);
  // An id names its generation modulo ID_GENERATIONS (routing/ids.ts): generations live at once must stay
  // fewer, or a new id would name an older live generation too. Drained ones do not count (issue 38
  // item 14); `config` has the live generations, as every admin route's does.
  const firstLive = firstLiveGeneration(config.SHARDS, store, now);
  if (generation - firstLive >= ID_GENERATIONS)
    throw new OAuthError(
      "conflict",
      `${store} has ${generation - firstLive} live generations, the most ids can tell apart; ` +
        "append once the oldest is drained (GET /admin/v1/shards: first_live_generation)",
    );
  const issueFrom = now + (config.POLICY.shard_config_cache_seconds + config.POLICY.shard_issue_margin_seconds) * 1000;
  const { meta } = await env.DB.prepare(
    "INSERT INTO shard_generations (store, gen, shards, issue_from, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
  )
    .bind(store, generation, shards, issueFrom, now)
    .run();
  if (!meta.changes) throw new OAuthError("conflict", "another generation was appended at the same time; look again");
  forgetLiveGenerations();
  return { generation, issueFrom };
}
