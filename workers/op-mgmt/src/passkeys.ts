import type { Context } from "hono";
import type { PasskeyInfo } from "../../../durable-objects/contract/verbs";
import { auditEmailKey } from "../../shared/events/audit";
import { findUser } from "../../shared/people/users";
import { OAuthError } from "../../shared/platform/errors";
import { json } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { keyShardsEverywhere } from "../../shared/routing/shard-refs";
import { shard } from "../../shared/routing/stores";

/**
 * A user's passkeys (issue 42). They live in the ChallengeStore shard of the user's address where
 * each was made (a region's generation of that day), so the admin API asks the address's shard in
 * every region and generation, as a user's deletion does; no key material leaves the store.
 */
async function userShards(c: Context<AppEnv>) {
  const config = c.get("config");
  const user = await findUser(c.env, config.TENANT, c.req.param("id") ?? "");
  if (!user) throw new OAuthError("not_found", "no such user");
  const emailKey = await auditEmailKey(config, user.email);
  const stubs = keyShardsEverywhere(config, "challenge", emailKey).map((ref) => shard(c.env, "challenge", ref));
  return { user, emailKey, stubs };
}

export async function listUserPasskeys(c: Context<AppEnv>): Promise<Response> {
  const { user, emailKey, stubs } = await userShards(c);
  const found = (await Promise.all(stubs.map((s) => s.passkeysOf(emailKey, user.id)))) as PasskeyInfo[][];
  const passkeys = found.flat().sort((a, b) => a.created_at - b.created_at || a.id.localeCompare(b.id));
  return json({ passkeys });
}

export async function deleteUserPasskey(c: Context<AppEnv>): Promise<Response> {
  const { user, emailKey, stubs } = await userShards(c);
  const id = c.req.param("passkey") ?? "";
  const tenant = c.get("config").TENANT;
  const removed = await Promise.all(stubs.map((s) => s.removePasskey(emailKey, user.id, id, tenant)));
  if (!removed.some(Boolean)) throw new OAuthError("not_found", "no such passkey");
  return new Response(null, { status: 204 });
}
