import type { Context } from "hono";
import { jwtVerify } from "jose";
import {
  base64url,
  randomToken,
  seal,
  timingSafeEqualString,
  unseal,
} from "../../../../durable-objects/contract/crypto";
import { log } from "../../../../durable-objects/contract/log";
import type { Config } from "../../../shared/config/config";
import { forgetClient } from "../../../shared/oauth/clients";
import { keyRing } from "../../../shared/oauth/keys";
import { normalizeEmail } from "../../../shared/people/email";
import { getCookie, setCookie } from "../../../shared/platform/http";
import { DEFAULT_TENANT } from "../../../shared/routing/tenant-route";
import type { ConsoleEnv } from "./env";
import { renderMessagePage } from "./layout";

/**
 * The operators' web console (issue 43, CONTRACT §11), first slice: `/console` on the default
 * tenant's origin. The console is an OpenID Connect client of the deployment itself (authorization
 * code + PKCE, a public client): the operator signs in with Keyway's own email-code login, the code is
 * redeemed at Keyway's own token endpoint (op-token, through the OP_TOKEN service binding: one
 * implementation of the code grant), and the verified email of the ID token is looked up in the
 * `operators` grants. The console's session is a sealed cookie; the admin token never reaches a browser.
 *
 * Public client: op-mgmt could keep a secret, but a secret adds one to rotate and derive, and buys
 * nothing here: the code is bound to the exact redirect URI on Keyway's own origin and to the PKCE
 * verifier, which never leaves op-mgmt (it travels sealed in the login cookie).
 */

/** The console's client row at the default tenant, ensured on the first sign-in (its redirect URI is the issuer's). */
export const CONSOLE_CLIENT_ID = "keyway-console";
const SESSION_COOKIE = "kw_console";
const LOGIN_COOKIE = "kw_console_login";
const SESSION_SECONDS = 8 * 3600;
const LOGIN_SECONDS = 10 * 60;
const SESSION_AAD = "keyway-console-session";
const LOGIN_AAD = "keyway-console-login";

export interface Session {
  email: string;
  /** Bound to the session: the sign-out form's CSRF token. */
  csrf: string;
  exp: number;
}
interface LoginState {
  state: string;
  verifier: string;
  nonce: string;
  exp: number;
}

/** Sealed with a key of its own, derived from the deployment's key-encryption secret. */
const material = (config: Config) => `keyway-console:${config.KEY_ENCRYPTION_SECRET}`;
const redirectUri = (config: Config) => `${config.ISSUER}/console/callback`;

const cookie = (config: Config, name: string, value: string, maxAge: number) =>
  setCookie(name, value, { secure: config.secureCookies, maxAge, path: "/console" });

export async function openSealed<T extends { exp: number }>(
  c: Context<ConsoleEnv>,
  name: string,
  aad: string,
): Promise<T | null> {
  const raw = getCookie(c.req.raw, name);
  if (!raw || raw.length > 4096) return null;
  const opened = await unseal(material(c.get("config")), raw, aad);
  if (!opened) return null;
  try {
    const value = JSON.parse(opened) as T;
    return typeof value.exp === "number" && value.exp > Date.now() ? value : null;
  } catch {
    return null;
  }
}

async function s256(verifier: string): Promise<string> {
  return base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
}

/**
 * The console's client at the default tenant: written when missing or when the issuer moved. Asked
 * only where a sign-in starts, never on the login path itself. An isolate that cached it as missing
 * would hold that for `client_cache_seconds` at most.
 */
async function ensureConsoleClient(c: Context<ConsoleEnv>): Promise<void> {
  const config = c.get("config");
  const uris = JSON.stringify([redirectUri(config)]);
  const row = await c.env.DB.prepare("SELECT redirect_uris, tenant FROM clients WHERE client_id = ?")
    .bind(CONSOLE_CLIENT_ID)
    .first<{ redirect_uris: string; tenant: string }>();
  if (row && row.redirect_uris === uris && row.tenant === DEFAULT_TENANT) return;
  const now = Date.now();
  await c.env.DB.prepare(
    `INSERT INTO clients (client_id, tenant, client_name, token_endpoint_auth_method, secret_hash, redirect_uris,
      post_logout_redirect_uris, grant_types, scope, id_token_signed_response_alg, allowed_cors_origins,
      require_pkce, created_at, updated_at)
     VALUES (?, ?, ?, 'none', NULL, ?, '[]', '["authorization_code"]', 'openid email', 'ES256', '[]', 1, ?, ?)
     ON CONFLICT (client_id) DO UPDATE SET tenant = excluded.tenant, redirect_uris = excluded.redirect_uris,
      updated_at = excluded.updated_at`,
  )
    .bind(CONSOLE_CLIENT_ID, DEFAULT_TENANT, `${config.ISSUER_NAME} console`, uris, now, now)
    .run();
  forgetClient(CONSOLE_CLIENT_ID);
}

/** A sign-in starts: state, nonce and PKCE verifier sealed in a short-lived cookie, then Keyway's own /authorize. */
export async function startSignIn(c: Context<ConsoleEnv>): Promise<Response> {
  const config = c.get("config");
  await ensureConsoleClient(c);
  const login: LoginState = {
    state: randomToken(16),
    verifier: randomToken(32),
    nonce: randomToken(16),
    exp: Date.now() + LOGIN_SECONDS * 1000,
  };
  const query = new URLSearchParams({
    response_type: "code",
    client_id: CONSOLE_CLIENT_ID,
    redirect_uri: redirectUri(config),
    scope: "openid email",
    state: login.state,
    nonce: login.nonce,
    code_challenge: await s256(login.verifier),
    code_challenge_method: "S256",
  });
  const sealed = await seal(material(config), JSON.stringify(login), LOGIN_AAD);
  return new Response(null, {
    status: 302,
    headers: {
      Location: `${config.ISSUER}/authorize?${query}`,
      "Set-Cookie": cookie(config, LOGIN_COOKIE, sealed, LOGIN_SECONDS),
      "Cache-Control": "no-store",
    },
  });
}

/** The code, redeemed at Keyway's token endpoint; the ID token's verified email, or null. */
async function redeem(c: Context<ConsoleEnv>, code: string, login: LoginState): Promise<string | null> {
  const config = c.get("config");
  const tokenEndpoint = c.env.OP_TOKEN;
  if (!tokenEndpoint) {
    log("error", "console sign-in needs the OP_TOKEN service binding");
    return null;
  }
  const res = await tokenEndpoint.fetch(`${config.ISSUER}/token`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: redirectUri(config),
      client_id: CONSOLE_CLIENT_ID,
      code_verifier: login.verifier,
    }),
  });
  if (!res.ok) return null;
  const idToken = ((await res.json()) as { id_token?: unknown }).id_token;
  if (typeof idToken !== "string") return null;
  try {
    const ring = await keyRing(c.env, config);
    const { payload } = await jwtVerify(
      idToken,
      async (header) => {
        const entry = header.kid ? ring.verification.get(header.kid) : undefined;
        if (!entry || entry.alg !== header.alg) throw new Error("unknown key");
        return entry.key;
      },
      { issuer: config.ISSUER, audience: CONSOLE_CLIENT_ID, algorithms: ["ES256", "RS256"] },
    );
    if (payload.nonce !== login.nonce || payload.email_verified !== true) return null;
    return normalizeEmail(payload.email);
  } catch {
    return null;
  }
}

/** The console session of this request, or null (none, forged, or past its 8 hours). */
export const openSession = (c: Context<ConsoleEnv>) => openSealed<Session>(c, SESSION_COOKIE, SESSION_AAD);

export async function callback(c: Context<ConsoleEnv>): Promise<Response> {
  const config = c.get("config");
  const login = await openSealed<LoginState>(c, LOGIN_COOKIE, LOGIN_AAD);
  const state = c.req.query("state") ?? "";
  const code = c.req.query("code");
  const failed = () => renderMessagePage(c, { kind: "signInFailed", status: 400 });
  if (!login || !code || !timingSafeEqualString(state, login.state)) return failed();
  const email = await redeem(c, code, login);
  if (!email) return failed();
  const session: Session = { email, csrf: randomToken(16), exp: Date.now() + SESSION_SECONDS * 1000 };
  const headers = new Headers({ Location: `${config.ISSUER}/console`, "Cache-Control": "no-store" });
  headers.append(
    "Set-Cookie",
    cookie(config, SESSION_COOKIE, await seal(material(config), JSON.stringify(session), SESSION_AAD), SESSION_SECONDS),
  );
  headers.append("Set-Cookie", cookie(config, LOGIN_COOKIE, "", 0));
  return new Response(null, { status: 303, headers });
}

export async function logout(c: Context<ConsoleEnv>): Promise<Response> {
  const session = await openSession(c);
  const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
  const csrf = typeof form.csrf === "string" ? form.csrf : "";
  if (!session || !timingSafeEqualString(csrf, session.csrf))
    return renderMessagePage(c, { kind: "notSignedOut", status: 403 });
  const res = renderMessagePage(c, { kind: "signedOut" });
  res.headers.append("Set-Cookie", cookie(c.get("config"), SESSION_COOKIE, "", 0));
  return res;
}
