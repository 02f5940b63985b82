import type { Context } from "hono";
import { decodeJwt, decodeProtectedHeader, jwtVerify } from "jose";
import type { AppEnv } from "../../shared/app";
import { audit } from "../../shared/audit";
import { findClient } from "../../shared/clients";
import { sha256 } from "../../shared/crypto";
import { clearCookie, cookieName, getCookie, paramsToRecord } from "../../shared/http";
import { keyRing } from "../../shared/keys";
import { parseId } from "../../shared/sharding";
import { shard } from "../../shared/stores";
import { revokeInSidShard } from "../../shared/tokens";
import { errorPage, messagePage } from "./login-page";
import { SESSION_COOKIE } from "./sessions";

/**
 * RP-Initiated Logout 1.0: ends the browser's session and revokes the tokens of its logins (the
 * `sid` mark kills every access and refresh token issued under it). `post_logout_redirect_uri` must
 * be registered by the client the `id_token_hint` (or `client_id`) names.
 */
export async function logout(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  let params: Record<string, string>;
  try {
    params = paramsToRecord(new URL(c.req.url).searchParams);
  } catch (err) {
    return errorPage("Invalid request", err instanceof Error ? err.message : "malformed request");
  }

  let hint: { aud: string; sid?: string } | null = null;
  if (params.id_token_hint) {
    hint = await verifyIdTokenHint(c, params.id_token_hint);
    if (!hint) return errorPage("Invalid request", "id_token_hint is not a token this issuer signed.");
  }
  const clientId = hint?.aud ?? params.client_id;
  if (hint && params.client_id && params.client_id !== hint.aud)
    return errorPage("Invalid request", "client_id does not match id_token_hint.");

  let redirectTo: string | null = null;
  if (params.post_logout_redirect_uri) {
    const client = clientId ? await findClient(c.env, config, clientId) : null;
    if (!client?.post_logout_redirect_uris.includes(params.post_logout_redirect_uri))
      return errorPage("Invalid request", "post_logout_redirect_uri is not registered for this client.");
    const url = new URL(params.post_logout_redirect_uri);
    if (params.state !== undefined) url.searchParams.append("state", params.state);
    redirectTo = url.toString();
  }

  const sids = new Set<string>();
  if (hint?.sid) sids.add(hint.sid);
  const sessionId = parseId(
    config.SHARDS,
    "session",
    getCookie(c.req.raw, cookieName(SESSION_COOKIE, config.secureCookies)),
  );
  if (sessionId) {
    const sid = await shard(c.env, "session", sessionId.ref).endSession(await sha256(sessionId.id));
    if (sid) sids.add(sid);
  }
  await Promise.all([...sids].map((sid) => revokeInSidShard(c.env, config, sid, [`sid:${sid}`])));
  if (sids.size) audit(c, { kind: "logout", client: clientId ?? null, detail: { sid: [...sids] } });

  const headers = {
    "Set-Cookie": clearCookie(cookieName(SESSION_COOKIE, config.secureCookies), config.secureCookies),
    "Cache-Control": "no-store",
  };
  if (redirectTo) return new Response(null, { status: 302, headers: { Location: redirectTo, ...headers } });
  return messagePage("Signed out", "You are signed out. You can close this window.", headers);
}

/** The hint may be expired (OIDC RP-Initiated Logout §2), but must carry our signature and issuer. */
async function verifyIdTokenHint(c: Context<AppEnv>, token: string): Promise<{ aud: string; sid?: string } | null> {
  const config = c.get("config");
  try {
    const { kid } = decodeProtectedHeader(token);
    const entry = kid ? (await keyRing(c.env, config)).verification.get(kid) : undefined;
    if (!entry) return null;
    const exp = decodeJwt(token).exp;
    const { payload } = await jwtVerify(token, entry.key, {
      algorithms: [entry.alg],
      issuer: config.ISSUER,
      currentDate: exp ? new Date((exp - 1) * 1000) : undefined,
    });
    const aud = Array.isArray(payload.aud) ? payload.aud[0] : payload.aud;
    if (typeof aud !== "string") return null;
    return typeof payload.sid === "string" ? { aud, sid: payload.sid } : { aud };
  } catch {
    return null;
  }
}
