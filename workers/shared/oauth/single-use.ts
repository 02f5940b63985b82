import { sha256 } from "../../../durable-objects/contract/crypto";
import type { Config } from "../config/config";
import type { Env } from "../platform/env";
import { currentGeneration, shardsIn } from "../routing/generations";
import { routeKeyIn, type ShardRef } from "../routing/shard-refs";
import { shard } from "../routing/stores";

/**
 * Spends a value a client made up and may present only once (a client assertion's jti, a DPoP proof's
 * jti), good for at most `lifetimeSeconds` and remembered until `keepUntil` (ms). It is recorded on
 * the revocation shard its key hashes to in the home region (one place whatever region the request
 * came through), in the current generation and in every earlier one that began within a lifetime ago,
 * where a use just before a shard count changed was recorded (issue 27 item 8), however many changes
 * that spans. True when this was its first use.
 */
export async function spendOnceAtHome(
  env: Env,
  config: Config,
  scope: string,
  value: string,
  keepUntil: number,
  lifetimeSeconds: number,
): Promise<boolean> {
  const key = `${scope}:${await sha256(value)}`;
  const home = config.REGIONS.home;
  const shards = shardsIn(config.SHARDS, home);
  const gen = currentGeneration(shards, "revocation");
  const gens = [gen];
  for (let g = gen; g > 0 && Date.now() - (shards.issueFrom.revocation[g] ?? 0) < lifetimeSeconds * 1000; g--)
    gens.push(g - 1);
  const used = await Promise.all(
    gens.map((g) => {
      const ref = routeKeyIn(config, "revocation", key, g, home) as ShardRef;
      return shard(env, "revocation", ref).spendOnce(key, keepUntil);
    }),
  );
  return used.every(Boolean);
}
