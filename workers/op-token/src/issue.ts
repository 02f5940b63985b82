import type { FamilyGrant } from "../../../durable-objects/contract/verbs";
import type { Config } from "../../shared/config/config";
import type { Client } from "../../shared/oauth/clients";
import { sealUserId, subjectFor } from "../../shared/oauth/subjects";
import { tokenClaimsOf } from "../../shared/oauth/token-claims";
import { signAccessToken, signIdToken } from "../../shared/oauth/tokens";
import { findUser } from "../../shared/people/users";
import type { Env } from "../../shared/platform/env";

export interface TokenResponse {
  access_token: string;
  token_type: "Bearer" | "DPoP";
  expires_in: number;
  id_token: string;
  scope: string;
  refresh_token?: string;
}

/** What one token response is made of; a grace-window retry rebuilds the same response from it. */
export interface IssuePlan {
  grant: FamilyGrant & { nonce?: string };
  grantId: string;
  scope: string;
  /** RFC 8707: the resources this access token is for; absent, userinfo only. */
  resource?: string[] | undefined;
  jti: string;
  iat: number;
  refreshToken?: string;
  /** RFC 9449 §5: the thumbprint of the DPoP key the access token is bound to (`cnf.jkt`). */
  jkt?: string | undefined;
}

/**
 * Signs the access and ID tokens of a token response. Both are RS256 (deterministic) unless the client
 * registered ES256 for ID tokens, so a retry within the refresh grace window gets the same bytes.
 */
export async function buildTokenResponse(
  env: Env,
  config: Config,
  client: Client,
  plan: IssuePlan,
): Promise<TokenResponse> {
  const { grant } = plan;
  const extra = tokenClaimsOf(grant.claims);
  // OIDC Core §5.5: claims asked for by name. A name is read from D1 only when one is asked for in
  // the ID token, so a plain login's token step reads nothing there.
  const askedInIdToken = new Set(grant.requested_claims?.id_token ?? []);
  const askedAtUserinfo = grant.requested_claims?.userinfo ?? [];
  const name = askedInIdToken.has("name") ? (await findUser(env, config.TENANT, grant.sub))?.name : undefined;
  // OIDC Core §8: what the client sees as `sub`; a pairwise client's access token carries the user sealed.
  const sub = await subjectFor(config, client, grant.sub);
  const uid = sub === grant.sub ? undefined : await sealUserId(config, grant.sub, plan.jti);
  // The ID token carries the access token's hash (at_hash), so the access token is signed first.
  const access_token = await signAccessToken(env, config, {
    sub,
    client_id: client.client_id,
    scope: plan.scope,
    sid: grant.sid,
    grant_id: plan.grantId,
    auth_time: grant.auth_time,
    jti: plan.jti,
    iat: plan.iat,
    resource: plan.resource,
    extra: {
      ...extra,
      ...(askedAtUserinfo.length ? { userinfo_claims: askedAtUserinfo.join(" ") } : {}),
      ...(uid ? { uid } : {}),
    },
    jkt: plan.jkt,
  });
  const id_token = await signIdToken(env, config, client.id_token_signed_response_alg, {
    sub,
    aud: client.client_id,
    auth_time: grant.auth_time,
    nonce: grant.nonce,
    sid: grant.sid,
    iat: plan.iat,
    email:
      plan.scope.split(" ").includes("email") || askedInIdToken.has("email") || askedInIdToken.has("email_verified")
        ? grant.email
        : undefined,
    accessToken: access_token,
    extra: name ? { ...extra, name } : extra,
  });
  const response: TokenResponse = {
    access_token,
    // RFC 9449 §5: a bound token is of type DPoP.
    token_type: plan.jkt ? "DPoP" : "Bearer",
    expires_in: config.POLICY.access_token_ttl_seconds,
    id_token,
    scope: plan.scope,
  };
  if (plan.refreshToken) response.refresh_token = plan.refreshToken;
  return response;
}
