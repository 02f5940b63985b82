import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { decodeJwt } from "jose";
import { describe, expect, it } from "vitest";
import authApp from "../../workers/op-auth/src/index";
import tokenApp from "../../workers/op-token/src/index";
import { admin, call, ISSUER, uniqueEmail, withVars } from "../support/harness";
import {
  at,
  createTenant,
  registerTenantClient,
  tenantAdmin,
  tenantFullLogin,
  tenantToken,
  uniqueTenantId,
} from "./support";

/** Operating tenants through the admin API (issue 23, CONTRACT §8). */

describe("the tenants admin API", () => {
  it("creates, reads, lists and changes a tenant; refuses bad ids, duplicates and unknown fields", async () => {
    const id = uniqueTenantId("crud");
    const created = await admin("/tenants", {
      method: "POST",
      json: {
        id,
        name: "Acme",
        policy: { session_ttl_seconds: 3600 },
        signup: "invite",
        mail: { reply_to: "help@acme.test" },
      },
    });
    expect(created.status).toBe(201);
    const body = (await created.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      id,
      name: "Acme",
      status: "active",
      issuer: `${ISSUER}/t/${id}`,
      policy: { session_ttl_seconds: 3600 },
      signup: "invite",
      mail: { reply_to: "help@acme.test" },
    });
    expect((await admin(`/tenants/${id}`)).status).toBe(200);
    const list = (await (await admin("/tenants?limit=1000")).json()) as { tenants: { id: string }[] };
    expect(list.tenants[0]?.id).toBe("default");
    expect(list.tenants.map((t) => t.id)).toContain(id);

    const patched = await admin(`/tenants/${id}`, { method: "PATCH", json: { name: "Acme Corp" } });
    expect(patched.status).toBe(200);
    expect(((await patched.json()) as { name: string; signup: string }).name).toBe("Acme Corp");

    for (const bad of [
      { id: "A", name: "x" },
      { id: "has_underscore", name: "x" },
      { id: "default", name: "x" },
      { id: uniqueTenantId(), name: "x", extra: 1 },
      { id: uniqueTenantId(), name: "x", policy: { max_inflight_requests: 1 } },
    ])
      expect((await admin("/tenants", { method: "POST", json: bad })).status, JSON.stringify(bad)).toBe(400);
    expect((await admin("/tenants", { method: "POST", json: { id, name: "again" } })).status).toBe(409);
    expect((await admin("/tenants/default", { method: "PATCH", json: { name: "x" } })).status).toBe(400);
    expect((await admin("/tenants/no-such-tenant")).status).toBe(404);
  });

  it("a tenant's policy and name reach its pages and tokens", async () => {
    const t = await createTenant({ name: "Globex", policy: { access_token_ttl_seconds: 120 } });
    const client = await registerTenantClient(t.id);
    const { tokens, email } = await tenantFullLogin(t.id, client);
    expect(tokens.expires_in).toBe(120);
    // The mail names the tenant's product and its issuer.
    const mail = await call(at(t.id, `/__dev/mailbox/${encodeURIComponent(email)}`));
    const [message] = ((await mail.json()) as { messages: { subject: string; text: string }[] }).messages;
    expect(message?.subject).toContain("Globex sign-in code");
    expect(message?.text).toContain(t.issuer);
    const page = await call(
      at(
        t.id,
        `/authorize?response_type=code&client_id=${client.client_id}&redirect_uri=${encodeURIComponent(client.redirect_uris[0] as string)}&scope=openid&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256`,
      ),
    );
    const html = await page.text();
    expect(html).toContain("Globex");
    // The form posts to the tenant's own endpoint.
    expect(html).toContain(`action="/t/${t.id}/email-code/generate"`);
    // The login transaction cookie is scoped to the tenant's path.
    expect(page.headers.get("set-cookie")).toContain(`Path=/t/${t.id}`);
  });

  it("invite-only sign-up at a tenant: an unknown address gets no code, an invited one signs in", async () => {
    const t = await createTenant({ signup: "invite" });
    const client = await registerTenantClient(t.id);
    const invited = uniqueEmail("invited");
    expect((await tenantAdmin(t.id, "/users", { method: "POST", json: { email: invited } })).status).toBe(201);
    const { tokens } = await tenantFullLogin(t.id, client, invited);
    expect(decodeJwt(tokens.id_token).email).toBe(invited);
    // The invitation is the tenant's: the default tenant does not know the user.
    const inDefault = await admin(`/users?email=${encodeURIComponent(invited)}`);
    expect(((await inDefault.json()) as { users: unknown[] }).users).toEqual([]);
  });

  it("a disabled tenant answers every endpoint with tenant_disabled and issues nothing; enabled, it works again", async () => {
    const t = await createTenant();
    const client = await registerTenantClient(t.id);
    const { tokens } = await tenantFullLogin(t.id, client);
    expect((await admin(`/tenants/${t.id}`, { method: "PATCH", json: { status: "disabled" } })).status).toBe(200);
    for (const path of ["/.well-known/openid-configuration", "/jwks.json", "/authorize"]) {
      const res = await call(at(t.id, path), { headers: { Accept: "application/json" } });
      expect(res.status, path).toBe(403);
      expect(((await res.json()) as { error: string }).error).toBe("tenant_disabled");
    }
    const refresh = await tenantToken(t.id, client, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token as string,
    });
    expect(refresh.status).toBe(403);
    // Still managed: its clients can be listed.
    expect((await admin(`/tenants/${t.id}/clients`)).status).toBe(200);
    expect((await admin(`/tenants/${t.id}`, { method: "PATCH", json: { status: "active" } })).status).toBe(200);
    const again = await tenantToken(t.id, client, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token as string,
    });
    expect(again.status, await again.clone().text()).toBe(200);
  });

  it("deleting a tenant removes its users, clients and keys, refuses every grant, and never reuses the id", async () => {
    const t = await createTenant();
    const client = await registerTenantClient(t.id);
    const { tokens } = await tenantFullLogin(t.id, client);
    expect((await admin(`/tenants/${t.id}`, { method: "DELETE" })).status).toBe(204);
    for (const table of ["users", "clients", "signing_keys", "admin_keys"]) {
      const row = await env.DB.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE tenant = ?`)
        .bind(t.id)
        .first<{ n: number }>();
      expect(row?.n, table).toBe(0);
    }
    const refresh = await tenantToken(t.id, client, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token as string,
    });
    expect(refresh.status).toBe(404);
    const userinfo = await call(at(t.id, "/userinfo"), { headers: { Authorization: `Bearer ${tokens.access_token}` } });
    expect(userinfo.status).toBe(404);
    expect((await call(at(t.id, "/.well-known/openid-configuration"))).status).toBe(404);
    expect((await admin(`/tenants/${t.id}`)).status).toBe(404);
    expect((await admin(`/tenants/${t.id}/clients`)).status).toBe(404);
    const reuse = await admin("/tenants", { method: "POST", json: { id: t.id, name: "again" } });
    expect(reuse.status).toBe(409);
    // A second DELETE finishes whatever purge the first left (here nothing): 204, not 404.
    expect((await admin(`/tenants/${t.id}`, { method: "DELETE" })).status).toBe(204);
  });

  it("unknown tenants and the default's /t/ path are 404", async () => {
    expect((await call("/t/no-such-tenant/.well-known/openid-configuration")).status).toBe(404);
    expect((await call("/t/default/.well-known/openid-configuration")).status).toBe(404);
    expect((await call("/t/Not_An_Id/token", { method: "POST" })).status).toBe(404);
  });
});

describe("tenant-scoped admin keys", () => {
  it("open their own tenant's routes only; hashed at rest, shown once, revocable", async () => {
    const [a, b] = [await createTenant(), await createTenant()];
    const created = await admin(`/tenants/${a.id}/admin-keys`, { method: "POST", json: { name: "ci" } });
    expect(created.status).toBe(201);
    const { key, id } = (await created.json()) as { key: string; id: string };
    expect(key).toMatch(/^kwa_/);
    const stored = await env.DB.prepare("SELECT * FROM admin_keys WHERE id = ?")
      .bind(id)
      .first<Record<string, unknown>>();
    expect(JSON.stringify(stored)).not.toContain(key);
    const listed = (await (await admin(`/tenants/${a.id}/admin-keys`)).json()) as { admin_keys: object[] };
    expect(JSON.stringify(listed)).not.toContain(key);
    expect(listed.admin_keys).toHaveLength(1);

    const withKey = (path: string, init: RequestInit = {}) =>
      call(`/admin/v1${path}`, { ...init, headers: { Authorization: `Bearer ${key}`, ...init.headers } });
    const own = await withKey(`/tenants/${a.id}/clients`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        client_name: "by key",
        redirect_uris: ["https://rp.example.com/cb"],
        token_endpoint_auth_method: "none",
      }),
    });
    expect(own.status, await own.clone().text()).toBe(201);
    expect((await withKey(`/tenants/${a.id}/clients`)).status).toBe(200);
    for (const path of [`/tenants/${b.id}/clients`, "/clients", "/tenants", `/tenants/${a.id}`, "/shards", "/stats"])
      expect((await withKey(path)).status, path).toBe(401);
    // A tenant's route that is the platform's only stays 404 even for the platform token.
    expect((await admin(`/tenants/${a.id}/openapi.json`)).status).toBe(404);
    expect(
      (await admin(`/tenants/${a.id}/shards`, { method: "POST", json: { store: "session", shards: 4 } })).status,
    ).toBe(404);
    expect((await admin("/admin-keys")).status).toBe(404);
    // The deployment's shards, read-only, are a tenant's route too (CONTRACT §8: every §5 route), but
    // only each store's count and generation: the regions and their history are the platform's (issue 38 item 2).
    const tenantShards = await withKey(`/tenants/${a.id}/shards`);
    expect(tenantShards.status).toBe(200);
    const view = (await tenantShards.json()) as Record<string, unknown>;
    expect(Object.keys(view)).toEqual(["stores"]);
    for (const store of Object.values(view.stores as Record<string, Record<string, unknown>>))
      expect(Object.keys(store).sort()).toEqual(["generation", "shards"]);
    const platformShards = (await (await admin("/shards")).json()) as Record<string, unknown>;
    expect(platformShards).toHaveProperty("regions");
    // A key lists its tenant's keys but cannot mint more, nor revoke.
    expect((await withKey(`/tenants/${a.id}/admin-keys`)).status).toBe(200);
    const minted = await withKey(`/tenants/${a.id}/admin-keys`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "more" }),
    });
    expect(minted.status).toBe(403);

    expect((await admin(`/tenants/${a.id}/admin-keys/${id}`, { method: "DELETE" })).status).toBe(204);
    expect((await withKey(`/tenants/${a.id}/clients`)).status).toBe(401);
  });

  it("a tenant's stats count its own users, clients and keys", async () => {
    const t = await createTenant();
    await registerTenantClient(t.id);
    await tenantAdmin(t.id, "/users", { method: "POST", json: { email: uniqueEmail() } });
    const res = await admin(`/tenants/${t.id}/stats`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ tenant: t.id, users: 1, clients: 1, signing_keys: 2 });
  });
});

describe("a custom host per tenant (TENANT_HOSTS)", () => {
  it("serves the tenant at the host's root, with that host as its issuer; its /t/ path is 404", async () => {
    const t = await createTenant();
    const host = `login.${t.id}.test`;
    const e = withVars({ TENANT_HOSTS: JSON.stringify({ [host]: t.id }) });
    const res = await call(`http://${host}/.well-known/openid-configuration`, {}, e);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as Record<string, string>;
    expect(doc.issuer).toBe(`http://${host}`);
    expect(doc.token_endpoint).toBe(`http://${host}/token`);
    expect((await call(at(t.id, "/.well-known/openid-configuration"), {}, e)).status).toBe(404);
    // Another tenant's path under the custom host is not served either.
    expect((await call(`http://${host}/t/${t.id}/token`, { method: "POST" }, e)).status).toBe(404);
    // A host that names an inherited property of the map is no tenant's: the default tenant answers.
    const odd = await call("http://constructor/.well-known/openid-configuration", {}, e);
    expect(odd.status).toBe(200);
    expect(((await odd.json()) as { issuer: string }).issuer).toBe(ISSUER);
  });
});

describe("op-auth in production, where its route takes a tenant's every path", () => {
  it("hands a tenant's op-token paths to op-token over its service binding", async () => {
    const t = await createTenant();
    const seen: string[] = [];
    // The binding as Cloudflare gives it: a Fetcher; here it is op-token itself, on the same env.
    const OP_TOKEN = {
      fetch: (req: Request) => {
        seen.push(new URL(req.url).pathname);
        return tokenApp.fetch(req, env as never, createExecutionContext());
      },
    };
    const ctx = createExecutionContext();
    const res = await authApp.fetch(new Request(`${ISSUER}/t/${t.id}/jwks.json`), { ...env, OP_TOKEN } as never, ctx);
    await waitOnExecutionContext(ctx);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { keys: unknown[] }).keys).toHaveLength(2);
    expect(seen).toEqual([`/t/${t.id}/jwks.json`]);
  });
});
