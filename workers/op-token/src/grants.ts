import { sha256 } from "../../../durable-objects/contract/crypto";
import type { Config } from "../../shared/config/config";
import { revokeInSidShard } from "../../shared/oauth/tokens";
import type { Env } from "../../shared/platform/env";
import { parseId } from "../../shared/routing/ids";
import { shard } from "../../shared/routing/stores";

/**
 * A grant is what one login (or one code) gave a client: a refresh family and the access tokens
 * issued from it. Ended by `/revoke` (RFC 7009 §2.1), and by the token endpoint when a code or a
 * refresh token is replayed (RFC 9700 §4.14.2, §2.2.2).
 */
/** Revokes every token of one grant: its refresh family and, via the grant mark, its access tokens. */
export async function revokeGrant(env: Env, config: Config, grantId: string, sid: string): Promise<void> {
  const parsed = parseId(config, "grant", grantId);
  await Promise.all([
    revokeInSidShard(env, config, sid, [`grant:${grantId}`]),
    parsed ? sha256(grantId).then((h) => shard(env, "refresh", parsed.ref).revokeFamily(h)) : undefined,
  ]);
}
