import {
  createExecutionContext,
  env,
  runDurableObjectAlarm,
  runInDurableObject,
  waitOnExecutionContext,
} from "cloudflare:test";
import { createLocalJWKSet, type JWTPayload, jwtVerify } from "jose";
import { expect, vi } from "vitest";
import { auditMonths, eventsTable } from "../../durable-objects/contract/audit-trail";
import authApp from "../../workers/op-auth/src/index";
import mgmtApp from "../../workers/op-mgmt/src/index";
import tokenApp from "../../workers/op-token/src/index";
import { workerFor } from "../../workers/shared/app/worker-routes";
import { loadConfig } from "../../workers/shared/config/config";
import { codeGrantId } from "../../workers/shared/oauth/auth-code";
import { parseId } from "../../workers/shared/routing/ids";
import { openSealedId } from "../../workers/shared/routing/sealed-id";

export const ISSUER = env.ISSUER;
const apps = { "op-auth": authApp, "op-token": tokenApp, "op-mgmt": mgmtApp };

export type TestEnv = typeof env;

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

/**
 * A copy of the test env with other string variables. Config is parsed once per env object, so a
 * copy is parsed afresh: e.g. `withVars({ POLICY: policy({ otp_max_attempts: 2 }) })`.
 */
/** A JSON object, or null (a test of a malformed POLICY passes it as it is). */
function parsedObject(text: string): Record<string, unknown> | null {
  try {
    const value = JSON.parse(text) as unknown;
    return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export function withVars(vars: Record<string, string>, base: TestEnv = env): TestEnv {
  // The suite starts logins it never finishes (and pins clocks, so their places never expire): logins
  // under way are unbounded unless a test sets the bound (test/security/load-shedding.test.ts).
  const parsed = vars.POLICY === undefined ? null : parsedObject(vars.POLICY);
  if (parsed && parsed.max_logins_under_way === undefined)
    vars = { ...vars, POLICY: JSON.stringify({ ...parsed, max_logins_under_way: 100_000 }) };
  return { ...base, ...vars } as TestEnv;
}

/** A POLICY string: the test defaults (no client cache, logins under way unbounded) plus `overrides`. */
export const policy = (overrides: Record<string, number | string>) =>
  JSON.stringify({ client_cache_seconds: 0, max_logins_under_way: 100_000, ...overrides });

export const admin = (path: string, init: RequestInit & { json?: unknown } = {}, testEnv: object = env) => {
  const { json, ...rest } = init;
  const headers = new Headers(rest.headers);
  headers.set("Authorization", `Bearer ${env.ADMIN_TOKEN}`);
  if (json !== undefined) headers.set("Content-Type", "application/json");
  return call(
    `/admin/v1${path}`,
    { ...rest, headers, ...(json !== undefined ? { body: JSON.stringify(json) } : {}) },
    testEnv,
  );
};

let ipCounter = 0;
/** A distinct client address per browser, so per-IP quotas never couple unrelated tests. */
export const uniqueIp = () => {
  const n = ++ipCounter + Math.floor(Math.random() * 1_000_000) * 1000;
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
};

/** A cookie jar: what a browser (or an HTTP client with cookies) keeps between steps. */
/**
 * `POST /email-code/generate` straight to op-auth with an execution context of its own, so a test can
 * tell the response from the work after it (`waitUntil`: the mail).
 */
export function generateWithContext(testEnv: TestEnv, browser: Browser, tx: string, email: string) {
  const ctx = createExecutionContext();
  const response = authApp.fetch(
    new Request(`${ISSUER}/email-code/generate`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Cookie: [...browser.cookies].map(([k, v]) => `${k}=${v}`).join("; "),
        "CF-Connecting-IP": browser.ip,
      },
      body: JSON.stringify({ tx, email }),
    }),
    testEnv as never,
    ctx,
  );
  return { response, afterResponse: () => waitOnExecutionContext(ctx) };
}

export class Browser {
  readonly cookies = new Map<string, string>();
  readonly ip: string;
  readonly env: TestEnv;
  /** Where Cloudflare would say this browser is (`request.cf`); none, like a local request, when unset. */
  readonly geo: { country: string; continent?: string } | undefined;
  /** The path a tenant's endpoints are under (`/t/<tenant>`), prefixed to every root path; "" at the origin. */
  readonly base: string;

  constructor(opts: { env?: TestEnv; ip?: string; geo?: { country: string; continent?: string }; base?: string } = {}) {
    this.env = opts.env ?? env;
    this.ip = opts.ip ?? uniqueIp();
    this.geo = opts.geo;
    this.base = opts.base ?? "";
  }

  async fetch(relative: string, init: RequestInit = {}): Promise<Response> {
    const path = relative.startsWith("/") ? `${this.base}${relative}` : relative;
    const headers = new Headers(init.headers);
    if (this.cookies.size && !headers.has("cookie"))
      headers.set("Cookie", [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "));
    if (!headers.has("cf-connecting-ip")) headers.set("CF-Connecting-IP", this.ip);
    const res = await call(path, { ...init, headers, ...(this.geo ? { cf: this.geo } : {}) }, this.env);
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

  postForm(path: string, body: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
    return this.fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", ...headers },
      body: new URLSearchParams(body),
    });
  }

  /** AuthorizeInit as an API client: the tx id (also kept as the tx cookie). */
  async startLogin(client: TestClient, challenge: string, extra: AuthorizeExtra = {}): Promise<string> {
    const res = await this.fetch(`/authorize?${authorizeQuery(client, challenge, extra)}`, {
      headers: { Accept: "application/json" },
    });
    expect(res.status, await res.clone().text()).toBe(200);
    return ((await res.json()) as { tx: string }).tx;
  }
}

export interface TestClient {
  client_id: string;
  client_secret?: string;
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  token_endpoint_auth_method: string;
  [k: string]: unknown;
}

let clientCounter = 0;
/** Registers a client at the default tenant, or at `tenant`'s admin routes (issue 23). */
export async function registerClient(
  overrides: Record<string, unknown> = {},
  testEnv: object = env,
  tenant?: string,
): Promise<TestClient> {
  clientCounter++;
  const tag = `${clientCounter}-${Math.random().toString(36).slice(2, 8)}`;
  const res = await admin(
    `${tenant ? `/tenants/${tenant}` : ""}/clients`,
    {
      method: "POST",
      json: {
        client_name: `test client ${tag}`,
        redirect_uris: [`https://rp${tag}.example.com/callback`],
        post_logout_redirect_uris: [`https://rp${tag}.example.com/bye`],
        token_endpoint_auth_method: "client_secret_basic",
        ...overrides,
      },
    },
    testEnv,
  );
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as TestClient;
}

export function basicAuth(client: TestClient): string {
  return `Basic ${btoa(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret ?? "")}`)}`;
}

export async function pkce(): Promise<{ verifier: string; challenge: string }> {
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  return { verifier, challenge: await s256(verifier) };
}

export async function s256(value: string): Promise<string> {
  return base64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(value))));
}

/** SHA-256, base64url: how the stores key rows by a token, tx or session id. */
export const sha256 = s256;

export function base64url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
}

let emailCounter = 0;
export const uniqueEmail = (tag = "user") =>
  `${tag}.${Date.now().toString(36)}.${++emailCounter}.${Math.random().toString(36).slice(2, 7)}@example.com`;

export async function mailbox(
  email: string,
  testEnv: object = env,
  base = "",
): Promise<{ code: string; to: string }[]> {
  const res = await call(`${base}/__dev/mailbox/${encodeURIComponent(email)}`, {}, testEnv);
  expect(res.status).toBe(200);
  return ((await res.json()) as { messages: { code: string; to: string }[] }).messages;
}

export async function latestCode(email: string, testEnv: object = env, base = ""): Promise<string> {
  const messages = await mailbox(email, testEnv, base);
  expect(messages.length).toBeGreaterThan(0);
  return (messages[0] as { code: string }).code;
}

/** Parameters added to an authorization request: null leaves one out, a list repeats it (RFC 8707 `resource`). */
export type AuthorizeExtra = Record<string, string | string[] | null>;

/** The authorization request's query; an `extra` value of null leaves that parameter out. */
export function authorizeQuery(client: TestClient, challenge: string, extra: AuthorizeExtra = {}): string {
  const params: AuthorizeExtra = {
    response_type: "code",
    client_id: client.client_id,
    redirect_uri: client.redirect_uris[0] as string,
    scope: "openid email offline_access",
    state: "st-123",
    nonce: "n-456",
    code_challenge: challenge,
    code_challenge_method: "S256",
    ...extra,
  };
  return new URLSearchParams(
    Object.entries(params).flatMap(([k, v]) => (v === null ? [] : Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]])),
  ).toString();
}

export interface LoginResult {
  browser: Browser;
  code: string;
  verifier: string;
  redirect: URL;
  tx: string;
  /** What the verify answered: the login, sealed onto the transaction's id. */
  redirectTo: string;
}

/** Steps 1-4 of CONTRACT §2 as an API client: returns the authorization code. */
export async function loginForCode(
  client: TestClient,
  email = uniqueEmail(),
  opts: { browser?: Browser; extra?: AuthorizeExtra; env?: TestEnv } = {},
): Promise<LoginResult> {
  const browser = opts.browser ?? new Browser(opts.env ? { env: opts.env } : {});
  const { verifier, challenge } = await pkce();
  const tx = await browser.startLogin(client, challenge, opts.extra);
  const gen = await browser.postJson("/email-code/generate", { tx, email });
  expect(gen.status, await gen.clone().text()).toBe(200);
  const code = await latestCode(email, browser.env, browser.base);
  const ver = await browser.postJson("/email-code/verify", { tx, email, code });
  expect(ver.status, await ver.clone().text()).toBe(200);
  const { redirect_to } = (await ver.json()) as { redirect_to: string };
  const fin = await browser.fetch(redirect_to);
  expect(fin.status, await fin.clone().text()).toBe(302);
  const redirect = new URL(fin.headers.get("location") as string);
  return {
    browser,
    code: redirect.searchParams.get("code") as string,
    verifier,
    redirect,
    tx,
    redirectTo: redirect_to,
  };
}

/** With a live session in `browser`, the authorization request again: a new code without a login. */
export async function codeFromSession(
  browser: Browser,
  client: TestClient,
  extra: AuthorizeExtra = {},
): Promise<{ code: string; verifier: string; redirect: URL }> {
  const { verifier, challenge } = await pkce();
  const res = await browser.fetch(`/authorize?${authorizeQuery(client, challenge, { prompt: "none", ...extra })}`);
  expect(res.status, await res.clone().text()).toBe(302);
  const redirect = new URL(res.headers.get("location") as string);
  expect(redirect.searchParams.get("error"), redirect.toString()).toBeNull();
  return { code: redirect.searchParams.get("code") as string, verifier, redirect };
}

export async function redeem(
  client: TestClient,
  code: string,
  verifier: string,
  extra: Record<string, string> = {},
  testEnv: object = env,
  base = "",
) {
  return call(
    `${base}/token`,
    {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", ...clientAuthHeaders(client) },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code,
        redirect_uri: client.redirect_uris[0] as string,
        code_verifier: verifier,
        ...clientAuthParams(client),
        ...extra,
      }),
    },
    testEnv,
  );
}

/** The client authentication a client registered, as headers (client_secret_basic) ... */
function clientAuthHeaders(client: TestClient): Record<string, string> {
  return client.token_endpoint_auth_method === "client_secret_basic" || !client.token_endpoint_auth_method
    ? { Authorization: basicAuth(client) }
    : {};
}
/** ... or as form parameters (client_secret_post, none). */
function clientAuthParams(client: TestClient): Record<string, string> {
  if (client.token_endpoint_auth_method === "client_secret_post")
    return { client_id: client.client_id, client_secret: client.client_secret ?? "" };
  if (client.token_endpoint_auth_method === "none") return { client_id: client.client_id };
  return {};
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
export async function fullLogin(
  client: TestClient,
  email = uniqueEmail(),
  opts: { browser?: Browser; extra?: AuthorizeExtra; env?: TestEnv } = {},
) {
  const login = await loginForCode(client, email, opts);
  const res = await redeem(client, login.code, login.verifier, {}, login.browser.env, login.browser.base);
  expect(res.status, await res.clone().text()).toBe(200);
  return { ...login, email, tokens: (await res.json()) as Tokens };
}

/** A client-authenticated form POST (token, revoke, introspect), authenticated as the client registered. */
export function form(client: TestClient, params: Record<string, string>, path = "/token", testEnv: object = env) {
  return call(
    path,
    {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", ...clientAuthHeaders(client) },
      body: new URLSearchParams({ ...clientAuthParams(client), ...params }),
    },
    testEnv,
  );
}

export const refreshGrant = (
  client: TestClient,
  refreshToken: string,
  extra: Record<string, string> = {},
  e?: object,
) => form(client, { grant_type: "refresh_token", refresh_token: refreshToken, ...extra }, "/token", e);

export const userinfo = (accessToken: string, testEnv: object = env) =>
  call("/userinfo", { headers: { Authorization: `Bearer ${accessToken}` } }, testEnv);

/** Verifies a JWT against the published `/jwks.json`, as a relying party would. */
export async function verifyJwt(
  token: string,
  opts: { audience?: string; typ?: string } = {},
): Promise<{ payload: JWTPayload & Record<string, unknown>; header: Record<string, unknown> }> {
  const res = await call("/jwks.json");
  expect(res.status).toBe(200);
  const jwks = createLocalJWKSet((await res.json()) as never);
  const { payload, protectedHeader } = await jwtVerify(token, jwks, {
    issuer: ISSUER,
    ...(opts.audience ? { audience: opts.audience } : {}),
    ...(opts.typ ? { typ: opts.typ } : {}),
  });
  return { payload: payload as JWTPayload & Record<string, unknown>, header: protectedHeader as never };
}

/**
 * Parses a Keyway id `<prefix>_<gen36>_<shard36>_<secret>`; of a sealed id (a login transaction, an
 * authorization code: `<id>.<sealed state>`), the id part.
 */
export function idParts(value: string): {
  prefix: string;
  region: string;
  gen: number;
  shard: number;
  secret: string;
} {
  const id = sealedIdPart(value);
  const m = /^([a-z]+)_([a-z][a-z0-9]+)_([0-9a-z]+)_([0-9a-z]+)_([A-Za-z0-9_-]{44})$/.exec(id);
  if (!m) throw new Error(`not a Keyway id: ${id}`);
  return {
    prefix: m[1] as string,
    region: m[2] as string,
    gen: Number.parseInt(m[3] as string, 36),
    shard: Number.parseInt(m[4] as string, 36),
    secret: m[5] as string,
  };
}

const BINDINGS = {
  session: "SESSIONS",
  challenge: "CHALLENGES",
  code: "AUTH_CODES",
  revocation: "REVOCATIONS",
  refresh: "REFRESH_TOKENS",
} as const;
export type Store = keyof typeof BINDINGS;

/**
 * The stub of one shard, named as the router names it, built independently: `<store>:g<gen>:s<shard>`
 * in the global region, `<store>:<region>:g<gen>:s<shard>` in another, inside its jurisdiction if any.
 */
export function shardStub(
  store: Store,
  gen: number,
  shardNo: number,
  region = "global",
  jurisdiction?: "eu" | "us" | "fedramp",
): DurableObjectStub {
  const ns = env[BINDINGS[store]] as unknown as DurableObjectNamespace;
  // workerd has no jurisdictions: there a jurisdiction's objects are named `<jurisdiction>/<name>` (stores.ts).
  const within = jurisdiction ? `${jurisdiction}/` : "";
  return ns.get(ns.idFromName(`${within}${store}:${region === "global" ? "" : `${region}:`}g${gen}:s${shardNo}`));
}

/** A shard of a write-behind object (`mail:` MailOutbox, `audit:` AuditBuffer); the test config has 4 in generation 0. */
export function writeBehindStub(kind: "mail" | "audit", shardNo: number): DurableObjectStub {
  const ns = (kind === "mail" ? env.MAIL_OUTBOX : env.AUDIT) as unknown as DurableObjectNamespace;
  return ns.get(ns.idFromName(`${kind}:g0:s${shardNo}`));
}

/**
 * The state a sealed id carries (a login transaction's request, a code's grant), opened with the test
 * env's secret by Keyway's own codec: what a holder of the secret, and only one, can read.
 */
export async function openSealed<T = Record<string, unknown>>(
  kind: "tx" | "verified-tx" | "code" | "par",
  value: string,
): Promise<T | null> {
  const purpose = ({ tx: "login-tx", "verified-tx": "login-done", code: "auth-code", par: "pushed-request" } as const)[
    kind
  ];
  const idKind = kind === "code" || kind === "par" ? kind : "tx";
  const opened = await openSealedId<T>(loadConfig(env), idKind, purpose, value);
  return opened?.state ?? null;
}

/** The id part of a sealed id (`<id>.<sealed>`), or the id itself. */
export const sealedIdPart = (value: string) => value.split(".")[0] as string;

/** The shard an issued id lives in. */
export function stubForId(store: Store, id: string): DurableObjectStub {
  const { gen, shard, region } = idParts(id);
  return shardStub(store, gen, shard, region);
}

/** Where a code is spent (issue 28): the RevocationStore shard its login's sid names. */
/**
 * How a login's code was spent, wherever its spend is kept: the refresh family its grant id is derived
 * from (issue 28, a grant with `offline_access`) or its spent-code row in the login's revocation shard.
 * `issued` is whether that spend issued tokens; null when the code is not spent.
 */
/** The RefreshTokenRotator shard of the family a login's code names (issue 28), spent or not. */
export async function codeFamilyShard(code: string): Promise<DurableObjectStub> {
  return stubForId("refresh", await codeGrant(code));
}

/** The grant id a login's code names (workers/shared/oauth/auth-code.ts `codeGrantId`). */
async function codeGrant(code: string): Promise<string> {
  const { grant } = (await openSealed<{ grant: { sid: string } }>("code", code)) as { grant: { sid: string } };
  const config = loadConfig(env as never);
  const region = parseId(config, "sid", grant.sid)?.ref.place.region ?? config.REGIONS.default;
  return (await codeGrantId(config, await sha256(sealedIdPart(code)), region)).id;
}

export async function codeSpend(
  code: string,
): Promise<{ by: "family" | "spent_codes"; issued: boolean; shard: DurableObjectStub } | null> {
  const { grant } = (await openSealed<{ grant: { scope: string } }>("code", code)) as { grant: { scope: string } };
  if (grant.scope.split(" ").includes("offline_access")) {
    const id = await codeGrant(code);
    const shard = stubForId("refresh", id);
    const [family] = await sql<{ revoked: number }>(
      shard,
      "SELECT revoked FROM families WHERE family_hash = ?",
      await sha256(id),
    );
    return family ? { by: "family", issued: family.revoked === 0, shard } : null;
  }
  const shard = await spentCodeShard(code);
  const [row] = await sql<{ grant_id: string | null }>(
    shard,
    "SELECT grant_id FROM spent_codes WHERE code_hash = ?",
    await sha256(sealedIdPart(code)),
  );
  return row ? { by: "spent_codes", issued: row.grant_id !== null, shard } : null;
}

export async function spentCodeShard(code: string): Promise<DurableObjectStub> {
  const { grant } = (await openSealed<{ grant: { sid: string } }>("code", code)) as { grant: { sid: string } };
  return stubForId("revocation", grant.sid);
}

/**
 * A shard's SQL, through the store's own handle: a store makes its schema when first used (an object
 * woken only for `stats()` creates nothing), so a query of a shard nothing has touched yet still finds
 * its (empty) tables.
 */
const storeSql = (instance: unknown, state: DurableObjectState): SqlStorage =>
  (instance as { sql?: SqlStorage }).sql ?? state.storage.sql;

/**
 * A SELECT reads a table kept in expiry buckets (durable-objects/expiry-buckets.ts) or in an audit
 * outbox's generations (audit-outbox.ts) as what it holds: the table and every bucket or generation of
 * it, so assertions on stored state see every row wherever it went.
 */
function withBuckets(q: SqlStorage, query: string): string {
  if (!/^\s*SELECT\b/i.test(query)) return query;
  const buckets = new Map<string, string[]>();
  for (const { name } of q
    .exec<{ name: string }>(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND (name GLOB '*__e[0-9]*' OR name GLOB '*__g[0-9]*')",
    )
    .toArray()) {
    const base = name.replace(/__[eg]\d+$/, "");
    buckets.set(base, [...(buckets.get(base) ?? []), name]);
  }
  return query.replace(/\bFROM (\w+)\b/gi, (whole, base: string) => {
    const list = buckets.get(base);
    if (!list) return whole;
    return `FROM (${[base, ...list].map((t) => `SELECT * FROM ${t}`).join(" UNION ALL ")}) AS ${base}`;
  });
}

/** Runs a query against a shard's SQLite storage (read-only inspection of stored state). */
export function sql<T = Record<string, unknown>>(
  stub: DurableObjectStub,
  query: string,
  ...params: unknown[]
): Promise<T[]> {
  return runInDurableObject(stub, (instance, state) => {
    const q = storeSql(instance, state);
    return q.exec(withBuckets(q, query), ...params).toArray() as T[];
  });
}

/** Every row of every Keyway table in a shard, as JSON text (for "no plaintext" checks). */
export async function dumpShard(stub: DurableObjectStub): Promise<string> {
  return runInDurableObject(stub, (instance, state) => {
    const tables = storeSql(instance, state)
      .exec<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf_%' AND name NOT LIKE 'sqlite_%'",
      )
      .toArray();
    const out: Record<string, unknown[]> = {};
    for (const { name } of tables) out[name] = state.storage.sql.exec(`SELECT * FROM "${name}"`).toArray();
    return JSON.stringify(out);
  });
}

/** The Set-Cookie line for a cookie name, parsed into its value and attributes. */
export function setCookieOf(res: Response, name: string): { value: string; attrs: string[]; raw: string } | null {
  for (const raw of res.headers.getSetCookie()) {
    const [pair, ...attrs] = raw.split(";").map((s) => s.trim());
    const eq = (pair as string).indexOf("=");
    if ((pair as string).slice(0, eq) === name) return { value: (pair as string).slice(eq + 1), attrs, raw };
  }
  return null;
}

/**
 * Runs a store's alarm now, as `runDurableObjectAlarm` does, and returns once no run is under way.
 * With the clock pinned, an alarm set for the pinned "now" is in the real past, so workerd also fires
 * it on its own: `runDurableObjectAlarm` then finds none scheduled and returns while that run is still
 * flushing or delivering. Waiting for it (`ShardStore.alarmIdle`) makes the outcome the same either way.
 */
export async function runAlarmSettled(stub: DurableObjectStub): Promise<void> {
  const idle = () =>
    runInDurableObject(stub, (instance: unknown) => (instance as { alarmIdle(): Promise<void> }).alarmIdle());
  await idle();
  await runDurableObjectAlarm(stub);
  await idle();
}

/**
 * Pins `Date` (in the tests, the Workers and the Durable Objects: they share this isolate) at `ms`;
 * returns a setter for `ms + offset`. Pair with `vi.useRealTimers()` in `afterEach`.
 */
export function pinClock(ms = Date.now()): (offset: number) => void {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(ms);
  return (offset: number) => vi.setSystemTime(ms + offset);
}

/**
 * A response's headers as two answers that must not differ are compared: without the ones that
 * differ on every response by design (the request's id, the date, a fresh cookie).
 */
export function comparableHeaders(res: Response): [string, string][] {
  return [...res.headers].filter(([k]) => !["set-cookie", "date", "x-request-id"].includes(k)).sort();
}

/**
 * The audit trail in D1 as one table, for assertions: the months' tables and the table from before
 * them (durable-objects/contract/audit-trail.ts). Use as `SELECT ... FROM ${await auditEvents()} WHERE ...`.
 */
export async function auditEvents(db: D1Database = env.DB): Promise<string> {
  const cols = "id, at, kind, user_id, email_key, client_id, ip, detail, tenant";
  const months = await auditMonths(db);
  // Issue 44: a row's `more` events are events too.
  const more = (m: string) =>
    ` UNION ALL SELECT ${cols
      .split(", ")
      .map((c) =>
        c === "tenant"
          ? "a.tenant"
          : ["user_id", "email_key", "client_id", "ip"].includes(c)
            ? // Stored only where it differs from the row's anchor (audit-trail.ts `storedMore`).
              `CASE WHEN json_type(x.value, '$.${c}') IS NULL THEN a.${c} ELSE json_extract(x.value, '$.${c}') END`
            : `json_extract(x.value, '$.${c}')`,
      )
      .join(", ")} FROM ${eventsTable(m)} a, json_each(COALESCE(a.more, '[]')) x`;
  return `(SELECT ${cols} FROM audit_events${months.map((m) => ` UNION ALL SELECT ${cols} FROM ${eventsTable(m)}${more(m)}`).join("")}) AS audit_events`;
}
