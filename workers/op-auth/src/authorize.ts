import type { Context } from "hono";
import { sha256, timingSafeEqualString } from "../../../durable-objects/contract/crypto";
import type { AuditEvent, AuthRequest, SessionInfo } from "../../../durable-objects/contract/verbs";
import { admitNewWork } from "../../shared/app/app";
import type { Config } from "../../shared/config/config";
import { requestAuditEvent } from "../../shared/events/audit";
import { type CodeGrant, issueCode } from "../../shared/oauth/auth-code";
import { type Client, findClient } from "../../shared/oauth/clients";
import { subjectFor } from "../../shared/oauth/subjects";
import { type LoginClaims, projectClaims } from "../../shared/oauth/token-claims";
import { verifyIdTokenHint } from "../../shared/oauth/tokens";
import { currentClaims } from "../../shared/people/entity-claims";
import type { User } from "../../shared/people/users";
import type { Env } from "../../shared/platform/env";
import { OAuthError } from "../../shared/platform/errors";
import {
  clearCookie,
  cookieName,
  isForm,
  json,
  NO_STORE,
  paramsToRecord,
  parseForm,
  readBodyText,
  setCookie,
} from "../../shared/platform/http";
import { loginEnded } from "../../shared/request/admission";
import type { AppEnv } from "../../shared/request/context";
import { shard } from "../../shared/routing/stores";
import { authorizationResponse, type ResponseMode } from "./authorization-response";
import { type ValidatedRequest, validateAuthorizeRequest } from "./authorize-request";
import { invalidRequestPage, pageError, unreadable } from "./errors";
import { beginLoginTx, openVerifiedLogin } from "./login-tx";
import { emailStep } from "./pages/login";
import { organizationPage } from "./pages/organizations";
import { requestUi, txPageUi, txUiFor } from "./pages/ui";
import { openPushedRequest, PUSHED_REQUEST_URI } from "./par";
import { withRequestObjectOrUri } from "./request-uri";
import { type BrowserSession, currentSession, sessionCookie, standingUser, TX_COOKIE } from "./sessions";

/** GET and POST /authorize (OIDC Core §3.1.2.1: both must be supported). */
export async function authorize(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  let params: Record<string, string>;
  try {
    if (c.req.method === "POST") {
      if (!isForm(c.req.raw)) throw invalidRequestPage("the authorization request must be form encoded");
      params = parseForm(await readBodyText(c.req.raw));
    } else params = paramsToRecord(new URL(c.req.url).searchParams);
  } catch (err) {
    throw unreadable(err);
  }

  // `redirect_to` from a verified code: finish that login transaction.
  if (params.tx !== undefined && params.client_id === undefined) {
    // The last step of a login in op-auth: its place among the logins under way is free (admission.ts).
    try {
      return await resumeLogin(c, params.tx);
    } finally {
      loginEnded();
    }
  }

  // A new login (a POST's is checked here; a GET's was by createApp, and is not counted twice).
  admitNewWork(c, true);
  // Errors about the client or its redirect URI are pages; the rest go back to the client (errors.ts).
  const client = params.client_id ? await findClient(c.env, config, params.client_id) : null;
  // OIDC Core §6.1 and §6.2: a request object's parameters, by value or fetched from a registered
  // request_uri, supersede the query's (request-object.ts, request-uri.ts).
  // RFC 9126 §4: a pushed request's parameters, and only those, once; else the query's.
  const pushed = params.request_uri?.startsWith(PUSHED_REQUEST_URI) === true;
  const request = validateAuthorizeRequest(
    pushed
      ? await openPushedRequest(c.env, config, params, client)
      : await withRequestObjectOrUri(config, params, client),
    client,
  );
  // RFC 9126 §5/§6: a client or tenant that requires pushed requests takes no other.
  if (
    !pushed &&
    (config.POLICY.require_pushed_authorization_requests ||
      (client as (Client & { require_pushed_authorization_requests?: boolean }) | null)
        ?.require_pushed_authorization_requests)
  )
    throw new OAuthError("invalid_request", "this client must push its authorization requests (PAR, RFC 9126)", {
      redirect: redirectOf(request),
    });
  const hinted = request.id_token_hint !== undefined ? await hintedSubject(c, request) : undefined;
  const live = await liveSession(c.env, config, c.req.raw, request);
  // OIDC Core §3.1.2.1: a session of another user than the hint names does not answer; with
  // prompt=none that is login_required, otherwise a new login. The hint's `sub` is the one the
  // client sees (pairwise for a pairwise client, subjects.ts).
  if (live && (hinted === undefined || (await subjectFor(config, client as Client, live.session.sub)) === hinted))
    return answerFromSession(c, request, client as Client, live);
  if (request.prompts.has("none"))
    throw new OAuthError("login_required", undefined, {
      redirect: redirectOf(request),
    });
  // validateAuthorizeRequest refuses a request without its client, so here it is known.
  return beginLogin(c, request, client as Client);
}

/**
 * The user an `id_token_hint` names: an ID token Keyway signed (expired or not) for this client;
 * anything else is `invalid_request` at the client. Only a request with a hint pays for the check.
 */
async function hintedSubject(c: Context<AppEnv>, request: ValidatedRequest): Promise<string> {
  const hint = await verifyIdTokenHint(c.env, c.get("config"), request.id_token_hint as string);
  if (!hint?.aud.includes(request.client_id))
    throw new OAuthError("invalid_request", "id_token_hint is not an ID token this issuer signed for this client", {
      redirect: redirectOf(request),
    });
  return hint.sub;
}

/** The response mode a request asked for (validated: query or form_post). */
const modeOf = (request: AuthRequest): ResponseMode => (request.response_mode === "form_post" ? "form_post" : "query");

/** Where an error about a validated request goes: back to the client, the way its response would. */
const redirectOf = (request: AuthRequest) => ({
  uri: request.redirect_uri,
  state: request.state,
  mode: modeOf(request),
});

function redirect(location: string, headers: Record<string, string> = {}): Response {
  return new Response(null, { status: 302, headers: { Location: location, "Cache-Control": "no-store", ...headers } });
}

/**
 * The browser's session, if it may answer this request without a new login: not `prompt=login` nor
 * `select_account` (the login page is where another account is chosen), within `max_age` (OIDC Core
 * §3.1.2.1), and still standing (sessions.ts).
 */
async function liveSession(
  env: Env,
  config: Config,
  req: Request,
  request: ValidatedRequest,
): Promise<{ session: BrowserSession; user: User } | null> {
  if (request.prompts.has("login") || request.prompts.has("select_account")) return null;
  // max_age=0: always a fresh login, even one made within the same second (OIDC Core §3.1.2.1).
  if (request.max_age === 0) return null;
  const session = await currentSession(env, config, req);
  if (!session) return null;
  if (request.max_age !== undefined && Date.now() / 1000 - session.auth_time > request.max_age) return null;
  const user = await standingUser(env, config, session);
  return user ? { session, user } : null;
}

/**
 * A request the browser's session answers. A client with a claims template, or a request naming an
 * organization, gets the user's grants as they are now, from the EntityStore shard that holds them
 * (issue 24): one call more than a plain session's code, never on the five-step login.
 */
async function answerFromSession(
  c: Context<AppEnv>,
  request: ValidatedRequest,
  client: Client,
  live: { session: BrowserSession; user: User },
): Promise<Response> {
  const config = c.get("config");
  if (!client.token_claims && request.organization === undefined)
    return redirectWithCode(config, request, live.session);
  const snapshot = await currentClaims(c.env, config, live.user);
  const projection = projectClaims(snapshot, client.token_claims, request.organization, Date.now() / 1000);
  if (projection.status === "denied") throw accessDenied(request, projection.reason);
  if (projection.status === "pick") {
    if (request.prompts.has("none"))
      throw new OAuthError("interaction_required", "the person must pick an organization", {
        redirect: redirectOf(request),
      });
    return organizationPage(requestUi(c, { uiLocales: request.ui_locales, client }), {
      params: requestParams(request),
      orgs: projection.orgs,
    });
  }
  return redirectWithCode(config, request, live.session, {}, projection.claims);
}

const accessDenied = (request: AuthRequest, reason: string) =>
  new OAuthError("access_denied", reason, { redirect: redirectOf(request) });

/**
 * The authorization request's parameters, to ask it again (an organization picked): without
 * `prompt` and `max_age`, since the login they asked for has just been made.
 */
function requestParams(request: AuthRequest): [string, string][] {
  const out: [string, string][] = [
    ["response_type", "code"],
    ["client_id", request.client_id],
    ["redirect_uri", request.redirect_uri],
    ["scope", request.scope],
  ];
  if (request.code_challenge) out.push(["code_challenge", request.code_challenge], ["code_challenge_method", "S256"]);
  if (request.state !== undefined) out.push(["state", request.state]);
  if (request.nonce !== undefined) out.push(["nonce", request.nonce]);
  for (const r of request.resource ?? []) out.push(["resource", r]);
  if (request.dpop_jkt !== undefined) out.push(["dpop_jkt", request.dpop_jkt]);
  return out;
}

/**
 * Starts a login transaction and answers with the login page (or its JSON form, for API clients).
 * The transaction is sealed into `tx` (login-tx.ts): no store call.
 */
async function beginLogin(c: Context<AppEnv>, request: ValidatedRequest, client: Client): Promise<Response> {
  const config = c.get("config");
  const ttl = config.POLICY.login_tx_ttl_seconds;
  const { prompts: _, login_hint: loginHint, ui_locales: uiLocales, id_token_hint: __, ...carried } = request;
  const ui = txUiFor(c, client, uiLocales);
  const { tx, id } = await beginLoginTx(config, carried, Date.now(), c.get("region"), ui, client.token_claims);
  const cookie = setCookie(cookieName(TX_COOKIE, config), id, {
    secure: config.secureCookies,
    path: config.cookiePath,
    maxAge: ttl,
  });
  if ((c.req.header("accept") ?? "").includes("application/json"))
    return json({ tx, expires_in: ttl }, 200, { "Set-Cookie": cookie, ...NO_STORE });
  return emailStep(txPageUi(c, ui), { tx, email: loginHint, headers: { "Set-Cookie": cookie } });
}

/**
 * Step 4 after a verified code: `GET redirect_to` with the new session cookie. The login it carries
 * sealed becomes a session here, in one call that also makes the transaction spent.
 */
async function resumeLogin(c: Context<AppEnv>, tx: string): Promise<Response> {
  const config = c.get("config");
  const now = Date.now();
  const login = await openVerifiedLogin(config, tx, now);
  if (!login) throw pageError("err.expired.title", "err.expired.link_invalid");
  const sessionId = sessionCookie(config, c.req.raw);
  const sessionHash = sessionId ? await sha256(sessionId.id) : null;
  if (sessionHash === null || !timingSafeEqualString(sessionHash, login.sessionHash))
    throw pageError("err.expired.title", "err.expired.other_browser");
  const outcome = login.claims;
  // Issue 44: the session's row carries the login's events so far; when a code with a refresh family
  // follows, the family carries them on and writes them first (CODE_HANDOVER_S).
  const codeFollows = !login.request.device_user_code && !(outcome && ("denied" in outcome || "pick" in outcome));
  // Only a code with `offline_access` makes a refresh family to carry the events on; without one the
  // session's row is the login's last record and writes them at once (5 s).
  const familyFollows = codeFollows && login.request.scope.split(" ").includes("offline_access");
  const signIn = requestAuditEvent(c, {
    kind: "sign_in",
    user: login.session.sub,
    emailKey: login.emailKey,
    detail: {
      sid: login.session.sid,
      ...(login.created ? { created: true } : {}),
      // Issue 42: how the person signed in (`user.signed_in` carries it).
      method: login.method,
    },
  });
  const started = await shard(c.env, "session", login.id.ref).startSession({
    txHash: login.hash,
    sessionHash,
    session: login.session,
    now,
    signIn,
    ...(login.audit?.length ? { carried: login.audit } : {}),
    ...(familyFollows ? { auditDue: now + CODE_HANDOVER_S * 1000 } : {}),
  });
  if (!started) throw pageError("err.expired.title", "err.expired.used");
  const clearTx = { "Set-Cookie": clearCookie(cookieName(TX_COOKIE, config), config.secureCookies, config.cookiePath) };
  // A login for a device's request (RFC 8628) goes back to the device page, now signed in.
  if (login.request.device_user_code)
    return redirect(`${config.ISSUER}/device?user_code=${encodeURIComponent(login.request.device_user_code)}`, clearTx);
  // Issue 24: the organization rule refused the login (the session stands), or one must be picked:
  // the request again, answered by the session just made, shows the choices.
  if (outcome && "denied" in outcome) {
    return authorizationResponse(
      login.request.redirect_uri,
      config.ISSUER,
      { error: "access_denied", error_description: outcome.denied, state: login.request.state },
      modeOf(login.request),
      clearTx,
    );
  }
  if (outcome && "pick" in outcome)
    return redirect(`${config.ISSUER}/authorize?${new URLSearchParams(requestParams(login.request))}`, clearTx);
  return redirectWithCode(
    config,
    login.request,
    login.session,
    clearTx,
    outcome?.claims,
    familyFollows ? [...(login.audit ?? []), signIn] : undefined,
  );
}

/**
 * Issue 44: how long the session's shard waits before writing the login's events itself. A code is
 * redeemed a moment after its redirect, and the family that makes writes them 5 s later, as the
 * login's one row; a code redeemed later than this costs one merge of that row instead of nothing.
 * Short, so a login without a refresh family reaches the trail and the webhooks within seconds.
 */
const CODE_HANDOVER_S = 20;

/**
 * Issues an authorization code for the session and redirects to the client (RFC 6749 §4.1.2). The
 * code carries its grant sealed (auth-code.ts), so issuing it writes nothing.
 */
async function redirectWithCode(
  config: Config,
  request: AuthRequest,
  session: SessionInfo,
  headers: Record<string, string> = {},
  claims?: LoginClaims,
  /** Issue 44: the login's events so far, for the refresh family the code makes to carry. */
  audit?: AuditEvent[],
): Promise<Response> {
  const grant: CodeGrant = {
    client_id: request.client_id,
    redirect_uri: request.redirect_uri,
    code_challenge: request.code_challenge,
    scope: request.scope,
    sub: session.sub,
    email: session.email,
    sid: session.sid,
    auth_time: session.auth_time,
    ...(request.nonce !== undefined ? { nonce: request.nonce } : {}),
    ...(request.resource ? { resource: request.resource } : {}),
    ...(claims ? { claims } : {}),
    ...(request.requested_claims ? { requested_claims: request.requested_claims } : {}),
    ...(request.dpop_jkt ? { dpop_jkt: request.dpop_jkt } : {}),
  };
  const code = await issueCode(config, grant, Date.now(), audit);
  return authorizationResponse(
    request.redirect_uri,
    config.ISSUER,
    { code, state: request.state },
    modeOf(request),
    headers,
  );
}
