import { sha256 } from "../../../durable-objects/contract/crypto";
import type { FamilyGrant } from "../../../durable-objects/contract/verbs";
import type { Config } from "../../shared/config/config";
import { findClient } from "../../shared/oauth/clients";
import { userIdOf } from "../../shared/oauth/subjects";
import {
  type AccessTokenClaims,
  type ClientTokenClaims,
  isClientTokenRevoked,
  isRevoked,
  verifyAnyAccessToken,
} from "../../shared/oauth/tokens";
import { findUser, userStillValid } from "../../shared/people/users";
import type { Env } from "../../shared/platform/env";
import { parseId } from "../../shared/routing/ids";
import { shard } from "../../shared/routing/stores";

export type KnownToken =
  | { type: "access_token"; claims: AccessTokenClaims; active: boolean }
  /** A client's own access token (client_credentials): active while not revoked and the client exists. */
  | { type: "client_token"; claims: ClientTokenClaims; active: boolean }
  | {
      type: "refresh_token";
      grantId: string;
      familyHash: string;
      grant: FamilyGrant & { expires_at: number };
      active: boolean;
    };

/**
 * What a presented token is, for revocation (RFC 7009) and introspection (RFC 7662): a Keyway access
 * token (signature checked; `active` also requires not expired, not revoked, user still valid), or
 * the current refresh token of a live family. Anything else is null.
 */
export async function lookupToken(env: Env, config: Config, token: string, hint?: string): Promise<KnownToken | null> {
  const looksLikeJwt = token.split(".").length === 3;
  const order = hint === "refresh_token" || !looksLikeJwt ? [refreshToken, accessToken] : [accessToken, refreshToken];
  for (const lookup of order) {
    const found = await lookup(env, config, token);
    if (found) return found;
  }
  return null;
}

async function accessToken(env: Env, config: Config, token: string): Promise<KnownToken | null> {
  // A token for any resource (RFC 8707) is known here: its resource server introspects it.
  const verified = await verifyAnyAccessToken(env, config, token, "any");
  if (!verified) return null;
  if (verified.kind === "client") {
    const { claims } = verified;
    const [revoked, client] = await Promise.all([
      isClientTokenRevoked(env, config, claims.jti),
      findClient(env, config, claims.client_id),
    ]);
    return { type: "client_token", claims, active: !revoked && client !== null };
  }
  const { claims } = verified;
  const userId = await userIdOf(config, claims);
  const [revoked, user] = await Promise.all([
    isRevoked(env, config, claims),
    userId === null ? null : findUser(env, config.TENANT, userId),
  ]);
  return { type: "access_token", claims, active: !revoked && userStillValid(user, claims.auth_time) };
}

async function refreshToken(env: Env, config: Config, token: string): Promise<KnownToken | null> {
  const grantId = token.slice(0, Math.max(0, token.indexOf(".")));
  const parsed = parseId(config, "grant", grantId);
  if (!parsed || token.length > 200) return null;
  const [familyHash, tokenHash] = await Promise.all([sha256(grantId), sha256(token)]);
  const grant = await shard(env, "refresh", parsed.ref).familyOf(familyHash, tokenHash, Date.now());
  if (!grant) return null;
  const [revoked, user] = await Promise.all([
    isRevoked(env, config, { sid: grant.sid, grant_id: grantId }),
    findUser(env, config.TENANT, grant.sub),
  ]);
  return {
    type: "refresh_token",
    grantId,
    familyHash,
    grant,
    active: !revoked && userStillValid(user, grant.auth_time),
  };
}
