import { applyD1Migrations, env } from "cloudflare:test";
import { createHmac } from "node:crypto";
import { decodeJwt } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../workers/shared/config/config";
import { parseId } from "../../workers/shared/routing/ids";
import { admin, fullLogin, type TestClient, type TestEnv, uniqueEmail } from "../support/harness";

/**
 * The upgrade to tenants (issue 23, schema/0009): a database written by the code before it (schema
 * 0001-0008, rows as that code inserted them) is migrated, and everything in it is the `default`
 * tenant's and keeps working: its users sign in as the same users, its clients are found, its keys
 * and audit trail stay where they were. Ids of the default tenant keep the format and MAC they had.
 */

const BEFORE_TENANTS = (name: string) => name < "0009";
let upgraded: TestEnv;
const OLD_USER = "usr_0123456789abcdefABCDEF";
const oldEmail = uniqueEmail("before-tenants");
const OLD_CLIENT = "kwc_before_tenants_client_1";

beforeAll(async () => {
  const db = env.UPGRADE_DB;
  await applyD1Migrations(
    db,
    env.TEST_MIGRATIONS.filter((m) => BEFORE_TENANTS(m.name)),
  );
  const now = Date.now();
  // As today's main wrote them (workers/shared/people/users.ts, workers/op-mgmt/src/clients.ts before tenants).
  await db.batch([
    db
      .prepare("INSERT INTO users (id, email, name, created_at, updated_at, last_login_at) VALUES (?, ?, ?, ?, ?, ?)")
      .bind(OLD_USER, oldEmail, "Before", now - 86_400_000, now - 86_400_000, now - 3_600_000),
    db
      .prepare(
        `INSERT INTO clients (client_id, client_name, token_endpoint_auth_method, secret_hash, redirect_uris,
          post_logout_redirect_uris, grant_types, scope, id_token_signed_response_alg, allowed_cors_origins, jwks, created_at, updated_at)
         VALUES (?, ?, 'none', NULL, ?, '[]', '["authorization_code","refresh_token"]', 'openid email offline_access', 'RS256', '[]', NULL, ?, ?)`,
      )
      .bind(OLD_CLIENT, "before tenants", JSON.stringify(["https://old.example.com/cb"]), now, now),
    db
      .prepare(
        "INSERT INTO audit_events (id, at, kind, user_id, email_key, client_id, ip, detail) VALUES (?, ?, 'sign_in', ?, NULL, ?, NULL, NULL)",
      )
      .bind("evt-before-tenants", now - 3_600_000, OLD_USER, OLD_CLIENT),
  ]);
  // The upgrade itself: the migrations from 0009 on, as `wrangler d1 migrations apply` runs them.
  await applyD1Migrations(db, env.TEST_MIGRATIONS);
  upgraded = { ...env, DB: db } as TestEnv;
});

describe("the upgrade to tenants (schema/0009)", () => {
  it("makes every existing row the default tenant's, keeping ids and columns", async () => {
    const user = await env.UPGRADE_DB.prepare("SELECT * FROM users WHERE id = ?").bind(OLD_USER).first();
    expect(user).toMatchObject({ id: OLD_USER, tenant: "default", email: oldEmail, name: "Before" });
    const client = await env.UPGRADE_DB.prepare("SELECT tenant FROM clients WHERE client_id = ?")
      .bind(OLD_CLIENT)
      .first();
    expect(client).toEqual({ tenant: "default" });
    const event = await env.UPGRADE_DB.prepare("SELECT tenant, user_id FROM audit_events WHERE id = ?")
      .bind("evt-before-tenants")
      .first();
    expect(event).toEqual({ tenant: "default", user_id: OLD_USER });
  });

  it("an existing user signs in through an existing client as the same user, and the admin API finds both", async () => {
    const client = {
      client_id: OLD_CLIENT,
      redirect_uris: ["https://old.example.com/cb"],
      token_endpoint_auth_method: "none",
      post_logout_redirect_uris: [],
    } as TestClient;
    const { tokens } = await fullLogin(client, oldEmail, { env: upgraded });
    expect(decodeJwt(tokens.id_token).sub).toBe(OLD_USER);
    const found = await admin(`/users/${OLD_USER}`, {}, upgraded);
    expect(found.status).toBe(200);
    expect((await admin(`/clients/${OLD_CLIENT}`, {}, upgraded)).status).toBe(200);
    // The same address is free in a new tenant: unique per tenant now, not across.
    const tenant = await admin("/tenants", { method: "POST", json: { id: "after-upgrade", name: "After" } }, upgraded);
    expect(tenant.status).toBe(201);
    const created = await admin(
      "/tenants/after-upgrade/users",
      { method: "POST", json: { email: oldEmail } },
      upgraded,
    );
    expect(created.status).toBe(201);
  });

  it("accepts a default-tenant id minted as the code before tenants minted it", () => {
    // The id codec (workers/shared/routing/ids.ts) before tenants:
    // `<prefix>_<region>_<gen>_<shard>_<random><MAC>`, the MAC the first 16 bytes of
    // HMAC-SHA-256(OTP_HMAC_SECRET, "id:" + body), base64url.
    const config = loadConfig(env);
    const body = "gr_global_0_1_AAAAAAAAAAAAAAAAAAAAAA";
    const mac = createHmac("sha256", config.OTP_HMAC_SECRET).update(`id:${body}`).digest().subarray(0, 16);
    const id = `${body}${Buffer.from(mac).toString("base64url")}`;
    expect(parseId(config, "grant", id)).toMatchObject({ id, ref: { gen: 0, shard: 1 } });
    // The same id is another tenant's made-up one.
    expect(parseId({ ...config, TENANT: "acme" }, "grant", id)).toBeNull();
  });
});
