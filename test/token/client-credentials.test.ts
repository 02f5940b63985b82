import { afterEach, describe, expect, it, vi } from "vitest";
import { admin, call, form, registerClient, type TestClient, userinfo, verifyJwt } from "../support/harness";

afterEach(() => {
  vi.useRealTimers();
});

const machine = (overrides: Record<string, unknown> = {}) =>
  registerClient({
    redirect_uris: [],
    post_logout_redirect_uris: [],
    grant_types: ["client_credentials"],
    scope: "reports:read reports:write",
    ...overrides,
  });

async function tokenFor(client: TestClient, extra: Record<string, string> = {}) {
  const res = await form(client, { grant_type: "client_credentials", ...extra });
  return res;
}

describe("client credentials (RFC 6749 §4.4, issue 14)", () => {
  it("registers a machine client: confidential, API scopes, no redirect URI; refuses what cannot work", async () => {
    const client = await machine();
    expect(client).toMatchObject({
      grant_types: ["client_credentials"],
      redirect_uris: [],
      scope: "reports:read reports:write",
    });
    expect(client.client_secret).toMatch(/^kws_/);
    const bad: Record<string, unknown>[] = [
      { token_endpoint_auth_method: "none" }, // a public client cannot prove it is itself
      { grant_types: ["client_credentials", "refresh_token"] }, // no refresh token without a login
      { grant_types: ["authorization_code"], scope: "openid reports:read" }, // API scopes only for machines
      { grant_types: ["authorization_code"], scope: "openid" }, // a login client needs a redirect URI
      { scope: 'bad"scope' },
    ];
    for (const extra of bad) {
      const res = await admin("/clients", {
        method: "POST",
        json: {
          client_name: "m",
          redirect_uris: [],
          token_endpoint_auth_method: "client_secret_basic",
          grant_types: ["client_credentials"],
          scope: "reports:read",
          ...extra,
        },
      });
      expect(res.status, JSON.stringify(extra)).toBe(400);
    }
    // A PATCH is checked as the whole registration it makes.
    const patched = await admin(`/clients/${client.client_id}`, {
      method: "PATCH",
      json: { grant_types: ["authorization_code"] },
    });
    expect(patched.status).toBe(400);
    const discovery = (await (await call("/.well-known/openid-configuration")).json()) as {
      grant_types_supported: string[];
    };
    expect(discovery.grant_types_supported).toContain("client_credentials");
  });

  it("issues an access token for the client itself: sub is the client_id; no ID token, no refresh token", async () => {
    const client = await machine();
    const res = await tokenFor(client);
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(["access_token", "expires_in", "scope", "token_type"]);
    expect(body).toMatchObject({ token_type: "Bearer", expires_in: 600, scope: "reports:read reports:write" });
    const { header, payload } = await verifyJwt(body.access_token as string, { typ: "at+jwt" });
    expect(header.typ).toBe("at+jwt");
    expect(payload).toMatchObject({
      sub: client.client_id,
      client_id: client.client_id,
      scope: "reports:read reports:write",
    });
    expect(payload.jti).toMatch(/^at_/);
    for (const claim of ["sid", "grant_id", "auth_time", "email"]) expect(payload).not.toHaveProperty(claim);
    // It is no user's token: userinfo refuses it.
    expect((await userinfo(body.access_token as string)).status).toBe(401);
  });

  it("narrows the scope on request and never widens it", async () => {
    const client = await machine();
    const narrow = (await (await tokenFor(client, { scope: "reports:read" })).json()) as { scope: string };
    expect(narrow.scope).toBe("reports:read");
    for (const scope of ["reports:admin", "openid", "reports:read offline_access"]) {
      const res = await tokenFor(client, { scope });
      expect(res.status, scope).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe("invalid_scope");
    }
  });

  it("refuses a wrong secret, a client without the grant, and a public client", async () => {
    const client = await machine();
    const wrong = await form({ ...client, client_secret: "kws_wrong" }, { grant_type: "client_credentials" });
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { error: string }).error).toBe("invalid_client");
    const login = await registerClient();
    const notAllowed = await tokenFor(login);
    expect(notAllowed.status).toBe(400);
    expect(((await notAllowed.json()) as { error: string }).error).toBe("unauthorized_client");
    const publicClient = await registerClient({ token_endpoint_auth_method: "none" });
    const res = await tokenFor(publicClient);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe("unauthorized_client");
  });

  it("introspects to its own client, revokes, and dies with a deleted client", async () => {
    const client = await machine();
    const other = await machine();
    const { access_token } = (await (await tokenFor(client)).json()) as { access_token: string };
    const introspect = async (as: TestClient, token = access_token) =>
      (await (await form(as, { token }, "/introspect")).json()) as Record<string, unknown>;
    const active = await introspect(client);
    expect(active).toMatchObject({
      active: true,
      token_type: "Bearer",
      client_id: client.client_id,
      sub: client.client_id,
    });
    expect(active).not.toHaveProperty("sid");
    expect(await introspect(other)).toEqual({ active: false });
    // Another client's revocation does nothing; the owner's ends it.
    expect((await form(other, { token: access_token }, "/revoke")).status).toBe(200);
    expect((await introspect(client)).active).toBe(true);
    expect((await form(client, { token: access_token }, "/revoke")).status).toBe(200);
    expect(await introspect(client)).toEqual({ active: false });

    const second = (await (await tokenFor(client)).json()) as { access_token: string };
    expect((await introspect(client, second.access_token)).active).toBe(true);
    expect((await admin(`/clients/${other.client_id}`, { method: "DELETE" })).status).toBe(204);
    const orphan = await machine();
    const orphanToken = (await (await tokenFor(orphan)).json()) as { access_token: string };
    expect((await admin(`/clients/${orphan.client_id}`, { method: "DELETE" })).status).toBe(204);
    // The token of a deleted client is inactive to anyone who asks (here the still-registered owner of `second`).
    expect(await introspect(client, orphanToken.access_token)).toEqual({ active: false });
  });
});
