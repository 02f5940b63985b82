import {
  createExecutionContext,
  createScheduledController,
  env,
  runInDurableObject,
  waitOnExecutionContext,
} from "cloudflare:test";
import { describe, expect, it } from "vitest";
import mgmt from "../../workers/op-mgmt/src/index";
import { admin } from "../support/harness";
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

/** What a tenant still has in D1, table by table. */
async function leftIn(tenant: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const table of ["users", "clients", "signing_keys", "admin_keys", "webhook_endpoints", "entity_types"]) {
    const row = await env.DB.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE tenant = ?`)
      .bind(tenant)
      .first<{ n: number }>();
    out[table] = row?.n ?? 0;
  }
  return out;
}

/** A tenant with a user, a client, an admin key, an entity type and a webhook endpoint (its sealed secret). */
async function populatedTenant() {
  const tenant = await createTenant();
  await createUser(undefined, tenant.id);
  expect(
    (
      await scoped(tenant.id)("/clients", {
        method: "POST",
        json: {
          client_name: "doomed",
          redirect_uris: ["https://rp.example.com/cb"],
          token_endpoint_auth_method: "none",
        },
      })
    ).status,
  ).toBe(201);
  expect((await scoped(tenant.id)("/entity-types", { method: "POST", json: { name: "site" } })).status).toBe(201);
  expect(
    (
      await scoped(tenant.id)("/webhooks", {
        method: "POST",
        json: { url: "https://hooks.example.com/x", events: ["*"] },
      })
    ).status,
  ).toBe(201);
  expect((await admin(`/tenants/${tenant.id}/admin-keys`, { method: "POST", json: { name: "k" } })).status).toBe(201);
  const before = await leftIn(tenant.id);
  for (const [table, n] of Object.entries(before)) expect(n, table).toBeGreaterThan(0);
  return tenant;
}

/** Runs op-mgmt's scheduled handler, as the Cron Trigger does, and waits for what it started. */
async function runCron(cron: string) {
  const ctx = createExecutionContext();
  await mgmt.scheduled(createScheduledController({ scheduledTime: Date.now(), cron }), env as never, ctx);
  await waitOnExecutionContext(ctx);
}

/** What a finished purge leaves of a tenant's rows in D1. */
const NOTHING_LEFT = { users: 0, clients: 0, signing_keys: 0, admin_keys: 0, webhook_endpoints: 0, entity_types: 0 };

describe("deleting a tenant (issue 38 item 12c)", () => {
  it("deletes its webhook endpoints, with their sealed secrets, with the rest", async () => {
    const tenant = await populatedTenant();
    expect((await scoped()(`/tenants/${tenant.id}`, { method: "DELETE" })).status).toBe(204);
    expect(await leftIn(tenant.id)).toEqual(NOTHING_LEFT);
  });

  it("finishes, from the cron, a purge that stopped after the tombstone (a crash), and no DELETE repeated", async () => {
    const tenant = await populatedTenant();
    // What the DELETE does first, and all a crash right after it leaves: the tombstone.
    await env.DB.prepare("UPDATE tenants SET status = 'deleted', settings = '{}', updated_at = ? WHERE id = ?")
      .bind(Date.now(), tenant.id)
      .run();
    expect((await admin(`/tenants/${tenant.id}`)).status).toBe(404);
    expect((await leftIn(tenant.id)).users).toBeGreaterThan(0);
    await runCron("*/5 * * * *");
    const purgedAt = async () =>
      (
        await env.DB.prepare("SELECT purged_at FROM tenants WHERE id = ?")
          .bind(tenant.id)
          .first<{ purged_at: number | null }>()
      )?.purged_at;
    // Finished, and marked so: the next runs leave it alone.
    expect(await purgedAt()).toBeGreaterThan(0);
    expect(await leftIn(tenant.id)).toEqual(NOTHING_LEFT);
  });
});
