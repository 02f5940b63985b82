import { env } from "cloudflare:test";
import { expect } from "vitest";
import {
  admin,
  Browser,
  basicAuth,
  call,
  fullLogin,
  latestCode,
  registerClient,
  type TestClient,
  type TestEnv,
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
export const at = (tenant: string, path: string) => `${baseOf(tenant)}${path}`;

/** The path a tenant's endpoints are under; "" for the default tenant's, the origin's own. */
export const baseOf = (tenant: string) => (tenant === "default" ? "" : `/t/${tenant}`);

export const tenantCode = (tenant: string, email: string, testEnv: object = env) =>
  latestCode(email, testEnv, baseOf(tenant));

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
export const tenantFullLogin = (tenant: string, client: TestClient, email = uniqueEmail(), testEnv?: TestEnv) =>
  fullLogin(client, email, { browser: new Browser({ base: baseOf(tenant), ...(testEnv ? { env: testEnv } : {}) }) });
