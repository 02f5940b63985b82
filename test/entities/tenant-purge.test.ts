import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { createTenant } from "../tenants/support";
import { addMember, createOrganization, createUser, scoped } from "./support";

/** The EntityStore shard an entity id names (`ent_<tenant>~<region>_<gen36>_<shard36>_...`). */
function shardOf(id: string): DurableObjectStub {
  const m = /^ent_(?:[a-z0-9-]{2,40}~)?[a-z][a-z0-9]{1,7}_([0-9a-z]{1,2})_([0-9a-z]{1,3})_/.exec(id);
  if (!m) throw new Error(`not an entity id: ${id}`);
  const name = `entity:g${Number.parseInt(m[1] as string, 36)}:s${Number.parseInt(m[2] as string, 36)}`;
  return env.ENTITIES.get(env.ENTITIES.idFromName(name));
}

describe("deleting a tenant (issue 24)", () => {
  it("purges its entities, grants and entity types from every shard and from D1", async () => {
    const tenant = await createTenant();
    const org = await createOrganization("Doomed", {}, tenant.id);
    const user = await createUser(undefined, tenant.id);
    await addMember(org.id, user.id, ["admin"], tenant.id);
    expect((await scoped(tenant.id)("/entity-types", { method: "POST", json: { name: "site" } })).status).toBe(201);
    const count = () =>
      runInDurableObject(shardOf(org.id), (_o, state) => ({
        entities: state.storage.sql
          .exec<{ n: number }>("SELECT COUNT(*) AS n FROM entities WHERE tenant = ?", tenant.id)
          .one().n,
        grantees: state.storage.sql
          .exec<{ n: number }>("SELECT COUNT(*) AS n FROM grantees WHERE target = ?", org.id)
          .one().n,
      }));
    expect(await count()).toEqual({ entities: 1, grantees: 1 });

    expect((await scoped()(`/tenants/${tenant.id}`, { method: "DELETE" })).status).toBe(204);
    expect(await count()).toEqual({ entities: 0, grantees: 0 });
    const types = await env.DB.prepare("SELECT COUNT(*) AS n FROM entity_types WHERE tenant = ?")
      .bind(tenant.id)
      .first<{ n: number }>();
    expect(types?.n).toBe(0);
  });
});
