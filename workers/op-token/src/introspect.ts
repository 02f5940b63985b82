import type { Context } from "hono";
import { authenticateClient } from "../../shared/oauth/clients";
import { subjectFor } from "../../shared/oauth/subjects";
import { OAuthError } from "../../shared/platform/errors";
import { json, NO_STORE, readForm } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { corsClient } from "./cors";
import { lookupToken } from "./token-lookup";

/**
 * RFC 7662. The caller must authenticate (§2.1); a public client may introspect too, but any client
 * sees only its own tokens: another client's token is `{"active": false}`.
 */
export async function introspect(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  const form = await readForm(c.req.raw);
  if (!c.req.header("authorization") && !form.client_id && !form.client_assertion)
    throw new OAuthError("invalid_client", "client authentication is required", {
      status: 401,
      wwwAuthenticate: 'Basic realm="keyway", charset="UTF-8"',
    });
  const client = await authenticateClient(c.env, config, c.req.raw, form);
  corsClient(c, client);
  if (!form.token) throw new OAuthError("invalid_request", "token is required");
  const found = await lookupToken(c.env, config, form.token, form.token_type_hint);
  const inactive = () => json({ active: false }, 200, NO_STORE);
  if (!found?.active) return inactive();
  if (found.type === "access_token" || found.type === "client_token") {
    const t = found.claims;
    if (t.client_id !== client.client_id) return inactive();
    return json(
      {
        active: true,
        // RFC 9449 §6.2: a bound token is of type DPoP, with its key's thumbprint.
        token_type: t.cnf?.jkt ? "DPoP" : "Bearer",
        ...(t.cnf?.jkt ? { cnf: { jkt: t.cnf.jkt } } : {}),
        scope: t.scope,
        client_id: t.client_id,
        sub: t.sub,
        exp: t.exp,
        iat: t.iat,
        iss: t.iss,
        aud: t.aud,
        jti: t.jti,
        ...(found.type === "access_token" ? { sid: found.claims.sid } : {}),
      },
      200,
      NO_STORE,
    );
  }
  const g = found.grant;
  if (g.client_id !== client.client_id) return inactive();
  // No token_type: RFC 7662 §2.2 means an access token type of RFC 6749 §7.1, which a refresh token has not.
  return json(
    {
      active: true,
      scope: g.scope,
      client_id: g.client_id,
      sub: await subjectFor(config, client, g.sub),
      exp: Math.floor(g.expires_at / 1000),
      iss: config.ISSUER,
      sid: g.sid,
    },
    200,
    NO_STORE,
  );
}
