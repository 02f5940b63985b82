import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { admin, sql, uniqueEmail } from "../support/harness";
import { createTenant } from "../tenants/support";
import {
  addMember,
  createOrganization,
  createUser,
  entityStub,
  everyShard,
  homeOf,
  type StoredEntity,
  scoped,
  typeName,
  unique,
} from "./support";

/**
 * Issue 24: the admin API of entity types, entities, grants and organizations, each answer checked
 * against what the EntityStore shards (and D1) then hold.
 */

interface Entity {
  id: string;
  type: string;
  name: string;
  external_id: string | null;
  attributes: Record<string, unknown>;
  created_at: number;
  updated_at: number;
}

async function storedEntity(id: string): Promise<StoredEntity | undefined> {
  return (await sql<StoredEntity>(entityStub(homeOf(id)), "SELECT * FROM entities WHERE id = ?", id))[0];
}

/** Rows matching a query on every shard, with the shard they were found on. */
async function everywhere<T>(query: string, ...params: unknown[]): Promise<(T & { shard: string })[]> {
  const pages = await Promise.all(
    everyShard().map(async (address) =>
      (await sql<T>(entityStub(address), query, ...params)).map((r) => ({ ...r, shard: address })),
    ),
  );
  return pages.flat();
}

/** The EntityStore shard holding a user's grants (D1 `users.entity_shard`). */
async function userShard(userId: string): Promise<string | null> {
  const row = await env.DB.prepare("SELECT entity_shard FROM users WHERE id = ?")
    .bind(userId)
    .first<{ entity_shard: string | null }>();
  return row?.entity_shard ?? null;
}

async function createType(name: string, roles: Record<string, { permissions: string[] }> = {}, tenant?: string) {
  const res = await scoped(tenant)("/entity-types", { method: "POST", json: { name, roles } });
  expect(res.status, await res.clone().text()).toBe(201);
  return res.json();
}

async function createEntity(body: Record<string, unknown>, tenant?: string): Promise<Entity> {
  const res = await scoped(tenant)("/entities", { method: "POST", json: body });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as Entity;
}

async function grant(body: Record<string, unknown>, tenant?: string) {
  return scoped(tenant)("/grants", { method: "POST", json: body });
}

async function errorOf(res: Response): Promise<{ error: string; error_description?: string }> {
  return (await res.json()) as never;
}

/** Every page of a listing, following `next` (the pages' sizes too). */
async function listAll(query: string, tenant?: string): Promise<{ entities: Entity[]; pages: number[] }> {
  const entities: Entity[] = [];
  const pages: number[] = [];
  let cursor: string | null = null;
  do {
    const sep = query.includes("?") ? "&" : "?";
    const res = await scoped(tenant)(`${query}${cursor ? `${sep}cursor=${encodeURIComponent(cursor)}` : ""}`);
    expect(res.status, await res.clone().text()).toBe(200);
    const page = (await res.json()) as { entities: Entity[]; next: string | null };
    entities.push(...page.entities);
    pages.push(page.entities.length);
    cursor = page.next;
    expect(pages.length).toBeLessThan(100);
  } while (cursor);
  return { entities, pages };
}

describe("entity types", () => {
  it("creates a type with its role template; the same name again is 409; it is read and listed", async () => {
    const name = typeName();
    const created = await createType(name, { editor: { permissions: ["doc:write", "doc:read"] } });
    expect(created).toMatchObject({
      name,
      builtin: false,
      description: null,
      roles: { editor: { permissions: ["doc:write", "doc:read"] } },
    });

    const again = await scoped()("/entity-types", { method: "POST", json: { name, roles: {} } });
    expect(again.status).toBe(409);
    expect((await errorOf(again)).error).toBe("conflict");
    // The first one's template is still the stored one.
    const row = await env.DB.prepare("SELECT roles FROM entity_types WHERE tenant = 'default' AND name = ?")
      .bind(name)
      .first<{ roles: string }>();
    expect(JSON.parse(row?.roles as string)).toEqual({ editor: { permissions: ["doc:write", "doc:read"] } });

    const read = await scoped()(`/entity-types/${name}`);
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ name, roles: { editor: { permissions: ["doc:write", "doc:read"] } } });
    const list = (await (await scoped()("/entity-types")).json()) as { entity_types: { name: string }[] };
    expect(list.entity_types.map((t) => t.name)).toContain(name);
    expect((await scoped()(`/entity-types/${typeName()}`)).status).toBe(404);
  });

  it("refuses a malformed type name or template", async () => {
    for (const body of [
      { name: "Upper" },
      { name: "1digit" },
      { name: `a${"b".repeat(40)}` },
      { name: typeName(), roles: { editor: { permissions: ["has space"] } } },
      { name: typeName(), roles: { editor: ["doc:read"] } },
      { name: typeName(), extra: true },
    ]) {
      const res = await scoped()("/entity-types", { method: "POST", json: body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect((await errorOf(res)).error).toBe("invalid_request");
    }
  });

  it("organization is built in: listed without a row, not created again, not deleted", async () => {
    const tenant = await createTenant();
    const t = scoped(tenant.id);
    const list = (await (await t("/entity-types")).json()) as { entity_types: { name: string; builtin: boolean }[] };
    // A new tenant has only the built-in type, and no other tenant's.
    expect(list.entity_types).toEqual([expect.objectContaining({ name: "organization", builtin: true, roles: {} })]);
    const create = await t("/entity-types", { method: "POST", json: { name: "organization" } });
    expect(create.status).toBe(409);
    const del = await t("/entity-types/organization", { method: "DELETE" });
    expect(del.status).toBe(409);
    expect((await t("/entity-types/organization")).status).toBe(200);
    const rows = await env.DB.prepare("SELECT name FROM entity_types WHERE tenant = ?").bind(tenant.id).all();
    expect(rows.results).toEqual([]);
  });

  it("PATCH sets a template (organization's too); grants written after it follow it", async () => {
    const tenant = await createTenant();
    const t = scoped(tenant.id);
    const patched = await t("/entity-types/organization", {
      method: "PATCH",
      json: { description: "Customers", roles: { owner: { permissions: ["org:manage", "org:read"] } } },
    });
    expect(patched.status, await patched.clone().text()).toBe(200);
    expect(await patched.json()).toMatchObject({
      name: "organization",
      builtin: true,
      description: "Customers",
      roles: { owner: { permissions: ["org:manage", "org:read"] } },
    });
    const row = await env.DB.prepare("SELECT description, roles FROM entity_types WHERE tenant = ? AND name = ?")
      .bind(tenant.id, "organization")
      .first<{ description: string; roles: string }>();
    expect(row?.description).toBe("Customers");
    expect(JSON.parse(row?.roles as string)).toEqual({ owner: { permissions: ["org:manage", "org:read"] } });

    const org = await createOrganization("Templated", {}, tenant.id);
    const user = await createUser(uniqueEmail("tpl"), tenant.id);
    const refused = await t(`/organizations/${org.id}/members`, {
      method: "POST",
      json: { user_id: user.id, roles: ["guest"] },
    });
    expect(refused.status).toBe(400);
    expect((await errorOf(refused)).error_description).toContain("guest");
    await addMember(org.id, user.id, ["owner"], tenant.id);
    const members = (await (await t(`/organizations/${org.id}/members`)).json()) as { members: unknown[] };
    expect(members.members).toEqual([{ user_id: user.id, roles: ["owner"], permissions: ["org:manage", "org:read"] }]);

    // A PATCH of the description alone keeps the template.
    const name = typeName();
    await createType(name, { viewer: { permissions: ["x:read"] } });
    const desc = await scoped()(`/entity-types/${name}`, { method: "PATCH", json: { description: "d" } });
    expect(await desc.json()).toMatchObject({ description: "d", roles: { viewer: { permissions: ["x:read"] } } });
    expect(
      (await scoped()(`/entity-types/${typeName()}`, { method: "PATCH", json: { description: "d" } })).status,
    ).toBe(404);
  });

  it("a type is deleted only once no entity has it", async () => {
    const name = typeName();
    await createType(name);
    const entity = await createEntity({ type: name, name: "Only one" });
    const refused = await scoped()(`/entity-types/${name}`, { method: "DELETE" });
    expect(refused.status).toBe(409);
    expect((await errorOf(refused)).error).toBe("conflict");
    expect((await scoped()(`/entity-types/${name}`)).status).toBe(200);

    expect((await scoped()(`/entities/${entity.id}`, { method: "DELETE" })).status).toBe(204);
    expect((await scoped()(`/entity-types/${name}`, { method: "DELETE" })).status).toBe(204);
    expect((await scoped()(`/entity-types/${name}`)).status).toBe(404);
    const row = await env.DB.prepare("SELECT name FROM entity_types WHERE tenant = 'default' AND name = ?")
      .bind(name)
      .first();
    expect(row).toBeNull();
    expect((await scoped()(`/entity-types/${name}`, { method: "DELETE" })).status).toBe(404);
  });
});

describe("entities", () => {
  it("creates (201), reads, and PATCHes the name or the attributes as a whole", async () => {
    const type = typeName();
    await createType(type);
    const created = await createEntity({ type, name: "Widget", attributes: { color: "red", size: 3 } });
    expect(created).toEqual({
      id: expect.stringMatching(/^ent_global_/),
      type,
      name: "Widget",
      external_id: null,
      attributes: { color: "red", size: 3 },
      created_at: expect.any(Number),
      updated_at: created.created_at,
    });
    expect(await storedEntity(created.id)).toMatchObject({
      tenant: "default",
      type,
      name: "Widget",
      external_id: null,
      attributes: JSON.stringify({ color: "red", size: 3 }),
    });

    const read = await scoped()(`/entities/${created.id}`);
    expect(read.status).toBe(200);
    expect(await read.json()).toEqual(created);

    const renamed = await scoped()(`/entities/${created.id}`, { method: "PATCH", json: { name: "Gadget" } });
    expect(renamed.status, await renamed.clone().text()).toBe(200);
    expect(await renamed.json()).toMatchObject({
      id: created.id,
      name: "Gadget",
      attributes: { color: "red", size: 3 },
    });
    const replaced = await scoped()(`/entities/${created.id}`, {
      method: "PATCH",
      json: { attributes: { color: "blue" } },
    });
    expect(replaced.status).toBe(200);
    expect(await replaced.json()).toMatchObject({ name: "Gadget", attributes: { color: "blue" } });
    const stored = await storedEntity(created.id);
    expect(stored).toMatchObject({ name: "Gadget", attributes: JSON.stringify({ color: "blue" }), type });
    expect(stored?.created_at).toBe(created.created_at);

    // The type and the external id are fixed.
    for (const json of [{ type: "organization" }, { external_id: "x" }, { name: "" }]) {
      const res = await scoped()(`/entities/${created.id}`, { method: "PATCH", json });
      expect(res.status, JSON.stringify(json)).toBe(400);
    }
    expect((await storedEntity(created.id))?.name).toBe("Gadget");
  });

  it("upserts by external_id: the same id again, 200, one row; another type's external id is 409", async () => {
    const type = typeName();
    await createType(type);
    const ext = unique("ext");
    const first = await createEntity({ type, name: "First", external_id: ext, attributes: { n: 1 } });
    expect(first.external_id).toBe(ext);

    const same = await scoped()("/entities", {
      method: "POST",
      json: { type, name: "First", external_id: ext, attributes: { n: 1 } },
    });
    expect(same.status).toBe(200);
    expect(await same.json()).toEqual(first);

    const changed = await scoped()("/entities", {
      method: "POST",
      json: { type, name: "Second", external_id: ext, attributes: { n: 2 } },
    });
    expect(changed.status).toBe(200);
    const body = (await changed.json()) as Entity;
    expect(body).toMatchObject({ id: first.id, name: "Second", attributes: { n: 2 }, created_at: first.created_at });
    expect(body.updated_at).toBeGreaterThanOrEqual(first.updated_at);

    const other = typeName();
    await createType(other);
    const conflict = await scoped()("/entities", {
      method: "POST",
      json: { type: other, name: "X", external_id: ext },
    });
    expect(conflict.status).toBe(409);

    const rows = await everywhere<StoredEntity>("SELECT * FROM entities WHERE external_id = ?", ext);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: first.id, type, name: "Second", attributes: JSON.stringify({ n: 2 }) });
    expect(rows[0]?.shard).toBe(homeOf(first.id));
  });

  it("refuses attributes past the size cap, an unknown field and a bad or unknown type with 400, writing nothing", async () => {
    const type = typeName();
    await createType(type);
    const name = unique("refused");
    const big = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`a${i}`, "x".repeat(1_000)]));
    const cases: [Record<string, unknown>, string][] = [
      [{ type, name, attributes: big }, "4096"],
      [{ type, name, color: "red" }, "color"],
      [{ type: "Bad Type", name }, "type"],
      [{ type: typeName(), name }, "no entity type"],
      [{ type, name, attributes: { "bad name": 1 } }, "attribute"],
      [{ type, name, attributes: { deep: { deeper: { deepest: 1 } } } }, "attributes"],
      [{ type, name: "" }, "name"],
    ];
    for (const [json, hint] of cases) {
      const res = await scoped()("/entities", { method: "POST", json });
      expect(res.status, JSON.stringify(json).slice(0, 200)).toBe(400);
      const err = await errorOf(res);
      expect(err.error).toBe("invalid_request");
      expect(err.error_description).toContain(hint);
    }
    // Just under the cap is taken.
    const fits = Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`a${i}`, "x".repeat(1_000)]));
    await createEntity({ type, name: `${name}-fits`, attributes: fits });
    expect(await everywhere("SELECT id FROM entities WHERE name = ?", name)).toEqual([]);
    expect(await everywhere("SELECT id FROM entities WHERE name = ?", `${name}-fits`)).toHaveLength(1);
  });

  it("another tenant's entity id is 404 at this tenant's routes, and the reverse", async () => {
    const tenant = await createTenant();
    const t = scoped(tenant.id);
    const theirs = await createOrganization("Theirs", {}, tenant.id);
    const ours = await createOrganization("Ours");
    expect(theirs.id.startsWith(`ent_${tenant.id}~global_`)).toBe(true);
    expect(ours.id.startsWith("ent_global_")).toBe(true);
    expect((await storedEntity(theirs.id))?.tenant).toBe(tenant.id);

    expect((await t(`/entities/${theirs.id}`)).status).toBe(200);
    expect((await scoped()(`/entities/${theirs.id}`)).status).toBe(404);
    expect((await scoped()(`/organizations/${theirs.id}`)).status).toBe(404);
    expect((await t(`/entities/${ours.id}`)).status).toBe(404);
    expect((await t(`/organizations/${ours.id}`)).status).toBe(404);
    expect((await scoped()(`/entities/${theirs.id}`, { method: "PATCH", json: { name: "Taken" } })).status).toBe(404);
    expect((await scoped()(`/entities/${theirs.id}`, { method: "DELETE" })).status).toBe(404);
    const user = await createUser();
    expect((await grant({ user_id: user.id, target_id: theirs.id })).status).toBe(404);
    // Nothing of it changed.
    expect(await storedEntity(theirs.id)).toMatchObject({ name: "Theirs", tenant: tenant.id });
    expect(await sql(entityStub(homeOf(theirs.id)), "SELECT * FROM grantees WHERE target = ?", theirs.id)).toEqual([]);
    // A made-up id is 404 too.
    expect((await scoped()(`/entities/ent_global_0_0_${"A".repeat(44)}`)).status).toBe(404);
    expect((await scoped()("/entities/nope")).status).toBe(404);
  });

  it("DELETE removes it: 204, then 404", async () => {
    const type = typeName();
    await createType(type);
    const e = await createEntity({ type, name: "Short-lived" });
    expect((await scoped()(`/entities/${e.id}`, { method: "DELETE" })).status).toBe(204);
    expect(await storedEntity(e.id)).toBeUndefined();
    expect((await scoped()(`/entities/${e.id}`)).status).toBe(404);
    expect((await scoped()(`/entities/${e.id}`, { method: "DELETE" })).status).toBe(404);
  });
});

describe("listing and search", () => {
  it("lists a type's entities across shards with an opaque cursor: every one exactly once", async () => {
    const type = typeName();
    await createType(type);
    const created = await Promise.all(
      Array.from({ length: 30 }, (_, i) => createEntity({ type, name: `item ${i}`, attributes: { i } })),
    );
    const shardsUsed = new Set(created.map((e) => homeOf(e.id)));
    expect(shardsUsed.size).toBeGreaterThan(1);

    const { entities, pages } = await listAll(`/entities?type=${type}&limit=7`);
    expect(pages).toEqual([7, 7, 7, 7, 2]);
    const ids = entities.map((e) => e.id);
    expect(new Set(ids).size).toBe(30);
    expect([...ids].sort()).toEqual(created.map((e) => e.id).sort());
    expect(entities.every((e) => e.type === type)).toBe(true);
    // A shard at a time: the shards come in one order, each shard's entities in id order.
    const order = everyShard();
    const keys = entities.map((e) => [order.indexOf(homeOf(e.id)), e.id] as const);
    const sorted = [...keys].sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : 1));
    expect(keys).toEqual(sorted);
    // What the shards hold agrees.
    const stored = await everywhere<{ id: string }>(
      "SELECT id FROM entities WHERE tenant = 'default' AND type = ?",
      type,
    );
    expect(stored.map((r) => r.id).sort()).toEqual([...ids].sort());
    for (const r of stored) expect(r.shard).toBe(homeOf(r.id));
  });

  it("refuses a bad cursor, limit, or attribute without a value", async () => {
    for (const q of ["cursor=notacursor", "limit=0", "limit=201", "limit=x", "attribute=tier", "value=gold"]) {
      const res = await scoped()(`/entities?${q}`);
      expect(res.status, q).toBe(400);
      expect((await errorOf(res)).error).toBe("invalid_request");
    }
  });

  it("searches by attribute equality: a string, a number, a boolean", async () => {
    const type = typeName();
    await createType(type);
    const [e1, e2, e3, e4, e5, e6] = await Promise.all([
      createEntity({ type, name: "e1", attributes: { tier: "gold", seats: 10, active: true } }),
      createEntity({ type, name: "e2", attributes: { tier: "gold", seats: 5, active: false } }),
      createEntity({ type, name: "e3", attributes: { tier: "silver", seats: 10, active: true } }),
      createEntity({ type, name: "e4", attributes: { tier: "bronze", seats: 7.5, active: false } }),
      createEntity({ type, name: "e5", attributes: { tier: "10" } }),
      // A number 1 and a boolean true are not the same value (SQLite's json_extract gives 1 for both).
      createEntity({ type, name: "e6", attributes: { active: 1, seats: true, tier: "true" } }),
    ]);
    const search = async (attribute: string, value: string) =>
      (await listAll(`/entities?type=${type}&attribute=${attribute}&value=${encodeURIComponent(value)}`)).entities
        .map((e) => e.name)
        .sort();
    expect(await search("tier", "gold")).toEqual(["e1", "e2"]);
    expect(await search("tier", "silver")).toEqual(["e3"]);
    expect(await search("tier", "platinum")).toEqual([]);
    expect(await search("seats", "10")).toEqual(["e1", "e3"]);
    expect(await search("seats", "7.5")).toEqual(["e4"]);
    expect(await search("active", "true")).toEqual(["e1", "e3"]);
    expect(await search("active", "false")).toEqual(["e2", "e4"]);
    expect(await search("missing", "x")).toEqual([]);
    // A boolean matches booleans only, a number numbers only.
    expect(await search("active", "1")).toEqual(["e6"]);
    expect(await search("seats", "1")).toEqual([]);
    expect(await search("active", "0")).toEqual([]);
    // A search's page holds at most `limit` matches and every match comes once.
    const paged = await listAll(`/entities?type=${type}&attribute=tier&value=gold&limit=1`);
    expect(paged.entities.map((e) => e.id).sort()).toEqual([e1?.id, e2?.id].sort());
    expect(Math.max(...paged.pages)).toBe(1);
    expect([e3, e4, e5, e6].every(Boolean)).toBe(true);
  });
});

describe("grants", () => {
  it("resolves permissions from the target type's template and refuses a role it does not list", async () => {
    const type = typeName();
    await createType(type, {
      admin: { permissions: ["doc:read", "doc:write"] },
      viewer: { permissions: ["doc:read"] },
    });
    const target = await createEntity({ type, name: "Docs", external_id: unique("docs") });
    const user = await createUser();

    const refused = await grant({ user_id: user.id, target_id: target.id, roles: ["superuser"] });
    expect(refused.status).toBe(400);
    const err = await errorOf(refused);
    expect(err.error).toBe("invalid_request");
    expect(err.error_description).toContain("superuser");
    expect(await sql(entityStub(homeOf(target.id)), "SELECT * FROM grantees WHERE target = ?", target.id)).toEqual([]);

    const ok = await grant({
      user_id: user.id,
      target_id: target.id,
      roles: ["admin", "viewer"],
      permissions: ["x:y"],
    });
    expect(ok.status, await ok.clone().text()).toBe(201);
    expect(await ok.json()).toMatchObject({
      subject: user.id,
      subject_kind: "user",
      target: target.id,
      roles: ["admin", "viewer"],
      // What the grant gives, not only what was asked: the roles' permissions from the template too.
      permissions: ["doc:read", "doc:write", "x:y"],
    });

    const listed = (await (await scoped()(`/users/${user.id}/grants`)).json()) as { grants: Record<string, unknown>[] };
    expect(listed.grants).toEqual([
      expect.objectContaining({
        subject: user.id,
        target: target.id,
        target_type: type,
        target_name: "Docs",
        roles: ["admin", "viewer"],
        permissions: ["doc:read", "doc:write", "x:y"],
      }),
    ]);
    // Stored twice: on the user's shard (its grants) and on the target's (who holds it).
    const home = await userShard(user.id);
    expect(home).toMatch(/^entity:g0:s\d+$/);
    const rows = await sql<{ target: string; roles: string; permissions: string; target_name: string }>(
      entityStub(home as string),
      "SELECT target, roles, permissions, target_name FROM grants WHERE subject = ?",
      user.id,
    );
    expect(rows).toEqual([
      {
        target: target.id,
        roles: JSON.stringify(["admin", "viewer"]),
        permissions: JSON.stringify(["doc:read", "doc:write", "x:y"]),
        target_name: "Docs",
      },
    ]);
    const held = await sql<{ subject: string; subject_shard: string; permissions: string }>(
      entityStub(homeOf(target.id)),
      "SELECT subject, subject_shard, permissions FROM grantees WHERE target = ?",
      target.id,
    );
    expect(held).toEqual([
      { subject: user.id, subject_shard: home, permissions: JSON.stringify(["doc:read", "doc:write", "x:y"]) },
    ]);
    const grantees = (await (await scoped()(`/entities/${target.id}/grantees`)).json()) as { grantees: unknown[] };
    expect(grantees.grantees).toEqual([
      { subject: user.id, roles: ["admin", "viewer"], permissions: ["doc:read", "doc:write", "x:y"] },
    ]);

    // The same grant again is unchanged (200); by address and external id it names the same grant.
    const same = await grant({
      email: user.email,
      target_external_id: target.external_id,
      roles: ["admin", "viewer"],
      permissions: ["x:y"],
    });
    expect(same.status, await same.clone().text()).toBe(200);
    // Fewer roles replace the grant's (the status of such a change: its own test below).
    const fewer = await grant({ user_id: user.id, target_id: target.id, roles: ["viewer"] });
    expect(fewer.ok, await fewer.clone().text()).toBe(true);
    const after = await sql<{ permissions: string }>(
      entityStub(home as string),
      "SELECT permissions FROM grants WHERE subject = ?",
      user.id,
    );
    expect(after).toEqual([{ permissions: JSON.stringify(["doc:read"]) }]);

    // Removed: from both sides.
    expect((await scoped()(`/users/${user.id}/grants/${target.id}`, { method: "DELETE" })).status).toBe(204);
    expect(await sql(entityStub(home as string), "SELECT * FROM grants WHERE subject = ?", user.id)).toEqual([]);
    expect(await sql(entityStub(homeOf(target.id)), "SELECT * FROM grantees WHERE target = ?", target.id)).toEqual([]);
    expect((await scoped()(`/users/${user.id}/grants/${target.id}`, { method: "DELETE" })).status).toBe(404);
  });

  it("pages a user's grants and an organization's members with after", async () => {
    const type = typeName();
    await createType(type);
    const targets = await Promise.all([0, 1, 2].map((i) => createEntity({ type, name: `T${i}` })));
    const user = await createUser();
    for (const t of targets) expect((await grant({ user_id: user.id, target_id: t.id })).status).toBe(201);
    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const res = await scoped()(`/users/${user.id}/grants?limit=2${after ? `&after=${after}` : ""}`);
      expect(res.status).toBe(200);
      const page = (await res.json()) as { grants: { target: string }[]; next: string | null };
      seen.push(...page.grants.map((g) => g.target));
      after = page.next;
      pages++;
    } while (after && pages < 10);
    expect(seen).toEqual(targets.map((t) => t.id).sort());
    expect(pages).toBe(2);
    const typed = (await (await scoped()(`/users/${user.id}/grants?type=organization`)).json()) as {
      grants: unknown[];
    };
    expect(typed.grants).toEqual([]);

    const org = await createOrganization("Paged");
    const users = await Promise.all([0, 1, 2].map(() => createUser()));
    for (const u of users) await addMember(org.id, u.id, ["m"]);
    const first = (await (await scoped()(`/organizations/${org.id}/members?limit=2`)).json()) as {
      members: { user_id: string }[];
      next: string;
    };
    expect(first.members).toHaveLength(2);
    const rest = (await (await scoped()(`/organizations/${org.id}/members?limit=2&after=${first.next}`)).json()) as {
      members: { user_id: string }[];
      next: string | null;
    };
    expect([...first.members, ...rest.members].map((m) => m.user_id)).toEqual(users.map((u) => u.id).sort());
    expect(rest.next).toBeNull();
  });

  it("refuses a grant without exactly one subject and one target, to an unknown target, or to itself", async () => {
    const type = typeName();
    await createType(type);
    const a = await createEntity({ type, name: "A" });
    const user = await createUser();
    for (const body of [
      { target_id: a.id },
      { user_id: user.id, email: user.email, target_id: a.id },
      { user_id: user.id },
      { user_id: user.id, target_id: a.id, target_external_id: "x" },
      { user_id: user.id, target_id: a.id, roles: ["has space"] },
      { user_id: user.id, target_id: a.id, extra: 1 },
      { entity_id: a.id, target_id: a.id },
    ]) {
      const res = await grant(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    expect((await grant({ user_id: user.id, target_id: `ent_global_0_0_${"A".repeat(44)}` })).status).toBe(404);
    expect((await grant({ user_id: user.id, target_external_id: unique("none") })).status).toBe(404);
    expect((await grant({ user_id: "usr_nope", target_id: a.id })).status).toBe(404);
    expect((await grant({ email: uniqueEmail("nobody"), target_id: a.id })).status).toBe(404);
    expect(await sql(entityStub(homeOf(a.id)), "SELECT * FROM grantees WHERE target = ?", a.id)).toEqual([]);
  });

  it("an entity granted to an entity: listed as its grants and as the target's grantees; removed from both", async () => {
    const type = typeName();
    await createType(type, { member: { permissions: ["p:read"] } });
    const team = await createEntity({ type, name: "Team", external_id: unique("team") });
    const project = await createEntity({ type, name: "Project" });
    const res = await grant({ entity_external_id: team.external_id, target_id: project.id, roles: ["member"] });
    expect(res.status, await res.clone().text()).toBe(201);
    expect(await res.json()).toMatchObject({ subject: team.id, subject_kind: "entity", target: project.id });

    const grants = (await (await scoped()(`/entities/${team.id}/grants`)).json()) as { grants: unknown[] };
    expect(grants.grants).toEqual([
      expect.objectContaining({
        target: project.id,
        target_name: "Project",
        roles: ["member"],
        permissions: ["p:read"],
      }),
    ]);
    const grantees = (await (await scoped()(`/entities/${project.id}/grantees`)).json()) as { grantees: unknown[] };
    expect(grantees.grantees).toEqual([{ subject: team.id, roles: ["member"], permissions: ["p:read"] }]);
    expect(await sql(entityStub(homeOf(team.id)), "SELECT target FROM grants WHERE subject = ?", team.id)).toEqual([
      { target: project.id },
    ]);

    expect((await scoped()(`/entities/${team.id}/grants/${project.id}`, { method: "DELETE" })).status).toBe(204);
    expect((await (await scoped()(`/entities/${project.id}/grantees`)).json()) as unknown).toEqual({
      grantees: [],
      next: null,
    });
    expect(await sql(entityStub(homeOf(team.id)), "SELECT * FROM grants WHERE subject = ?", team.id)).toEqual([]);
    expect((await scoped()(`/entities/${team.id}/grants/${project.id}`, { method: "DELETE" })).status).toBe(404);
  });

  it("deleting an entity removes the grants it holds and the grants to it", async () => {
    const type = typeName();
    await createType(type);
    const middle = await createEntity({ type, name: "Middle" });
    const above = await createEntity({ type, name: "Above" });
    const user = await createUser();
    expect((await grant({ entity_id: middle.id, target_id: above.id, roles: ["r"] })).status).toBe(201);
    expect((await grant({ user_id: user.id, target_id: middle.id, roles: ["r"] })).status).toBe(201);
    expect((await grant({ user_id: user.id, target_id: above.id, roles: ["s"] })).status).toBe(201);

    expect((await scoped()(`/entities/${middle.id}`, { method: "DELETE" })).status).toBe(204);
    const home = (await userShard(user.id)) as string;
    expect(await sql(entityStub(home), "SELECT target FROM grants WHERE subject = ? ORDER BY target", user.id)).toEqual(
      [{ target: above.id }],
    );
    expect(await sql(entityStub(homeOf(above.id)), "SELECT subject FROM grantees WHERE target = ?", above.id)).toEqual([
      { subject: user.id },
    ]);
    expect(await everywhere("SELECT * FROM grantees WHERE target = ? OR subject = ?", middle.id, middle.id)).toEqual(
      [],
    );
    expect(await everywhere("SELECT * FROM grants WHERE target = ? OR subject = ?", middle.id, middle.id)).toEqual([]);
    const listed = (await (await scoped()(`/users/${user.id}/grants`)).json()) as { grants: { target: string }[] };
    expect(listed.grants.map((g) => g.target)).toEqual([above.id]);
  });
});

describe("organizations (CONTRACT §8)", () => {
  it("creates an organization (201 with id), adds members (201), lists members and a user's organizations", async () => {
    const tenant = await createTenant();
    const t = scoped(tenant.id);
    const res = await t("/organizations", { method: "POST", json: { name: "Acme", attributes: { plan: "pro" } } });
    expect(res.status, await res.clone().text()).toBe(201);
    const acme = (await res.json()) as Entity;
    expect(acme).toMatchObject({
      id: expect.any(String),
      type: "organization",
      name: "Acme",
      attributes: { plan: "pro" },
    });
    expect(await storedEntity(acme.id)).toMatchObject({ tenant: tenant.id, type: "organization", name: "Acme" });
    const globex = await createOrganization("Globex", {}, tenant.id);

    const user = await createUser(uniqueEmail("member"), tenant.id);
    const added = await t(`/organizations/${acme.id}/members`, {
      method: "POST",
      json: { user_id: user.id, roles: ["admin", "billing"] },
    });
    expect(added.status, await added.clone().text()).toBe(201);
    expect(await added.json()).toEqual({ organization_id: acme.id, user_id: user.id, roles: ["admin", "billing"] });
    // The same membership again changes nothing.
    const again = await t(`/organizations/${acme.id}/members`, {
      method: "POST",
      json: { user_id: user.id, roles: ["admin", "billing"] },
    });
    expect(again.status).toBe(200);
    await addMember(globex.id, user.id, ["viewer"], tenant.id);
    const other = await createUser(uniqueEmail("other"), tenant.id);
    await addMember(acme.id, other.id, [], tenant.id);

    const members = (await (await t(`/organizations/${acme.id}/members`)).json()) as {
      members: { user_id: string; roles: string[] }[];
    };
    expect(members.members.sort((a, b) => (a.user_id < b.user_id ? -1 : 1))).toEqual(
      [
        { user_id: user.id, roles: ["admin", "billing"], permissions: [] },
        { user_id: other.id, roles: [], permissions: [] },
      ].sort((a, b) => (a.user_id < b.user_id ? -1 : 1)),
    );
    const orgs = (await (await t(`/users/${user.id}/organizations`)).json()) as {
      organizations: { id: string; name: string; roles: string[] }[];
    };
    expect(orgs.organizations.sort((a, b) => (a.name < b.name ? -1 : 1))).toEqual([
      { id: acme.id, name: "Acme", roles: ["admin", "billing"], permissions: [] },
      { id: globex.id, name: "Globex", roles: ["viewer"], permissions: [] },
    ]);

    // This tenant's organizations, and only them.
    const listed = await listAll("/organizations", tenant.id);
    expect(listed.entities.map((o) => o.id).sort()).toEqual([acme.id, globex.id].sort());
    const pro = await listAll("/organizations?attribute=plan&value=pro", tenant.id);
    expect(pro.entities.map((o) => o.id)).toEqual([acme.id]);
    expect((await t(`/organizations/${acme.id}`)).status).toBe(200);

    // A renamed organization: its members' copies follow.
    const renamed = await t(`/organizations/${acme.id}`, { method: "PATCH", json: { name: "Acme Inc" } });
    expect(renamed.status).toBe(200);
    const home = (await userShard(user.id)) as string;
    expect(
      await sql(entityStub(home), "SELECT target_name FROM grants WHERE subject = ? AND target = ?", user.id, acme.id),
    ).toEqual([{ target_name: "Acme Inc" }]);

    // A member removed: 204, then no longer listed anywhere; again 404.
    expect((await t(`/organizations/${acme.id}/members/${user.id}`, { method: "DELETE" })).status).toBe(204);
    const left = (await (await t(`/users/${user.id}/organizations`)).json()) as { organizations: { id: string }[] };
    expect(left.organizations.map((o) => o.id)).toEqual([globex.id]);
    expect(await sql(entityStub(homeOf(acme.id)), "SELECT subject FROM grantees WHERE target = ?", acme.id)).toEqual([
      { subject: other.id },
    ]);
    expect((await t(`/organizations/${acme.id}/members/${user.id}`, { method: "DELETE" })).status).toBe(404);
  });

  it("a member given other roles, or a grant changed, is 200 (an update), not 201; unchanged is 200 too", async () => {
    // docs/organizations.md: POST /organizations/{org}/members is "201 (200 when it only changed the roles)".
    const org = await createOrganization("Roles change");
    const user = await createUser();
    const member = (roles: string[]) =>
      scoped()(`/organizations/${org.id}/members`, { method: "POST", json: { user_id: user.id, roles } });
    expect((await member(["admin"])).status).toBe(201);
    expect((await member(["admin"])).status).toBe(200);
    const changed = await member(["admin", "billing"]);
    expect(changed.status).toBe(200);
    const members = (await (await scoped()(`/organizations/${org.id}/members`)).json()) as { members: unknown[] };
    expect(members.members).toEqual([{ user_id: user.id, roles: ["admin", "billing"], permissions: [] }]);
    // POST /grants alike: a new grant 201, the same grant with other roles 200.
    const type = typeName();
    await createType(type);
    const target = await createEntity({ type, name: "Changed" });
    expect((await grant({ user_id: user.id, target_id: target.id, roles: ["a"] })).status).toBe(201);
    expect((await grant({ user_id: user.id, target_id: target.id, roles: ["b"] })).status).toBe(200);
  });

  it("an entity of another type is not an organization; an unknown user is not a member", async () => {
    const type = typeName();
    await createType(type);
    const e = await createEntity({ type, name: "Not an org" });
    expect((await scoped()(`/organizations/${e.id}`)).status).toBe(404);
    expect((await scoped()(`/organizations/${e.id}`, { method: "DELETE" })).status).toBe(404);
    expect(await storedEntity(e.id)).toBeDefined();
    const org = await createOrganization("Members only");
    const res = await scoped()(`/organizations/${org.id}/members`, {
      method: "POST",
      json: { user_id: "usr_nobody", roles: [] },
    });
    expect(res.status).toBe(404);
  });

  it("deleting an organization removes it from its members' organizations and from the stored grants", async () => {
    const doomed = await createOrganization("Doomed");
    const stays = await createOrganization("Stays");
    const alice = await createUser();
    const bob = await createUser();
    await addMember(doomed.id, alice.id, ["owner"]);
    await addMember(stays.id, alice.id, ["member"]);
    await addMember(doomed.id, bob.id, ["member"]);
    const aliceShard = (await userShard(alice.id)) as string;
    const bobShard = (await userShard(bob.id)) as string;
    expect(await sql(entityStub(bobShard), "SELECT target FROM grants WHERE subject = ?", bob.id)).toEqual([
      { target: doomed.id },
    ]);

    expect((await scoped()(`/organizations/${doomed.id}`, { method: "DELETE" })).status).toBe(204);
    expect((await scoped()(`/organizations/${doomed.id}`)).status).toBe(404);
    expect((await scoped()(`/organizations/${doomed.id}/members`)).status).toBe(404);
    const orgs = (await (await scoped()(`/users/${alice.id}/organizations`)).json()) as {
      organizations: { id: string }[];
    };
    expect(orgs.organizations.map((o) => o.id)).toEqual([stays.id]);
    const bobs = (await (await scoped()(`/users/${bob.id}/organizations`)).json()) as { organizations: unknown[] };
    expect(bobs.organizations).toEqual([]);

    expect(await storedEntity(doomed.id)).toBeUndefined();
    expect(await sql(entityStub(aliceShard), "SELECT target FROM grants WHERE subject = ?", alice.id)).toEqual([
      { target: stays.id },
    ]);
    expect(await sql(entityStub(bobShard), "SELECT * FROM grants WHERE subject = ?", bob.id)).toEqual([]);
    expect(await sql(entityStub(homeOf(doomed.id)), "SELECT * FROM grantees WHERE target = ?", doomed.id)).toEqual([]);
    expect(await everywhere("SELECT subject FROM grants WHERE target = ?", doomed.id)).toEqual([]);
    // Each member's claims version moved on (a new snapshot was compiled).
    const versions = await sql<{ version: number }>(
      entityStub(bobShard),
      "SELECT version FROM subjects WHERE subject = ?",
      bob.id,
    );
    expect(versions[0]?.version).toBe(2);
  });

  it("deleting a user removes its grants: the organization's grantees and members no longer list it", async () => {
    const org = await createOrganization("Outlives");
    const leaving = await createUser();
    const staying = await createUser();
    await addMember(org.id, leaving.id, ["admin"]);
    await addMember(org.id, staying.id, ["member"]);
    const leavingShard = (await userShard(leaving.id)) as string;
    expect(
      (await sql(entityStub(homeOf(org.id)), "SELECT subject FROM grantees WHERE target = ?", org.id)).length,
    ).toBe(2);

    expect((await scoped()(`/users/${leaving.id}`, { method: "DELETE" })).status).toBe(204);

    const grantees = (await (await scoped()(`/entities/${org.id}/grantees`)).json()) as {
      grantees: { subject: string }[];
    };
    expect(grantees.grantees).toEqual([{ subject: staying.id, roles: ["member"], permissions: [] }]);
    const members = (await (await scoped()(`/organizations/${org.id}/members`)).json()) as {
      members: { user_id: string }[];
    };
    expect(members.members.map((m) => m.user_id)).toEqual([staying.id]);
    expect(await sql(entityStub(homeOf(org.id)), "SELECT subject FROM grantees WHERE target = ?", org.id)).toEqual([
      { subject: staying.id },
    ]);
    expect(await sql(entityStub(leavingShard), "SELECT * FROM grants WHERE subject = ?", leaving.id)).toEqual([]);
    expect(await sql(entityStub(leavingShard), "SELECT * FROM subjects WHERE subject = ?", leaving.id)).toEqual([]);
    expect((await scoped()(`/users/${leaving.id}/organizations`)).status).toBe(404);
  });
});

describe("OpenAPI", () => {
  it("lists the entity, grant, organization and import paths, at the origin and under a tenant", async () => {
    const res = await admin("/openapi.json");
    expect(res.status).toBe(200);
    const doc = (await res.json()) as {
      paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: unknown }> } }>>;
    };
    const expected: Record<string, string[]> = {
      "/admin/v1/entity-types": ["get", "post"],
      "/admin/v1/entity-types/{type}": ["get", "patch", "delete"],
      "/admin/v1/entities": ["get", "post"],
      "/admin/v1/entities/{id}": ["get", "patch", "delete"],
      "/admin/v1/entities/{id}/grants": ["get"],
      "/admin/v1/entities/{id}/grants/{entity}": ["delete"],
      "/admin/v1/entities/{id}/grantees": ["get"],
      "/admin/v1/grants": ["post"],
      "/admin/v1/organizations": ["get", "post"],
      "/admin/v1/organizations/{org}": ["get", "patch", "delete"],
      "/admin/v1/organizations/{org}/members": ["get", "post"],
      "/admin/v1/organizations/{org}/members/{user}": ["delete"],
      "/admin/v1/users/{id}/organizations": ["get"],
      "/admin/v1/users/{id}/grants": ["get"],
      "/admin/v1/users/{id}/grants/{entity}": ["delete"],
      "/admin/v1/imports/{kind}": ["post"],
      "/admin/v1/imports": ["get"],
      "/admin/v1/imports/{id}": ["get"],
    };
    for (const [path, methods] of Object.entries(expected)) {
      expect(Object.keys(doc.paths[path] ?? {}).sort(), path).toEqual([...methods].sort());
      const scopedPath = path.replace("/admin/v1", "/admin/v1/tenants/{tenant}");
      expect(Object.keys(doc.paths[scopedPath] ?? {}).sort(), scopedPath).toEqual([...methods].sort());
    }
    const schema = JSON.stringify(doc.paths["/admin/v1/entities"]?.post?.requestBody?.content["application/json"]);
    for (const field of ["type", "name", "external_id", "attributes"]) expect(schema).toContain(`"${field}"`);
    const grantSchema = JSON.stringify(doc.paths["/admin/v1/grants"]?.post?.requestBody?.content["application/json"]);
    for (const field of ["user_id", "email", "entity_id", "entity_external_id", "target_id", "target_external_id"])
      expect(grantSchema).toContain(`"${field}"`);
  });
});
