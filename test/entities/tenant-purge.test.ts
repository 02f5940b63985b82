import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { createTenant } from "../tenants/support";
import { addMember, createOrganization, createUser, entityStub, homeOf, scoped } from "./support";

describe("deleting a tenant (issue 24)", () => {
  it("purges its entities, grants and entity types from every shard and from D1", async () => {
    const tenant = await createTenant();
    const org = await createOrganization("Doomed", {}, tenant.id);
    const user = await createUser(undefined, tenant.id);
    await addMember(org.id, user.id, ["admin"], tenant.id);
    expect((await scoped(tenant.id)("/entity-types", { method: "POST", json: { name: "site" } })).status).toBe(201);
    const count = () =>
      runInDurableObject(entityStub(homeOf(org.id)), (_o, state) => ({
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
