import type { Context } from "hono";
import type { AppEnv } from "../../shared/app";
import { STORE_NAMES } from "../../shared/config";
import { json } from "../../shared/http";
import { currentGeneration } from "../../shared/sharding";

/**
 * `GET /admin/v1/shards`: each store's generations (shard counts), the generation new ids go to now,
 * and, for a generation appended with a `from`, when ids start going to it (until then it is routed,
 * not issued into).
 */
export function listShards(c: Context<AppEnv>): Response {
  const shards = c.get("config").SHARDS;
  const now = Date.now();
  return json({
    stores: Object.fromEntries(
      STORE_NAMES.map((store) => {
        const generation = currentGeneration(shards, store, now);
        const from = shards.issueFrom[store];
        return [
          store,
          {
            generation,
            shards: shards[store][generation],
            generations: shards[store],
            issue_from: from.map((t) => (t ? new Date(t).toISOString() : null)),
          },
        ];
      }),
    ),
  });
}
