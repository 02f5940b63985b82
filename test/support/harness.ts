import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { expect } from "vitest";
import authApp from "../../workers/op-auth/src/index";
import mgmtApp from "../../workers/op-mgmt/src/index";
import tokenApp from "../../workers/op-token/src/index";
import { workerFor } from "../../workers/routes";

export const ISSUER = env.ISSUER;
const apps = { "op-auth": authApp, "op-token": tokenApp, "op-mgmt": mgmtApp };

/**
 * Sends a request to the Worker that owns its path, as the issuer's routes would, with real
 * Durable Objects and D1 behind it. Waits for `waitUntil` work (mail) before returning.
 */
export async function call(path: string, init: RequestInit = {}, testEnv: object = env): Promise<Response> {
  const req = new Request(new URL(path, ISSUER), { redirect: "manual", ...init });
  const app = apps[workerFor(new URL(req.url).pathname)];
  const ctx = createExecutionContext();
  const res = await app.fetch(req, testEnv as never, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

export const admin = (path: string, init: RequestInit & { json?: unknown } = {}) => {
  const { json, ...rest } = init;
  const headers = new Headers(rest.headers);
  headers.set("Authorization", `Bearer ${env.ADMIN_TOKEN}`);
  if (json !== undefined) headers.set("Content-Type", "application/json");
  return call(`/admin/v1${path}`, { ...rest, headers, ...(json !== undefined ? { body: JSON.stringify(json) } : {}) });
};

/** A cookie jar: what a browser (or an HTTP client with cookies) keeps between steps. */
export class Browser {
  readonly cookies = new Map<string, string>();

  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.cookies.size && !headers.has("cookie"))
      headers.set("Cookie", [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "));
    const res = await call(path, { ...init, headers });
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(";");
      const eq = (pair as string).indexOf("=");
      const name = (pair as string).slice(0, eq).trim();
      const value = (pair as string).slice(eq + 1).trim();
      if (attrs.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === "") this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return res;
  }

  postJson(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
    return this.fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  }
}

export interface TestClient {
  client_id: string;
  client_secret?: string;
  redirect_uris: string[];
  [k: string]: unknown;
}

let clientCounter = 0;
export async function registerClient(overrides: Record<string, unknown> = {}): Promise<TestClient> {
  clientCounter++;
  const res = await admin("/clients", {
    method: "POST",
    json: {
      client_name: `test client ${clientCounter}`,
      redirect_uris: [`https://rp${clientCounter}.example.com/callback`],
      post_logout_redirect_uris: [`https://rp${clientCounter}.example.com/bye`],
      token_endpoint_auth_method: "client_secret_basic",
      ...overrides,
    },
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as TestClient;
}

export function basicAuth(client: TestClient): string {
  return `Basic ${btoa(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret ?? "")}`)}`;
}

export async function pkce(): Promise<{ verifier: string; challenge: string }> {
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  const challenge = base64url(
    new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))),
  );
  return { verifier, challenge };
}

export function base64url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
}

let emailCounter = 0;
export const uniqueEmail = (tag = "user") => `${tag}.${Date.now().toString(36)}.${++emailCounter}@example.com`;

export async function latestCode(email: string): Promise<string> {
  const res = await call(`/__dev/mailbox/${encodeURIComponent(email)}`);
  expect(res.status).toBe(200);
  const { messages } = (await res.json()) as { messages: { code: string }[] };
  expect(messages.length).toBeGreaterThan(0);
  return (messages[0] as { code: string }).code;
}

export function authorizeQuery(client: TestClient, challenge: string, extra: Record<string, string> = {}): string {
  return new URLSearchParams({
    response_type: "code",
    client_id: client.client_id,
    redirect_uri: client.redirect_uris[0] as string,
    scope: "openid email offline_access",
    state: "st-123",
    nonce: "n-456",
    code_challenge: challenge,
    code_challenge_method: "S256",
    ...extra,
  }).toString();
}

export interface LoginResult {
  browser: Browser;
  code: string;
  verifier: string;
  redirect: URL;
}

/** Steps 1-4 of CONTRACT §2 as an API client: returns the authorization code. */
export async function loginForCode(
  client: TestClient,
  email = uniqueEmail(),
  opts: { browser?: Browser; extra?: Record<string, string> } = {},
): Promise<LoginResult> {
  const browser = opts.browser ?? new Browser();
  const { verifier, challenge } = await pkce();
  const init = await browser.fetch(`/authorize?${authorizeQuery(client, challenge, opts.extra)}`, {
    headers: { Accept: "application/json" },
  });
  expect(init.status, await init.clone().text()).toBe(200);
  const { tx } = (await init.json()) as { tx: string };
  const gen = await browser.postJson("/email-code/generate", { tx, email });
  expect(gen.status, await gen.clone().text()).toBe(200);
  const code = await latestCode(email);
  const ver = await browser.postJson("/email-code/verify", { tx, email, code });
  expect(ver.status, await ver.clone().text()).toBe(200);
  const { redirect_to } = (await ver.json()) as { redirect_to: string };
  const fin = await browser.fetch(redirect_to);
  expect(fin.status, await fin.clone().text()).toBe(302);
  const redirect = new URL(fin.headers.get("location") as string);
  return { browser, code: redirect.searchParams.get("code") as string, verifier, redirect };
}

export async function redeem(client: TestClient, code: string, verifier: string, extra: Record<string, string> = {}) {
  return call("/token", {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Authorization: basicAuth(client) },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: client.redirect_uris[0] as string,
      code_verifier: verifier,
      ...extra,
    }),
  });
}

export interface Tokens {
  access_token: string;
  id_token: string;
  refresh_token?: string;
  scope: string;
  expires_in: number;
  token_type: string;
}

/** The whole five-step login: tokens for a fresh client and user. */
export async function fullLogin(client: TestClient, email = uniqueEmail()) {
  const login = await loginForCode(client, email);
  const res = await redeem(client, login.code, login.verifier);
  expect(res.status, await res.clone().text()).toBe(200);
  return { ...login, email, tokens: (await res.json()) as Tokens };
}

export function form(client: TestClient, params: Record<string, string>, path = "/token") {
  return call(path, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Authorization: basicAuth(client) },
    body: new URLSearchParams(params),
  });
}
