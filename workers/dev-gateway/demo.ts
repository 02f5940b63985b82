import { createLocalJWKSet, type JSONWebKeySet, type JWTPayload, jwtVerify } from "jose";
import { base64url, randomToken } from "../../durable-objects/contract/crypto";
import { escapeHtml } from "../shared/branding/html";
import { getCookie, pageSecurityHeaders } from "../shared/platform/http";

/**
 * The demo relying party (local only, served by the dev gateway at /demo): a public client that
 * signs in with the authorization code flow + PKCE, exactly as a third-party app would, except that
 * it reaches the token endpoint through the OP_TOKEN service binding instead of the network.
 */
export interface DemoEnv {
  ISSUER: string;
  OP_TOKEN: Fetcher;
  DEMO_CLIENT_ID?: string;
}

/** The login transaction (PKCE verifier, state, nonce) lives in this cookie between /login and /callback. */
const TX_COOKIE = "kw_demo_tx";
const TX_MAX_AGE = 600;
const SCOPE = "openid email offline_access";

interface LoginTx {
  verifier: string;
  state: string;
  nonce: string;
}

interface TokenResponse {
  access_token: string;
  token_type: string;
  expires_in: number;
  id_token: string;
  scope?: string;
  refresh_token?: string;
}

export async function demo(req: Request, env: DemoEnv): Promise<Response> {
  if (req.method !== "GET" && req.method !== "HEAD")
    return new Response("method not allowed", { status: 405, headers: { Allow: "GET, HEAD" } });
  const url = new URL(req.url);
  try {
    switch (url.pathname) {
      case "/":
      case "/demo":
      case "/demo/":
        return home(env);
      case "/demo/login":
        return await login(env);
      case "/demo/callback":
        return await callback(req, env, url);
      default:
        return page("Not found", `<h1>Not found</h1><p><a href="/demo">Back to the demo</a></p>`, { status: 404 });
    }
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return errorPage("The demo could not finish the sign-in", message, 502);
  }
}

const clientId = (env: DemoEnv) => env.DEMO_CLIENT_ID ?? "keyway-demo";
const redirectUri = (env: DemoEnv) => `${env.ISSUER}/demo/callback`;
const secure = (env: DemoEnv) => env.ISSUER.startsWith("https://");

function home(env: DemoEnv): Response {
  return page(
    "Keyway demo",
    `<h1>Keyway demo app</h1>
<p>A relying party that signs in with <strong>${escapeHtml(env.ISSUER)}</strong> using the authorization code flow with PKCE.</p>
<a class="button" href="/demo/login">Sign in with Keyway</a>
<p class="muted">Codes are delivered to the dev mailbox: <code>${escapeHtml(env.ISSUER)}/__dev/mailbox/{email}</code></p>`,
  );
}

async function login(env: DemoEnv): Promise<Response> {
  const tx: LoginTx = { verifier: randomToken(32), state: randomToken(16), nonce: randomToken(16) };
  const challenge = base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(tx.verifier)));
  const authorize = new URL(`${env.ISSUER}/authorize`);
  authorize.search = new URLSearchParams({
    response_type: "code",
    client_id: clientId(env),
    redirect_uri: redirectUri(env),
    scope: SCOPE,
    state: tx.state,
    nonce: tx.nonce,
    code_challenge: challenge,
    code_challenge_method: "S256",
  }).toString();
  return new Response(null, {
    status: 302,
    headers: {
      Location: authorize.toString(),
      "Set-Cookie": txCookie(env, base64url(new TextEncoder().encode(JSON.stringify(tx))), TX_MAX_AGE),
      "Cache-Control": "no-store",
    },
  });
}

/** Scoped to /demo so that the OP never sees it. */
function txCookie(env: DemoEnv, value: string, maxAge: number): string {
  return `${TX_COOKIE}=${value}; Path=/demo; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${secure(env) ? "; Secure" : ""}`;
}

function readTx(req: Request): LoginTx | null {
  const raw = getCookie(req, TX_COOKIE);
  if (!raw) return null;
  try {
    const b64 = raw.replace(/-/g, "+").replace(/_/g, "/");
    const tx = JSON.parse(atob(b64 + "===".slice((b64.length + 3) % 4))) as Partial<LoginTx>;
    if (typeof tx.verifier !== "string" || typeof tx.state !== "string" || typeof tx.nonce !== "string") return null;
    return tx as LoginTx;
  } catch {
    return null;
  }
}

async function callback(req: Request, env: DemoEnv, url: URL): Promise<Response> {
  const params = url.searchParams;
  const clear = { "Set-Cookie": txCookie(env, "", 0) };
  const tx = readTx(req);
  if (!tx) return errorPage("Sign-in expired", "No sign-in is in progress in this browser. Start again.", 400, clear);
  if (params.get("state") !== tx.state)
    return errorPage("Sign-in rejected", "The state parameter does not match this browser's sign-in.", 400, clear);
  // RFC 9207: the issuer identifies itself in the response; a mix-up attack would show another one.
  if (params.get("iss") !== env.ISSUER)
    return errorPage("Sign-in rejected", `Unexpected iss ${JSON.stringify(params.get("iss"))}.`, 400, clear);
  const error = params.get("error");
  if (error)
    return errorPage(
      "Sign-in failed",
      `${error}${params.get("error_description") ? `: ${params.get("error_description")}` : ""}`,
      400,
      clear,
    );
  const code = params.get("code");
  if (!code) return errorPage("Sign-in failed", "The response carries no code.", 400, clear);

  const tokenRes = await opToken(env, "/token", {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
    // A public client authenticates with its client_id alone; PKCE binds the code to this browser.
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: redirectUri(env),
      code_verifier: tx.verifier,
      client_id: clientId(env),
    }),
  });
  const tokenBody = await tokenRes.text();
  if (!tokenRes.ok)
    return errorPage("Token request failed", `POST /token answered ${tokenRes.status}: ${tokenBody}`, 502, clear);
  const tokens = JSON.parse(tokenBody) as TokenResponse;

  const claims = await verifyIdToken(env, tokens.id_token, tx.nonce);

  const userinfoRes = await opToken(env, "/userinfo", {
    headers: { Authorization: `Bearer ${tokens.access_token}`, Accept: "application/json" },
  });
  const userinfoText = await userinfoRes.text();
  let userinfo: unknown = userinfoText;
  try {
    userinfo = JSON.parse(userinfoText);
  } catch {
    // shown as text
  }

  const logout = new URL(`${env.ISSUER}/logout`);
  logout.search = new URLSearchParams({
    id_token_hint: tokens.id_token,
    post_logout_redirect_uri: `${env.ISSUER}/demo`,
  }).toString();
  const summary = {
    token_type: tokens.token_type,
    expires_in: tokens.expires_in,
    scope: tokens.scope,
    refresh_token: tokens.refresh_token ? "(issued)" : "(none)",
  };
  return page(
    "Signed in · Keyway demo",
    `<h1>Signed in</h1>
<p>You are signed in as <strong>${escapeHtml(String(claims.email ?? claims.sub))}</strong>. The ID token's signature, issuer, audience and nonce were verified.</p>
<h2>ID token claims</h2><pre id="claims">${escapeHtml(JSON.stringify(claims, null, 2))}</pre>
<h2>UserInfo (${userinfoRes.status})</h2><pre id="userinfo">${escapeHtml(typeof userinfo === "string" ? userinfo : JSON.stringify(userinfo, null, 2))}</pre>
<h2>Token response</h2><pre id="token">${escapeHtml(JSON.stringify(summary, null, 2))}</pre>
<p><a class="button" href="${escapeHtml(logout.toString())}">Sign out</a></p>
<p class="muted"><a href="/demo">Back to the demo home</a></p>`,
    { headers: clear },
  );
}

/** Calls op-token through its service binding with a real request to the issuer's URL. */
function opToken(env: DemoEnv, path: string, init: RequestInit): Promise<Response> {
  return env.OP_TOKEN.fetch(new Request(`${env.ISSUER}${path}`, init));
}

async function verifyIdToken(env: DemoEnv, idToken: string, nonce: string): Promise<JWTPayload> {
  const jwksRes = await opToken(env, "/jwks.json", { headers: { Accept: "application/json" } });
  if (!jwksRes.ok) throw new Error(`GET /jwks.json answered ${jwksRes.status}`);
  const jwks = createLocalJWKSet((await jwksRes.json()) as JSONWebKeySet);
  const { payload } = await jwtVerify(idToken, jwks, {
    issuer: env.ISSUER,
    audience: clientId(env),
    algorithms: ["RS256", "ES256"],
  });
  if (payload.nonce !== nonce) throw new Error("the ID token's nonce does not match this sign-in");
  return payload;
}

const STYLE = `
*{box-sizing:border-box}body{margin:0;min-height:100vh;display:grid;place-items:center;background:#f4f5f7;
font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1b1f24}
main{width:min(94vw,760px);background:#fff;border-radius:12px;padding:32px;box-shadow:0 1px 3px #0002;margin:24px 0}
h1{font-size:22px;margin:0 0 8px}h2{font-size:16px;margin:20px 0 6px}p{color:#4b5563}
pre{background:#0d1117;color:#e6edf3;padding:12px 14px;border-radius:8px;overflow:auto;font-size:13px}
.button{display:inline-block;padding:11px 18px;border-radius:8px;background:#1f6feb;color:#fff;text-decoration:none;font-weight:600}
.error{background:#fdecec;color:#a61b1b;padding:8px 12px;border-radius:8px;white-space:pre-wrap;word-break:break-word}
.muted{font-size:13px;color:#6b7280}code{word-break:break-all}`;

function page(title: string, body: string, o: { status?: number; headers?: Record<string, string> } = {}): Response {
  const nonce = randomToken(16);
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1"><title>${escapeHtml(title)}</title>
<style nonce="${nonce}">${STYLE}</style></head><body><main>${body}</main></body></html>`;
  return new Response(html, { status: o.status ?? 200, headers: { ...pageSecurityHeaders(nonce), ...o.headers } });
}

function errorPage(title: string, message: string, status: number, headers?: Record<string, string>): Response {
  return page(
    title,
    `<h1>${escapeHtml(title)}</h1><p class="error" role="alert">${escapeHtml(message)}</p>
<p><a class="button" href="/demo/login">Start again</a></p>`,
    { status, headers },
  );
}
