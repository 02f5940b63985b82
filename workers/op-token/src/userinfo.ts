import type { Context } from "hono";
import type { Config } from "../../shared/config/config";
import { findClient } from "../../shared/oauth/clients";
import { dpopChallenge, dpopProof, dpopResponseHeaders } from "../../shared/oauth/dpop";
import { userIdOf } from "../../shared/oauth/subjects";
import { type AccessTokenClaims, requireLiveAccessToken, signUserinfo } from "../../shared/oauth/tokens";
import { findUser, userStillValid } from "../../shared/people/users";
import { OAuthError } from "../../shared/platform/errors";
import { isForm, json, NO_STORE, parseForm, readBodyText } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { corsClient } from "./cors";

const BEARER = /^Bearer ([A-Za-z0-9._~+/-]+=*)$/i;
/** RFC 9449 §7.1: a DPoP-bound token comes in the Authorization header with the DPoP scheme. */
const DPOP = /^DPoP ([A-Za-z0-9._~+/-]+=*)$/i;

interface Presented {
  token: string;
  /** Presented with the DPoP scheme (RFC 9449 §7.1), with a proof in the DPoP header. */
  dpop: boolean;
}

/**
 * OIDC Core §5.3: GET or POST. The access token comes in the Authorization header (RFC 6750 §2.1) or,
 * for a POST with a form body, as its `access_token` field (§2.2, pyoidc's default); never from the
 * query string (§2.3 is not supported), and never by two methods at once (§2).
 */
export async function userinfo(c: Context<AppEnv>): Promise<Response> {
  const presented = await presentedToken(c.req.raw);
  if (!presented.dpop) return answer(c, presented.token, false);
  try {
    return await answer(c, presented.token, true);
  } catch (err) {
    // RFC 9449 §7.1: a 401 to a DPoP request carries a DPoP challenge, with the algorithms taken.
    if (err instanceof OAuthError && err.status === 401 && err.code === "invalid_token")
      throw new OAuthError(err.code, err.description, {
        ...err.options,
        wwwAuthenticate: dpopChallenge(err.code, err.description),
      });
    throw err;
  }
}

const invalidToken = (description: string, wwwAuthenticate: string) =>
  new OAuthError("invalid_token", description, { status: 401, wwwAuthenticate });

/**
 * The token's claims if it is presented as it is bound: a token with `cnf.jkt` only with the DPoP
 * scheme and a proof of that key (RFC 9449 §7.1, `ath` its hash), never as a Bearer token (§7.2); a
 * token without `cnf` only as a Bearer token.
 */
async function liveToken(c: Context<AppEnv>, config: Config, token: string, dpop: boolean): Promise<AccessTokenClaims> {
  if (!dpop) {
    const claims = await requireLiveAccessToken(c.env, config, token);
    if (claims.cnf !== undefined)
      throw invalidToken(
        "the access token is DPoP-bound: present it with the DPoP scheme and a proof",
        dpopChallenge("invalid_token", "the access token is DPoP-bound"),
      );
    return claims;
  }
  const proof = await dpopProof(c.env, config, c.req.raw, { path: "/userinfo", accessToken: token });
  if (!proof)
    throw new OAuthError("invalid_dpop_proof", "the DPoP scheme needs a DPoP proof", {
      status: 401,
      wwwAuthenticate: dpopChallenge("invalid_dpop_proof", "the DPoP scheme needs a DPoP proof"),
    });
  const claims = await requireLiveAccessToken(c.env, config, token);
  if (claims.cnf?.jkt === undefined)
    throw invalidToken(
      "the access token is not DPoP-bound: present it as a Bearer token",
      dpopChallenge("invalid_token"),
    );
  if (claims.cnf.jkt !== proof.jkt)
    throw invalidToken("the access token is bound to another DPoP key", dpopChallenge("invalid_token"));
  return claims;
}

async function answer(c: Context<AppEnv>, token: string, dpop: boolean): Promise<Response> {
  const config = c.get("config");
  const claims = await liveToken(c, config, token, dpop);
  const headers = dpop ? { ...NO_STORE, ...(await dpopResponseHeaders(config)) } : NO_STORE;
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
      headers: { "Content-Type": "application/jwt", ...headers },
    });
  return json(body, 200, headers);
}

async function presentedToken(req: Request): Promise<Presented> {
  const header = req.headers.get("authorization")?.trim() ?? "";
  const inBody = req.method === "POST" && isForm(req) ? parseForm(await readBodyText(req)).access_token : undefined;
  if (header && inBody !== undefined)
    throw new OAuthError("invalid_request", "send the access token in one place, not in both the header and the body");
  const dpop = inBody === undefined ? DPOP.exec(header)?.[1] : undefined;
  if (dpop) return { token: dpop, dpop: true };
  const token = inBody ?? BEARER.exec(header)?.[1];
  if (token && BEARER.test(`Bearer ${token}`)) return { token, dpop: false };
  throw new OAuthError("invalid_token", "a Bearer access token is required", {
    status: 401,
    wwwAuthenticate: header || inBody !== undefined ? 'Bearer error="invalid_token"' : 'Bearer realm="keyway"',
  });
}
