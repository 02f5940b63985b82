import type { Context } from "hono";
import { findClient } from "../../shared/oauth/clients";
import { userIdOf } from "../../shared/oauth/subjects";
import { requireLiveAccessToken, signUserinfo } from "../../shared/oauth/tokens";
import { findUser, userStillValid } from "../../shared/people/users";
import { OAuthError } from "../../shared/platform/errors";
import { isForm, json, NO_STORE, parseForm, readBodyText } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { corsClient } from "./cors";

const BEARER = /^Bearer ([A-Za-z0-9._~+/-]+=*)$/i;

/**
 * OIDC Core §5.3: GET or POST. The access token comes in the Authorization header (RFC 6750 §2.1) or,
 * for a POST with a form body, as its `access_token` field (§2.2, pyoidc's default); never from the
 * query string (§2.3 is not supported), and never by two methods at once (§2).
 */
export async function userinfo(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  const token = await presentedToken(c.req.raw);
  const claims = await requireLiveAccessToken(c.env, config, token);
  const client = await findClient(c.env, config, claims.client_id);
  // A deleted client's tokens stop here too, as at introspection (issue 27 item 12).
  if (!client)
    throw new OAuthError("invalid_token", "the client this token was issued to no longer exists", {
      wwwAuthenticate: 'Bearer error="invalid_token"',
    });
  corsClient(c, client);
  // A pairwise client's token names the user sealed; its `sub` is the one the client sees (subjects.ts).
  const userId = await userIdOf(config, claims);
  const user = userId === null ? null : await findUser(c.env, config.TENANT, userId);
  if (!userStillValid(user, claims.auth_time))
    throw new OAuthError("invalid_token", "the user no longer exists or was signed out", {
      wwwAuthenticate: 'Bearer error="invalid_token"',
    });
  const body: Record<string, unknown> = { sub: claims.sub };
  const scopes = claims.scope.split(" ");
  // OIDC Core §5.5: claims the authorization request asked userinfo for by name, beside the scopes'.
  const asked = new Set(typeof claims.userinfo_claims === "string" ? claims.userinfo_claims.split(" ") : []);
  if (scopes.includes("email") || asked.has("email") || asked.has("email_verified")) {
    body.email = user.email;
    body.email_verified = true;
  }
  // OIDC Core §5.4: `profile` asks for the profile claims; Keyway keeps only a name, when the user has one.
  if ((scopes.includes("profile") || asked.has("name")) && user.name) body.name = user.name;
  // OIDC Core §5.3.2: a client that registered userinfo_signed_response_alg gets a JWT. Its choice is
  // read from the registration loaded above (the isolate's cache), so signing adds no storage call.
  const alg = client.userinfo_signed_response_alg;
  if (alg)
    return new Response(await signUserinfo(c.env, config, alg, client.client_id, body), {
      status: 200,
      headers: { "Content-Type": "application/jwt", ...NO_STORE },
    });
  return json(body, 200, NO_STORE);
}

async function presentedToken(req: Request): Promise<string> {
  const header = req.headers.get("authorization")?.trim() ?? "";
  const inBody = req.method === "POST" && isForm(req) ? parseForm(await readBodyText(req)).access_token : undefined;
  if (header && inBody !== undefined)
    throw new OAuthError("invalid_request", "send the access token in one place, not in both the header and the body");
  const token = inBody ?? BEARER.exec(header)?.[1];
  if (token && BEARER.test(`Bearer ${token}`)) return token;
  throw new OAuthError("invalid_token", "a Bearer access token is required", {
    status: 401,
    wwwAuthenticate: header || inBody !== undefined ? 'Bearer error="invalid_token"' : 'Bearer realm="keyway"',
  });
}
