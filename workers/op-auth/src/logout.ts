import type { Context } from "hono";
import { sha256 } from "../../../durable-objects/contract/crypto";
import { audit, loginRegion } from "../../shared/events/audit";
import { findClient } from "../../shared/oauth/clients";
import { subjectFor } from "../../shared/oauth/subjects";
import { revokeInSidShard, verifyIdTokenHint as verifyOwnIdToken } from "../../shared/oauth/tokens";
import { clearCookie, cookieName, isForm, paramsToRecord, parseForm, readBodyText } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { shard } from "../../shared/routing/stores";
import { invalidRequestPage, unreadable } from "./errors";
import { confirmLogoutPage, messagePage } from "./pages/notices";
import { requestUi } from "./pages/ui";
import { currentSession, SESSION_COOKIE, sessionCookie } from "./sessions";

/**
 * RP-Initiated Logout 1.0, GET and POST (§2): ends the browser's session and revokes the tokens of
 * its logins (the `sid` mark kills every access and refresh token issued under it).
 * `post_logout_redirect_uri` must be registered by the client the `id_token_hint` (or `client_id`)
 * names. A request from another site without a hint is confirmed by the person first.
 */
export async function logout(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  let params: Record<string, string>;
  try {
    if (c.req.method === "POST") {
      if (!isForm(c.req.raw)) throw invalidRequestPage("the logout request must be form encoded");
      params = parseForm(await readBodyText(c.req.raw));
    } else params = paramsToRecord(new URL(c.req.url).searchParams);
  } catch (err) {
    throw unreadable(err);
  }

  let hint: Hint | null = null;
  if (params.id_token_hint) {
    hint = await verifyIdTokenHint(c, params.id_token_hint);
    if (!hint) throw invalidRequestPage("id_token_hint is not a token this issuer signed");
  }
  const clientId = hint?.aud ?? params.client_id;
  if (hint && params.client_id && params.client_id !== hint.aud)
    throw invalidRequestPage("client_id does not match id_token_hint");

  let redirectTo: string | null = null;
  if (params.post_logout_redirect_uri) {
    const client = clientId ? await findClient(c.env, config, clientId) : null;
    if (!client?.post_logout_redirect_uris.includes(params.post_logout_redirect_uri))
      throw invalidRequestPage("post_logout_redirect_uri is not registered for this client");
    const url = new URL(params.post_logout_redirect_uri);
    if (params.state !== undefined) url.searchParams.append("state", params.state);
    redirectTo = url.toString();
  }

  // Without an ID token of one of its logins, a request from another site (a link, an image, a form)
  // does not end the session by itself: the person confirms with a post from this origin. Any valid ID
  // token is not enough: it must be of this browser's session (its sid) or its user (issue 27 item 6).
  if (fromElsewhere(c.req.raw, config.ISSUER) && !(hint && (await hintIsThisSession(c, hint)))) {
    const fields: Record<string, string> = {};
    for (const name of ["client_id", "post_logout_redirect_uri", "state", "ui_locales"] as const)
      if (params[name] !== undefined) fields[name] = params[name];
    return confirmLogoutPage(requestUi(c, { uiLocales: params.ui_locales }), fields, { "Cache-Control": "no-store" });
  }

  const sids = new Set<string>();
  if (hint?.sid) sids.add(hint.sid);
  const sessionId = sessionCookie(config, c.req.raw);
  if (sessionId) {
    const sid = await shard(c.env, "session", sessionId.ref).endSession(await sha256(sessionId.id));
    if (sid) sids.add(sid);
  }
  await Promise.all([...sids].map((sid) => revokeInSidShard(c.env, config, sid, [`sid:${sid}`])));
  if (sids.size)
    audit(
      c,
      { kind: "logout", client: clientId ?? null, detail: { sid: [...sids] } },
      loginRegion(config, [...sids][0]),
    );

  const headers = {
    "Set-Cookie": clearCookie(cookieName(SESSION_COOKIE, config), config.secureCookies, config.cookiePath),
    "Cache-Control": "no-store",
  };
  if (redirectTo) return new Response(null, { status: 302, headers: { Location: redirectTo, ...headers } });
  // RP-Initiated Logout 1.0 §2: `ui_locales` chooses the language of the pages shown.
  return messagePage(requestUi(c, { uiLocales: params.ui_locales }), {
    title: "logout.done.title",
    message: "logout.done.message",
    headers,
  });
}

/**
 * Sent by a page of another site (Fetch Metadata), or posted from another origin. A request without
 * the header (a non-browser client, the address bar) is the person's own.
 */
function fromElsewhere(req: Request, issuer: string): boolean {
  const site = req.headers.get("sec-fetch-site");
  const origin = req.headers.get("origin");
  return site === "cross-site" || site === "same-site" || (origin !== null && origin !== new URL(issuer).origin);
}

interface Hint {
  aud: string;
  sub: string;
  sid?: string;
}

/**
 * The hint names this browser's session (its sid) or its user; true too when the browser has no
 * session: then only the hint's own login ends, which its holder may end anyway.
 */
async function hintIsThisSession(c: Context<AppEnv>, hint: Hint): Promise<boolean> {
  const config = c.get("config");
  const session = await currentSession(c.env, config, c.req.raw);
  if (!session || session.sid === hint.sid) return true;
  // The hint's `sub` is the one its client sees: pairwise for a pairwise client (subjects.ts).
  const client = await findClient(c.env, config, hint.aud);
  return client !== null && (await subjectFor(config, client, session.sub)) === hint.sub;
}

/** The hint may be expired (OIDC RP-Initiated Logout §2), but must carry our signature and issuer. */
async function verifyIdTokenHint(c: Context<AppEnv>, token: string): Promise<Hint | null> {
  const config = c.get("config");
  const verified = await verifyOwnIdToken(c.env, config, token);
  // For a registered client: the first audience (Keyway's ID tokens have one, the client_id).
  const aud = verified?.aud[0];
  if (!verified || aud === undefined || !(await findClient(c.env, config, aud))) return null;
  return verified.sid !== undefined ? { aud, sub: verified.sub, sid: verified.sid } : { aud, sub: verified.sub };
}
