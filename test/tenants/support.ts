import { env } from "cloudflare:test";
import { expect } from "vitest";
import {
  admin,
  authorizeQuery,
  Browser,
  basicAuth,
  call,
  pkce,
  registerClient,
  type TestClient,
  type TestEnv,
  type Tokens,
  uniqueEmail,
} from "../support/harness";

/** Tenants for the tests: each test file makes its own, with ids no other run shares. */
let counter = 0;
export const uniqueTenantId = (tag = "t") =>
  `${tag}-${Date.now().toString(36)}-${++counter}-${Math.random().toString(36).slice(2, 6)}`;

export async function createTenant(
  body: Record<string, unknown> = {},
  testEnv: object = env,
): Promise<{ id: string; issuer: string; name: string; [k: string]: unknown }> {
  const id = (body.id as string | undefined) ?? uniqueTenantId();
  const res = await admin("/tenants", { method: "POST", json: { id, name: `Tenant ${id}`, ...body } }, testEnv);
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as never;
}

/** An admin call to a tenant's scoped routes: `/admin/v1/tenants/<tenant><path>`. */
export const tenantAdmin = (
  tenant: string,
  path: string,
  init: RequestInit & { json?: unknown } = {},
  testEnv: object = env,
) => admin(`/tenants/${tenant}${path}`, init, testEnv);

export const registerTenantClient = (tenant: string, overrides: Record<string, unknown> = {}, testEnv: object = env) =>
  registerClient(overrides, testEnv, tenant);

/** The path of an endpoint of a tenant: `/t/<tenant>/token`; the origin's own for `default`. */
export const at = (tenant: string, path: string) => (tenant === "default" ? path : `/t/${tenant}${path}`);

export async function tenantCode(tenant: string, email: string, testEnv: object = env): Promise<string> {
  const res = await call(at(tenant, `/__dev/mailbox/${encodeURIComponent(email)}`), {}, testEnv);
  expect(res.status).toBe(200);
  const { messages } = (await res.json()) as { messages: { code: string }[] };
  expect(messages.length).toBeGreaterThan(0);
  return (messages[0] as { code: string }).code;
}

export interface TenantLogin {
  browser: Browser;
  tx: string;
  redirectTo: string;
  code: string;
  verifier: string;
}

/** Steps 1-4 of CONTRACT §2 at a tenant's endpoints: an authorization code. */
export async function tenantLoginForCode(
  tenant: string,
  client: TestClient,
  email = uniqueEmail(),
  opts: { browser?: Browser; env?: TestEnv } = {},
): Promise<TenantLogin> {
  const browser = opts.browser ?? new Browser(opts.env ? { env: opts.env } : {});
  const { verifier, challenge } = await pkce();
  const init = await browser.fetch(at(tenant, `/authorize?${authorizeQuery(client, challenge)}`), {
    headers: { Accept: "application/json" },
  });
  expect(init.status, await init.clone().text()).toBe(200);
  const { tx } = (await init.json()) as { tx: string };
  const gen = await browser.postJson(at(tenant, "/email-code/generate"), { tx, email });
  expect(gen.status, await gen.clone().text()).toBe(200);
  const code = await tenantCode(tenant, email, browser.env);
  const ver = await browser.postJson(at(tenant, "/email-code/verify"), { tx, email, code });
  expect(ver.status, await ver.clone().text()).toBe(200);
  const { redirect_to } = (await ver.json()) as { redirect_to: string };
  const fin = await browser.fetch(redirect_to);
  expect(fin.status, await fin.clone().text()).toBe(302);
  const location = new URL(fin.headers.get("location") as string);
  return {
    browser,
    tx,
    redirectTo: redirect_to,
    code: location.searchParams.get("code") as string,
    verifier,
  };
}

export function tenantToken(
  tenant: string,
  client: TestClient,
  params: Record<string, string>,
  path = "/token",
  testEnv: object = env,
) {
  return call(
    at(tenant, path),
    {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Authorization: basicAuth(client) },
      body: new URLSearchParams(params),
    },
    testEnv,
  );
}

/** The whole login at a tenant: tokens. */
export async function tenantFullLogin(tenant: string, client: TestClient, email = uniqueEmail(), testEnv?: TestEnv) {
  const login = await tenantLoginForCode(tenant, client, email, testEnv ? { env: testEnv } : {});
  const res = await tenantToken(
    tenant,
    client,
    {
      grant_type: "authorization_code",
      code: login.code,
      redirect_uri: client.redirect_uris[0] as string,
      code_verifier: login.verifier,
    },
    "/token",
    testEnv,
  );
  expect(res.status, await res.clone().text()).toBe(200);
  return { ...login, email, tokens: (await res.json()) as Tokens };
}
