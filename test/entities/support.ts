import { env } from "cloudflare:test";
import { expect } from "vitest";
import { admin, type TestEnv, uniqueEmail } from "../support/harness";

/** Admin calls at the origin's tenant (`default`) or under `/tenants/<id>` for another. */
export function scoped(tenant?: string) {
  return (path: string, init: RequestInit & { json?: unknown } = {}, testEnv: object = env) =>
    admin(`${tenant ? `/tenants/${tenant}` : ""}${path}`, init, testEnv);
}

export async function createOrganization(
  name: string,
  extra: Record<string, unknown> = {},
  tenant?: string,
  testEnv: TestEnv = env,
): Promise<{ id: string; name: string; attributes: Record<string, unknown> }> {
  const res = await scoped(tenant)("/organizations", { method: "POST", json: { name, ...extra } }, testEnv);
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as never;
}

export async function createUser(email = uniqueEmail("member"), tenant?: string, testEnv: TestEnv = env) {
  const res = await scoped(tenant)("/users", { method: "POST", json: { email } }, testEnv);
  expect(res.status, await res.clone().text()).toBe(201);
  return { ...((await res.json()) as { id: string }), email };
}

export async function addMember(org: string, userId: string, roles: string[], tenant?: string, testEnv: TestEnv = env) {
  const res = await scoped(tenant)(
    `/organizations/${org}/members`,
    { method: "POST", json: { user_id: userId, roles } },
    testEnv,
  );
  expect([200, 201], await res.clone().text()).toContain(res.status);
  return res;
}

export async function ndjson(
  kind: "users" | "entities" | "grants",
  records: (Record<string, unknown> | string)[],
  tenant?: string,
  testEnv: TestEnv = env,
) {
  const body = `${records.map((r) => (typeof r === "string" ? r : JSON.stringify(r))).join("\n")}\n`;
  return scoped(tenant)(
    `/imports/${kind}`,
    { method: "POST", headers: { "Content-Type": "application/x-ndjson" }, body },
    testEnv,
  );
}
