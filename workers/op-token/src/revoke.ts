import type { Context } from "hono";
import { audit, loginRegion } from "../../shared/events/audit";
import { authenticateClient } from "../../shared/oauth/clients";
import { revokeClientToken, revokeInSidShard } from "../../shared/oauth/tokens";
import { OAuthError } from "../../shared/platform/errors";
import { NO_STORE, readForm } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { corsClient } from "./cors";
import { revokeGrant } from "./grants";
import { lookupToken } from "./token-lookup";

/**
 * RFC 7009. Always 200 for a token that is unknown, invalid or another client's (§2.2: the client
 * learns nothing). Revoking a refresh token ends its whole grant, access tokens included (§2.1).
 */
export async function revoke(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  const form = await readForm(c.req.raw);
  const client = await authenticateClient(c.env, config, c.req.raw, form);
  corsClient(c, client);
  if (!form.token) throw new OAuthError("invalid_request", "token is required");
  const found = await lookupToken(c.env, config, form.token, form.token_type_hint);
  if (found?.type === "refresh_token" && found.grant.client_id === client.client_id) {
    await revokeGrant(c.env, config, found.grantId, found.grant.sid);
    // A grant ended by its client (for the grant.revoked webhook); after the response.
    audit(
      c,
      { kind: "grant_revoked", user: found.grant.sub, client: client.client_id, detail: { sid: found.grant.sid } },
      loginRegion(config, found.grant.sid),
    );
  }
  if (found?.type === "access_token" && found.claims.client_id === client.client_id) {
    const ttl = (found.claims.exp ?? 0) * 1000;
    if (ttl > Date.now()) await revokeInSidShard(c.env, config, found.claims.sid, [`jti:${found.claims.jti}`]);
  }
  if (found?.type === "client_token" && found.claims.client_id === client.client_id)
    if ((found.claims.exp ?? 0) * 1000 > Date.now()) await revokeClientToken(c.env, config, found.claims.jti);
  return new Response(null, { status: 200, headers: NO_STORE });
}
