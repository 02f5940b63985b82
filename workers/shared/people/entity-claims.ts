import { errorField, log } from "../../../durable-objects/contract/log";
import type { ChangedClaims, ClaimsSnapshot } from "../../../durable-objects/contract/verbs";
import type { Config } from "../config/config";
import type { Env } from "../platform/env";
import { keyShardsEverywhere, shardAddress } from "../routing/shard-refs";
import { shard, shardNamed } from "../routing/stores";

/**
 * Claims from organizations and entity grants in a login's tokens (issue 24), with no call on the
 * login's path: a user's grants are compiled when they change (EntityStore), pushed to the address's
 * ChallengeStore row the verify step reads anyway, projected through the client's template
 * (token-claims.ts), and carried sealed in the verified login and the code. Everything that issues
 * tokens later (a session's next code, a refresh, a picked organization) reads the user's EntityStore
 * shard, so a grant removed since is never in them.
 */

/** The user's claims now, from the EntityStore shard that holds its grants (none: no grant was ever made). */
export async function currentClaims(
  env: Env,
  config: Config,
  user: { id: string; entity_shard?: string | null },
): Promise<ClaimsSnapshot | undefined> {
  if (!user.entity_shard) return undefined;
  return shardNamed(env, "entity", user.entity_shard).claimsOf(config.TENANT, user.id);
}

/**
 * Pushes users' recompiled claims to their addresses' ChallengeStore shards (every region's, every
 * live generation), where the next verify reads them: before an admin change answers, so the next
 * login carries it. With data residency the admin API creates nothing about a person in a region,
 * so only rows that exist are updated (a first sign-in there reads the EntityStore instead).
 */
export async function pushClaims(env: Env, config: Config, changed: ChangedClaims[], now: number): Promise<void> {
  if (changed.length === 0) return;
  const byShard = new Map<
    string,
    {
      ref: ReturnType<typeof keyShardsEverywhere>[number];
      users: { emailKey: string; id: string; claims: ClaimsSnapshot }[];
    }
  >();
  for (const c of changed)
    for (const ref of keyShardsEverywhere(config, "challenge", c.email_key)) {
      const address = shardAddress(ref);
      const entry = byShard.get(address) ?? { ref, users: [] };
      entry.users.push({ emailKey: c.email_key, id: c.subject, claims: c.claims });
      byShard.set(address, entry);
    }
  const mode = config.REGIONS.residency ? "update" : "upsert";
  await Promise.all(
    [...byShard.values()].map(({ ref, users }) =>
      shard(env, "challenge", ref)
        .rememberClaims(users, now, mode)
        .catch((err: unknown) => {
          log("warn", "entities: claims could not be pushed to a shard", { error: errorField(err) });
          throw err;
        }),
    ),
  );
}
