import type { Context } from "hono";
import type { AppEnv } from "../../shared/app";
import { STORE_NAMES } from "../../shared/config";
import { json } from "../../shared/http";
import { shard } from "../../shared/stores";

/**
 * `GET /admin/v1/stats`: verb calls served per store and shard (every generation), since each shard
 * started, so a benchmark shows whether load spreads evenly. Asking wakes idle shards; admin use only.
 */
export async function shardStats(c: Context<AppEnv>): Promise<Response> {
  const shards = c.get("config").SHARDS;
  const stores = await Promise.all(
    STORE_NAMES.map(async (store) => {
      const refs = shards[store].flatMap((count, gen) =>
        Array.from({ length: count }, (_, s) => ({ store, gen, shard: s })),
      );
      const rows = await Promise.all(
        refs.map(async (ref) => {
          // Every store extends ShardStore, so each stub has `stats()`; the union of stubs loses that in types.
          const stub = shard(c.env, store, ref) as unknown as { stats(): Promise<{ served: number; since: number }> };
          return { generation: ref.gen, shard: ref.shard, ...(await stub.stats()) };
        }),
      );
      const served = rows.map((r) => r.served);
      const total = served.reduce((a, b) => a + b, 0);
      const current = rows.filter((r) => r.generation === shards[store].length - 1).map((r) => r.served);
      return [
        store,
        {
          total,
          // Busiest shard of the current generation over the mean: 1.0 is a perfect spread.
          imbalance: total ? Math.max(...current) / (current.reduce((a, b) => a + b, 0) / current.length || 1) : null,
          shards: rows.map((r) => ({ ...r, since: new Date(r.since).toISOString() })),
        },
      ] as const;
    }),
  );
  return json({ stores: Object.fromEntries(stores) });
}
