import type { Context } from "hono";
import { type AppEnv, admitNewWork } from "../../shared/app";
import { findClient } from "../../shared/clients";
import { OAuthError } from "../../shared/errors";
import { json, NO_STORE } from "../../shared/http";
import { requireLiveAccessToken } from "../../shared/tokens";
import { findUser, userStillValid } from "../../shared/users";
import { corsClient } from "./cors";

/** OIDC Core §5.3: GET or POST with a Bearer token in the Authorization header (RFC 6750 §2.1). */
export async function userinfo(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  admitNewWork(c);
  const header = c.req.header("authorization") ?? "";
  const m = /^Bearer ([A-Za-z0-9._~+/-]+=*)$/i.exec(header.trim());
  if (!m)
    throw new OAuthError("invalid_token", "a Bearer access token is required", {
      status: 401,
      wwwAuthenticate: header ? 'Bearer error="invalid_token"' : 'Bearer realm="keyway"',
    });
  const claims = await requireLiveAccessToken(c.env, config, m[1] as string);
  const client = await findClient(c.env, config, claims.client_id);
  if (client) corsClient(c, client);
  const user = await findUser(c.env, claims.sub);
  if (!userStillValid(user, claims.auth_time))
    throw new OAuthError("invalid_token", "the user no longer exists or was signed out", {
      wwwAuthenticate: 'Bearer error="invalid_token"',
    });
  const body: Record<string, unknown> = { sub: user.id };
  if (claims.scope.split(" ").includes("email")) {
    body.email = user.email;
    body.email_verified = true;
  }
  return json(body, 200, NO_STORE);
}
