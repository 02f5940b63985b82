import type { Context } from "hono";
import { z } from "zod";
import type { AppEnv } from "../../shared/app";
import { STORE_NAMES } from "../../shared/config";
import { json } from "../../shared/http";
import { planShards } from "../../shared/shard-plan";
import { currentGeneration } from "../../shared/sharding";
import { body } from "./validation";

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

const rate = z.number().min(0).max(1_000_000);
export const planInput = z
  .object({ peak: rate, typical: rate, refresh_per_login: rate.optional(), userinfo_per_s: rate.optional() })
  .strict()
  .refine((v) => v.typical <= v.peak, { message: "typical cannot exceed peak", path: ["typical"] });

/**
 * `POST /admin/v1/shards/plan` (issue 13): each store's shard count for the traffic given, with its
 * reasoning, and the SHARDS value it makes (workers/shared/shard-plan.ts, as `npm run plan`).
 */
export async function planShardCounts(c: Context<AppEnv>): Promise<Response> {
  const plan = planShards(await body(c, planInput));
  return json({ plan, shards: Object.fromEntries(plan.map((p) => [p.store, p.shards])) });
}
