import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { auditEvent } from "../../durable-objects/contract/audit-event";
import { webhookEventsOf } from "../../workers/shared/events/webhooks/catalogue";
import {
  admin,
  authorizeQuery,
  basicAuth,
  call,
  form,
  fullLogin,
  loginForCode,
  pinClock,
  pkce,
  redeem,
  registerClient,
  type TestClient,
  withVars,
} from "../support/harness";

afterEach(() => {
  vi.useRealTimers();
});

const base = (over: Record<string, unknown> = {}) => ({
  client_name: "Admin test",
  redirect_uris: ["https://app.example.com/cb"],
  token_endpoint_auth_method: "client_secret_basic",
  ...over,
});

const clientCount = async () =>
  (await env.DB.prepare("SELECT COUNT(*) AS n FROM clients").first<{ n: number }>())?.n as number;

async function expect400(res: Response) {
  expect(res.status, await res.clone().text()).toBe(400);
  expect(((await res.json()) as { error: string }).error).toBe("invalid_request");
}

describe("clients (CONTRACT §5)", () => {
  it("creates a confidential client: 201, the secret once, only its hash stored", async () => {
    const res = await admin("/clients", { method: "POST", json: base({ scope: "openid email" }) });
    expect(res.status).toBe(201);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const created = (await res.json()) as TestClient & Record<string, unknown>;
    expect(created.client_id).toMatch(/^kwc_/);
    expect(created.client_secret).toMatch(/^kws_.{40,}/);
    expect(created).toMatchObject({
      client_name: "Admin test",
      redirect_uris: ["https://app.example.com/cb"],
      post_logout_redirect_uris: [],
      token_endpoint_auth_method: "client_secret_basic",
      grant_types: ["authorization_code", "refresh_token"],
      scope: "openid email",
      id_token_signed_response_alg: "RS256",
      allowed_cors_origins: [],
    });
    expect(created.secret_hash).toBeUndefined();

    const row = await env.DB.prepare("SELECT * FROM clients WHERE client_id = ?")
      .bind(created.client_id)
      .first<Record<string, unknown>>();
    expect(row?.secret_hash).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(JSON.stringify(row)).not.toContain(created.client_secret as string);
    expect(JSON.stringify(row)).not.toContain((created.client_secret as string).slice(4));

    // Never shown again.
    const got = (await (await admin(`/clients/${created.client_id}`)).json()) as Record<string, unknown>;
    expect(got.client_secret).toBeUndefined();
    expect(got.secret_hash).toBeUndefined();
    const list = (await (await admin("/clients")).json()) as { clients: Record<string, unknown>[] };
    const listed = list.clients.find((c) => c.client_id === created.client_id);
    expect(listed).toBeTruthy();
    expect(listed?.client_secret).toBeUndefined();
    expect(listed?.secret_hash).toBeUndefined();

    // The secret authenticates.
    const login = await loginForCode(created, undefined, { extra: { scope: "openid email" } });
    expect((await redeem(created, login.code, login.verifier)).status).toBe(200);
  });

  it("creates a public client without a secret", async () => {
    const res = await admin("/clients", { method: "POST", json: base({ token_endpoint_auth_method: "none" }) });
    expect(res.status).toBe(201);
    const created = (await res.json()) as Record<string, unknown>;
    expect(created.client_secret).toBeUndefined();
    const row = await env.DB.prepare("SELECT secret_hash FROM clients WHERE client_id = ?")
      .bind(created.client_id)
      .first<{ secret_hash: string | null }>();
    expect(row?.secret_hash).toBeNull();
  });

  it("refuses bad redirect URIs with 400 and stores nothing (F2)", async () => {
    const before = await clientCount();
    const bad = [
      "http://app.example.com/cb",
      "https://*.example.com/cb",
      "https://app.example.com/*",
      "javascript:alert(1)",
      "data:text/html,hi",
      "https://app.example.com/cb#frag",
      "https://app.example.com/cb#",
      "/relative/cb",
      "file:///etc/passwd",
      "vbscript:x",
      "",
      "notaurl",
    ];
    for (const uri of bad) {
      await expect400(await admin("/clients", { method: "POST", json: base({ redirect_uris: [uri] }) }));
      await expect400(await admin("/clients", { method: "POST", json: base({ post_logout_redirect_uris: [uri] }) }));
    }
    await expect400(await admin("/clients", { method: "POST", json: base({ redirect_uris: [] }) }));
    expect(await clientCount()).toBe(before);
  });

  it("accepts https, loopback http and private-use scheme redirect URIs", async () => {
    const res = await admin("/clients", {
      method: "POST",
      json: base({
        redirect_uris: [
          "https://app.example.com/cb?x=1",
          "http://127.0.0.1/cb",
          "http://[::1]:8080/cb",
          "http://localhost:3000/cb",
          "com.example.app:/oauth2redirect",
        ],
      }),
    });
    expect(res.status, await res.clone().text()).toBe(201);
  });

  it("refuses unknown fields and wrong types with 400, nothing stored (F3, G2)", async () => {
    const before = await clientCount();
    const bodies: unknown[] = [
      base({ is_admin: true }),
      base({ client_secret: "mine" }),
      base({ redirect_uris: "https://app.example.com/cb" }),
      base({ client_name: 42 }),
      base({ client_name: "" }),
      base({ token_endpoint_auth_method: "private_key_jwt" }),
      base({ grant_types: ["implicit"] }),
      base({ grant_types: [] }),
      base({ scope: "openid admin" }),
      base({ scope: "email" }),
      base({ id_token_signed_response_alg: "none" }),
      base({ id_token_signed_response_alg: "HS256" }),
      base({ allowed_cors_origins: ["https://app.example.com/path"] }),
      { redirect_uris: ["https://app.example.com/cb"], token_endpoint_auth_method: "none" },
      [],
      null,
      "string",
    ];
    for (const json of bodies) await expect400(await admin("/clients", { method: "POST", json }));
    const broken = await admin("/clients", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: '{"client_name": ',
    });
    await expect400(broken);
    const formBody = await admin("/clients", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: "client_name=x",
    });
    expect(formBody.status).toBe(400);
    expect(await clientCount()).toBe(before);
  });

  it("patches a client, validating like create", async () => {
    const client = await registerClient();
    const res = await admin(`/clients/${client.client_id}`, {
      method: "PATCH",
      json: { client_name: "Renamed", redirect_uris: ["https://new.example.com/cb"] },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ client_name: "Renamed", redirect_uris: ["https://new.example.com/cb"] });
    const row = await env.DB.prepare("SELECT client_name, redirect_uris, secret_hash FROM clients WHERE client_id = ?")
      .bind(client.client_id)
      .first<Record<string, string>>();
    expect(row?.client_name).toBe("Renamed");
    expect(JSON.parse(row?.redirect_uris as string)).toEqual(["https://new.example.com/cb"]);

    for (const json of [
      { redirect_uris: ["http://evil.example.com/cb"] },
      { unknown: 1 },
      { client_name: 5 },
      { secret_hash: "x" },
    ]) {
      await expect400(await admin(`/clients/${client.client_id}`, { method: "PATCH", json }));
    }
    // Public/confidential cannot flip.
    await expect400(
      await admin(`/clients/${client.client_id}`, { method: "PATCH", json: { token_endpoint_auth_method: "none" } }),
    );
    const after = await env.DB.prepare(
      "SELECT client_name, redirect_uris, secret_hash FROM clients WHERE client_id = ?",
    )
      .bind(client.client_id)
      .first<Record<string, string>>();
    expect(after).toEqual(row);
    expect((await admin("/clients/kwc_nope", { method: "PATCH", json: { client_name: "x" } })).status).toBe(404);

    // The old redirect URI no longer works; the new one does.
    const moved = { ...client, redirect_uris: ["https://new.example.com/cb"] };
    const { tokens } = await fullLogin(moved);
    expect(tokens.access_token).toBeTruthy();
  });

  it("deletes a client: 204, then 404, and it can no longer authenticate", async () => {
    const client = await registerClient();
    const login = await loginForCode(client);
    const res = await admin(`/clients/${client.client_id}`, { method: "DELETE" });
    expect(res.status).toBe(204);
    expect((await admin(`/clients/${client.client_id}`)).status).toBe(404);
    expect((await admin(`/clients/${client.client_id}`, { method: "DELETE" })).status).toBe(404);
    expect(await env.DB.prepare("SELECT 1 FROM clients WHERE client_id = ?").bind(client.client_id).first()).toBeNull();
    const token = await redeem(client, login.code, login.verifier);
    expect(token.status).toBe(401);
    const authz = await call(
      `/authorize?client_id=${client.client_id}&redirect_uri=${encodeURIComponent(client.redirect_uris[0] as string)}`,
    );
    expect(authz.status).toBe(400);
    expect(authz.headers.get("location")).toBeNull();
    // Basic auth header for a deleted client is still a 401, never a 500.
    const revoke = await call("/revoke", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Authorization: basicAuth(client) },
      body: "token=x",
    });
    expect(revoke.status).toBe(401);
  });
});

describe("client changes reach every Worker (client_cache_seconds)", () => {
  // All Workers share this test isolate, so op-mgmt's own cache eviction would hide a stale copy:
  // the change is made in D1 directly, as op-mgmt in another isolate would make it.
  const authorize = async (client: TestClient, testEnv: object) =>
    (
      await call(
        `/authorize?${authorizeQuery(client, (await pkce()).challenge)}`,
        { headers: { Accept: "application/json" } },
        testEnv,
      )
    ).status;
  const deleteInD1 = (client: TestClient) =>
    env.DB.prepare("DELETE FROM clients WHERE client_id = ?").bind(client.client_id).run();

  it("by default keeps a client 30 s: a deletion through the admin API holds at once, one behind its back within 30 s", async () => {
    const defaults = withVars({ POLICY: "{}" });
    const viaAdmin = await registerClient();
    expect(await authorize(viaAdmin, defaults)).toBe(200);
    expect((await admin(`/clients/${viaAdmin.client_id}`, { method: "DELETE" })).status).toBe(204);
    expect(await authorize(viaAdmin, defaults)).toBe(400);

    const at = pinClock();
    const behindItsBack = await registerClient();
    expect(await authorize(behindItsBack, defaults)).toBe(200);
    await deleteInD1(behindItsBack);
    expect(await authorize(behindItsBack, defaults)).toBe(200);
    at(30_001);
    expect(await authorize(behindItsBack, defaults)).toBe(400);
  });

  it("with the cache off, reads the client every time", async () => {
    const uncached = withVars({ POLICY: JSON.stringify({ client_cache_seconds: 0 }) });
    const client = await registerClient();
    expect(await authorize(client, uncached)).toBe(200);
    await deleteInD1(client);
    expect(await authorize(client, uncached)).toBe(400);
  });

  it("with a cache, keeps the client that long (the trade-off the knob makes)", async () => {
    const cached = withVars({ POLICY: JSON.stringify({ client_cache_seconds: 30 }) });
    const client = await registerClient();
    expect(await authorize(client, cached)).toBe(200);
    await deleteInD1(client);
    expect(await authorize(client, cached)).toBe(200);
  });
});

describe("a client's secret rotated (issue 43: the console's applications page)", () => {
  it("answers a new secret once, no-store; the old one stops working, the new one works", async () => {
    const client = await registerClient({
      redirect_uris: [],
      post_logout_redirect_uris: [],
      grant_types: ["client_credentials"],
      scope: "reports:read",
    });
    expect((await form(client, { grant_type: "client_credentials" })).status).toBe(200);
    const res = await admin(`/clients/${client.client_id}/rotate-secret`, { method: "POST" });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const rotated = (await res.json()) as { client_id: string; client_secret: string; secret_hash?: string };
    expect(rotated.client_id).toBe(client.client_id);
    expect(rotated.client_secret).toMatch(/^kws_/);
    expect(rotated.client_secret).not.toBe(client.client_secret);
    expect(rotated.secret_hash).toBeUndefined();
    // Never shown again.
    expect(JSON.stringify(await (await admin(`/clients/${client.client_id}`)).json())).not.toContain(
      rotated.client_secret,
    );
    expect((await form(client, { grant_type: "client_credentials" })).status).toBe(401);
    const fresh = { ...client, client_secret: rotated.client_secret };
    expect((await form(fresh, { grant_type: "client_credentials" })).status).toBe(200);
  });

  it("tells webhooks the client changed", () => {
    const event = auditEvent({
      kind: "admin_change",
      detail: { method: "POST", path: "/admin/v1/tenants/acme/clients/kwc_x/rotate-secret", status: 200 },
    });
    expect(webhookEventsOf(event)).toEqual([{ type: "client.updated", data: { id: "kwc_x", via: "admin_api" } }]);
  });

  it("refuses a client without a secret, and another tenant's client", async () => {
    const pub = await registerClient({ token_endpoint_auth_method: "none" });
    await expect400(await admin(`/clients/${pub.client_id}/rotate-secret`, { method: "POST" }));
    const secretClient = await registerClient();
    const tenant = `rot-${Date.now().toString(36)}`;
    expect((await admin("/tenants", { method: "POST", json: { id: tenant, name: "Rotation" } })).status).toBe(201);
    const elsewhere = await admin(`/tenants/${tenant}/clients/${secretClient.client_id}/rotate-secret`, {
      method: "POST",
    });
    expect(elsewhere.status).toBe(404);
    // Its secret still authenticates it (a login client: the grant is refused, not the client).
    const still = await form(secretClient, { grant_type: "client_credentials" });
    expect(((await still.json()) as { error: string }).error).toBe("unauthorized_client");
  });
});

describe("shards (CONTRACT §5)", () => {
  it("reports each store's shard count and generation", async () => {
    const res = await admin("/shards");
    expect(res.status).toBe(200);
    const { stores } = (await res.json()) as { stores: Record<string, { generation: number; shards: number }> };
    const config = JSON.parse(env.SHARDS) as Record<string, number[]>;
    // The login's five stores as SHARDS lists them, and the entity store (issue 24) at its default 16.
    expect(Object.keys(stores).sort()).toEqual([...Object.keys(config), "entity"].sort());
    for (const [store, counts] of Object.entries(config))
      expect(stores[store]).toMatchObject({ generation: counts.length - 1, shards: counts.at(-1) });
    expect(stores.entity).toMatchObject({ generation: 0, shards: 16 });
  });

  it("reports a raised count as a new generation", async () => {
    const e = {
      ...env,
      SHARDS: JSON.stringify({ session: [3, 8], challenge: [3], code: [3, 5, 7], revocation: [3], refresh: [3] }),
    };
    const res = await admin("/shards", {}, e);
    const { stores } = (await res.json()) as { stores: Record<string, { generation: number; shards: number }> };
    expect(stores.session).toMatchObject({ generation: 1, shards: 8 });
    expect(stores.code).toMatchObject({ generation: 2, shards: 7 });
    expect(stores.challenge).toMatchObject({ generation: 0, shards: 3 });
  });
});
