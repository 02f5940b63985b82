import { env } from "cloudflare:test";
import { expect } from "vitest";
import type { EntitySqlRow } from "../../durable-objects/entity-store";
import { loadConfig } from "../../workers/shared/config/config";
import { allShards, objectName } from "../../workers/shared/routing/shard-refs";
import { admin, type TestEnv, uniqueEmail } from "../support/harness";

/** An entity's row as its shard stores it. */
export type StoredEntity = EntitySqlRow;

/** A fresh entity type name (lowercase letter first, as the model requires). */
export const typeName = () => `t${Math.random().toString(36).slice(2, 8)}${Date.now().toString(36).slice(-3)}`;
export const unique = (tag: string) => `${tag}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

/** The EntityStore object an address (`entity:g0:s5`) names. */
export const entityStub = (address: string) => env.ENTITIES.get(env.ENTITIES.idFromName(address)) as DurableObjectStub;

/** Every EntityStore shard of the test config, by address. */
export const everyShard = () => allShards(loadConfig(env), "entity").map(objectName);

/** The address of the shard an entity id names: `ent_[<tenant>~]<region>_<gen36>_<shard36>_<secret>`, parsed here. */
export function homeOf(id: string): string {
  const m = /^ent_(?:[a-z0-9-]{2,40}~)?([a-z][a-z0-9]{1,7})_([0-9a-z]{1,2})_([0-9a-z]{1,3})_[A-Za-z0-9_-]{44}$/.exec(
    id,
  );
  if (!m) throw new Error(`not an entity id: ${id}`);
  const region = m[1] === "global" ? "" : `${m[1]}:`;
  return `entity:${region}g${Number.parseInt(m[2] as string, 36)}:s${Number.parseInt(m[3] as string, 36)}`;
}

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
