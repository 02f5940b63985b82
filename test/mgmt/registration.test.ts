import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { auditEvent } from "../../durable-objects/contract/audit-event";
import { webhookEventsOf } from "../../workers/shared/events/webhooks/catalogue";
import {
  admin,
  auditEvents,
  Browser,
  call,
  fullLogin,
  loginForCode,
  redeem,
  registerClient,
  runAlarmSettled,
  type TestClient,
  userinfo,
  withVars,
  writeBehindStub,
} from "../support/harness";
import { at, baseOf, createTenant, tenantAdmin, tenantFullLogin } from "../tenants/support";

// Dynamic Client Registration (issue 40, CONTRACT §9): RFC 7591 / OIDC Registration at
// `<issuer>/register`, RFC 7592 at `registration_client_uri`, initial access tokens minted by a
// tenant admin (`/admin/v1[/tenants/{id}]/registration-tokens`), open registration off by default.

const documentsPort = () => (env as unknown as { TEST_MAIL_PEERS: { httpPort: number } }).TEST_MAIL_PEERS.httpPort;

/** A D1 query of the test's database. */
const d1 = async <T = Record<string, unknown>>(query: string, ...params: unknown[]) =>
  (
    await env.DB.prepare(query)
      .bind(...params)
      .all<T>()
  ).results;

let counter = 0;
const tag = () => `${++counter}-${Math.random().toString(36).slice(2, 8)}`;

/** Mints an initial access token at the default tenant (or `tenant`'s admin routes). */
async function mintToken(
  body: Record<string, unknown> = {},
  tenant?: string,
): Promise<{ id: string; token: string; multi_use: boolean; expires_at: number | null; status: string }> {
  const res = await admin(`${tenant ? `/tenants/${tenant}` : ""}/registration-tokens`, { method: "POST", json: body });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as never;
}

/** `POST <issuer>/register` with client metadata and, when given, an initial access token. */
function registerAt(base: string, metadata: unknown, token?: string, testEnv: object = env) {
  return call(
    `${base}/register`,
    {
      method: "POST",
      headers: { "Content-Type": "application/json", ...(token ? { Authorization: `Bearer ${token}` } : {}) },
      body: typeof metadata === "string" ? metadata : JSON.stringify(metadata),
    },
    testEnv,
  );
}

const metadata = (overrides: Record<string, unknown> = {}) => {
  const t = tag();
  return {
    client_name: `dynamic ${t}`,
    redirect_uris: [`https://dyn${t}.example.com/cb`],
    post_logout_redirect_uris: [`https://dyn${t}.example.com/bye`],
    grant_types: ["authorization_code", "refresh_token"],
    ...overrides,
  };
};

interface Registered extends TestClient {
  registration_access_token: string;
  registration_client_uri: string;
  client_id_issued_at: number;
  client_secret_expires_at?: number;
}

/** Registers at `base` with a fresh single-use token of `tenant`; the 201's body. */
async function registered(overrides: Record<string, unknown> = {}, tenant?: string): Promise<Registered> {
  const { token } = await mintToken({}, tenant);
  const res = await registerAt(tenant ? baseOf(tenant) : "", metadata(overrides), token);
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as Registered;
}

/** A request to the client configuration endpoint (RFC 7592), by its path on the issuer. */
function configure(client: Registered, init: RequestInit & { token?: string | null; json?: unknown } = {}) {
  const { token = client.registration_access_token, json, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (token !== null) headers.set("Authorization", `Bearer ${token}`);
  if (json !== undefined) headers.set("Content-Type", "application/json");
  return call(new URL(client.registration_client_uri).pathname, {
    ...rest,
    headers,
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
  });
}

async function expectError(res: Response, status: number, error: string): Promise<Record<string, string>> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  const body = JSON.parse(text) as Record<string, string>;
  expect(body.error, text).toBe(error);
  return body;
}

describe("discovery", () => {
  it("names the registration endpoint of each issuer", async () => {
    const doc = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, unknown>;
    expect(doc.registration_endpoint).toBe(`${env.ISSUER}/register`);
    const tenant = await createTenant();
    const tdoc = (await (await call(at(tenant.id, "/.well-known/openid-configuration"))).json()) as Record<
      string,
      unknown
    >;
    expect(tdoc.registration_endpoint).toBe(`${tenant.issuer}/register`);
  });
});

describe("initial access tokens (admin API)", () => {
  it("are shown once, stored hashed, single-use and a week long by default; listed without the token; revoked", async () => {
    const before = Date.now();
    const minted = await mintToken({ description: "for the conformance suite" });
    expect(minted.token).toMatch(/^kwi_/);
    expect(minted.multi_use).toBe(false);
    expect(minted.status).toBe("active");
    expect(minted.expires_at).toBeGreaterThanOrEqual(before + 7 * 86_400_000 - 1000);
    const rows = await d1<{ token_hash: string }>("SELECT token_hash FROM registration_tokens WHERE id = ?", minted.id);
    expect(rows[0]?.token_hash).toBeTruthy();
    expect(rows[0]?.token_hash).not.toContain(minted.token);

    const list = (await (await admin("/registration-tokens")).json()) as { registration_tokens: { id: string }[] };
    const listed = list.registration_tokens.find((t) => t.id === minted.id);
    expect(listed).toMatchObject({ id: minted.id, description: "for the conformance suite", status: "active" });
    expect(JSON.stringify(list)).not.toContain(minted.token);

    expect((await admin(`/registration-tokens/${minted.id}`, { method: "DELETE" })).status).toBe(204);
    await expectError(await registerAt("", metadata(), minted.token), 401, "invalid_token");
    expect((await admin(`/registration-tokens/${minted.id}`, { method: "DELETE" })).status).toBe(404);
  });

  it("go with their tenant when it is deleted, and register nothing meanwhile", async () => {
    const tenant = await createTenant();
    const minted = await mintToken({ multi_use: true }, tenant.id);
    expect((await admin(`/tenants/${tenant.id}`, { method: "DELETE" })).status).toBe(204);
    expect(await d1("SELECT id FROM registration_tokens WHERE tenant = ?", tenant.id)).toEqual([]);
    expect((await registerAt(baseOf(tenant.id), metadata(), minted.token)).status).toBe(404);
  });

  it("take an expiry (or none) and multi-use; refuse unknown fields", async () => {
    const never = await mintToken({ expires_in: null, multi_use: true });
    expect(never.expires_at).toBeNull();
    expect(never.multi_use).toBe(true);
    const res = await admin("/registration-tokens", { method: "POST", json: { uses: 3 } });
    await expectError(res, 400, "invalid_request");
    const short = await admin("/registration-tokens", { method: "POST", json: { expires_in: 5 } });
    await expectError(short, 400, "invalid_request");
  });

  it("are minted by a tenant's admin key at its own tenant only", async () => {
    const tenant = await createTenant();
    const other = await createTenant();
    const keyRes = await tenantAdmin(tenant.id, "/admin-keys", { method: "POST", json: { name: "ops" } });
    const { key } = (await keyRes.json()) as { key: string };
    const withKey = (path: string) =>
      call(`/admin/v1${path}`, {
        method: "POST",
        headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
        body: "{}",
      });
    const own = await withKey(`/tenants/${tenant.id}/registration-tokens`);
    expect(own.status, await own.clone().text()).toBe(201);
    await expectError(await withKey(`/tenants/${other.id}/registration-tokens`), 401, "unauthorized");
    await expectError(await withKey("/registration-tokens"), 401, "unauthorized");
  });
});

describe("registration needs an initial access token (open registration is off)", () => {
  it("refuses a registration without a token, with a made-up one, or with a malformed header", async () => {
    const none = await registerAt("", metadata());
    await expectError(none, 401, "invalid_token");
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
    await expectError(await registerAt("", metadata(), "kwi_madeup"), 401, "invalid_token");
    await expectError(await registerAt("", metadata(), "not-even-a-prefix"), 401, "invalid_token");
    const basic = await call("/register", {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Basic Zm9vOmJhcg==" },
      body: JSON.stringify(metadata()),
    });
    await expectError(basic, 401, "invalid_token");
  });

  it("spends a single-use token on the first client; a refused registration does not spend it", async () => {
    const { token } = await mintToken();
    await expectError(
      await registerAt("", metadata({ redirect_uris: ["http://evil.example.com/cb"] }), token),
      400,
      "invalid_redirect_uri",
    );
    const first = await registerAt("", metadata(), token);
    expect(first.status, await first.clone().text()).toBe(201);
    await expectError(await registerAt("", metadata(), token), 401, "invalid_token");
  });

  it("lets a multi-use token register several clients, until it expires", async () => {
    const minted = await mintToken({ multi_use: true });
    for (let i = 0; i < 2; i++) expect((await registerAt("", metadata(), minted.token)).status).toBe(201);
    const list = (await (await admin("/registration-tokens")).json()) as {
      registration_tokens: { id: string; uses: number }[];
    };
    expect(list.registration_tokens.find((t) => t.id === minted.id)?.uses).toBe(2);
    await d1("UPDATE registration_tokens SET expires_at = ? WHERE id = ?", Date.now() - 1, minted.id);
    await expectError(await registerAt("", metadata(), minted.token), 401, "invalid_token");
  });

  it("a tenant's token registers at that tenant only", async () => {
    const tenant = await createTenant();
    const other = await createTenant();
    const { token } = await mintToken({ multi_use: true }, tenant.id);
    await expectError(await registerAt(baseOf(other.id), metadata(), token), 401, "invalid_token");
    await expectError(await registerAt("", metadata(), token), 401, "invalid_token");
    const defaultToken = (await mintToken()).token;
    await expectError(await registerAt(baseOf(tenant.id), metadata(), defaultToken), 401, "invalid_token");
    const ok = await registerAt(baseOf(tenant.id), metadata(), token);
    expect(ok.status, await ok.clone().text()).toBe(201);
  });

  it("a tenant may open registration in its policy; the default tenant by POLICY", async () => {
    const tenant = await createTenant();
    await expectError(await registerAt(baseOf(tenant.id), metadata()), 401, "invalid_token");
    const patched = await admin(`/tenants/${tenant.id}`, {
      method: "PATCH",
      json: { policy: { open_registration: true } },
    });
    expect(patched.status, await patched.clone().text()).toBe(200);
    const open = await registerAt(baseOf(tenant.id), metadata());
    expect(open.status, await open.clone().text()).toBe(201);
    const body = (await open.json()) as Registered;
    expect(body.registration_client_uri).toBe(`${tenant.issuer}/register/${body.client_id}`);
    // Open registration is the people's logins only: API scopes need an admin's token.
    await expectError(
      await registerAt(baseOf(tenant.id), metadata({ grant_types: ["client_credentials"], scope: "api:write" })),
      400,
      "invalid_client_metadata",
    );
    // The default tenant is still closed; its POLICY opens it.
    await expectError(await registerAt("", metadata()), 401, "invalid_token");
    const openEnv = withVars({ POLICY: JSON.stringify({ client_cache_seconds: 0, open_registration: true }) });
    expect((await registerAt("", metadata(), undefined, openEnv)).status).toBe(201);
  });
});

describe("a registered client", () => {
  it("gets RFC 7591's answer, signs in end to end, and shows in the admin API as dynamic", async () => {
    const client = await registered({ scope: "openid email offline_access", contacts: ["dev@example.com"] });
    expect(client.client_id).toMatch(/^kwc_/);
    expect(client.client_secret).toMatch(/^kws_/);
    expect(client.client_secret_expires_at).toBe(0);
    expect(client.client_id_issued_at).toBeGreaterThan(Date.now() / 1000 - 60);
    expect(client.registration_access_token).toMatch(/^kwr_/);
    expect(client.registration_client_uri).toBe(`${env.ISSUER}/register/${client.client_id}`);
    expect(client).toMatchObject({
      token_endpoint_auth_method: "client_secret_basic",
      response_types: ["code"],
      grant_types: ["authorization_code", "refresh_token"],
      id_token_signed_response_alg: "RS256",
      subject_type: "public",
      require_pkce: true,
      contacts: ["dev@example.com"],
    });
    const rows = await d1<Record<string, unknown>>("SELECT * FROM clients WHERE client_id = ?", client.client_id);
    expect(JSON.stringify(rows)).not.toContain(client.client_secret as string);
    expect(JSON.stringify(rows)).not.toContain(client.registration_access_token);

    const { tokens } = await fullLogin(client);
    expect(tokens.refresh_token).toBeTruthy();
    expect((await userinfo(tokens.access_token)).status).toBe(200);

    const listed = (await (await admin("/clients")).json()) as { clients: Record<string, unknown>[] };
    const mine = listed.clients.find((c) => c.client_id === client.client_id);
    expect(mine?.registered_via).toBe("dynamic");
    expect(mine).not.toHaveProperty("registration_access_token_hash");
    expect(mine).not.toHaveProperty("secret_hash");
    const adminMade = await registerClient();
    expect(adminMade.registered_via).toBe("admin");
  });

  it("takes RFC 7591's defaults: client_secret_basic, the code grant, the OIDC scopes, a name from the redirect URI", async () => {
    const { token } = await mintToken();
    const res = await registerAt("", { redirect_uris: ["https://defaults.example.com/cb"] }, token);
    expect(res.status, await res.clone().text()).toBe(201);
    const body = (await res.json()) as Registered;
    expect(body).toMatchObject({
      client_name: "defaults.example.com",
      token_endpoint_auth_method: "client_secret_basic",
      grant_types: ["authorization_code"],
      response_types: ["code"],
      scope: "openid email profile offline_access",
    });
    const { tokens } = await fullLogin(body, undefined, { extra: { scope: "openid email" } });
    expect(tokens.refresh_token).toBeUndefined();
  });

  it("a public client (none) signs in with PKCE; client_secret_post and ES256 ID tokens too", async () => {
    const pub = await registered({ token_endpoint_auth_method: "none" });
    expect(pub.client_secret).toBeUndefined();
    expect(pub.client_secret_expires_at).toBeUndefined();
    await fullLogin(pub);
    const post = await registered({
      token_endpoint_auth_method: "client_secret_post",
      id_token_signed_response_alg: "ES256",
    });
    const { tokens } = await fullLogin(post);
    expect(JSON.parse(atob((tokens.id_token.split(".")[0] as string).replace(/-/g, "+").replace(/_/g, "/"))).alg).toBe(
      "ES256",
    );
  });

  it("a confidential client may register without PKCE; a public one may not", async () => {
    const noPkce = await registered({ require_pkce: false });
    expect(noPkce.require_pkce).toBe(false);
    const { token } = await mintToken();
    await expectError(
      await registerAt("", metadata({ token_endpoint_auth_method: "none", require_pkce: false }), token),
      400,
      "invalid_client_metadata",
    );
  });

  it("a private_key_jwt client registers its keys by value (jwks) or by reference, never both, and gets no secret", async () => {
    const { publicKey } = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
      "sign",
      "verify",
    ])) as CryptoKeyPair;
    const jwk = (await crypto.subtle.exportKey("jwk", publicKey)) as JsonWebKey;
    const client = await registered({
      token_endpoint_auth_method: "private_key_jwt",
      jwks: { keys: [{ kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y, alg: "ES256", kid: "k1" }] },
    });
    expect(client.client_secret).toBeUndefined();
    expect((client.jwks as { keys: unknown[] }).keys).toHaveLength(1);
    const { token } = await mintToken();
    // RFC 7591 §2: jwks and jwks_uri MUST NOT both be present (jwks-uri.test.ts has jwks_uri alone).
    await expectError(
      await registerAt(
        "",
        metadata({
          token_endpoint_auth_method: "private_key_jwt",
          jwks: client.jwks,
          jwks_uri: "https://keys.example.com/jwks",
        }),
        token,
      ),
      400,
      "invalid_client_metadata",
    );
  });

  it("at a tenant: registered with the tenant's token, signs in at the tenant, unknown at the origin", async () => {
    const tenant = await createTenant();
    const client = await registered({}, tenant.id);
    expect(client.registration_client_uri).toBe(`${tenant.issuer}/register/${client.client_id}`);
    const { tokens } = await tenantFullLogin(tenant.id, client);
    expect(tokens.access_token).toBeTruthy();
    const listed = (await (await tenantAdmin(tenant.id, "/clients")).json()) as { clients: Record<string, unknown>[] };
    expect(listed.clients.find((c) => c.client_id === client.client_id)?.registered_via).toBe("dynamic");
    // The same authorization request: the tenant's login page, an error page at the origin.
    const query = `response_type=code&client_id=${client.client_id}&redirect_uri=${encodeURIComponent(client.redirect_uris[0] as string)}&scope=openid&code_challenge=${"a".repeat(43)}&code_challenge_method=S256`;
    expect((await new Browser({ base: baseOf(tenant.id) }).fetch(`/authorize?${query}`)).status).toBe(200);
    expect((await new Browser().fetch(`/authorize?${query}`)).status).toBe(400);
  });
});

describe("invalid metadata is 400 with RFC 7591's codes, never a 500", () => {
  const cases: [string, Record<string, unknown> | string, string][] = [
    ["an http redirect URI off loopback", { redirect_uris: ["http://app.example.com/cb"] }, "invalid_redirect_uri"],
    ["a redirect URI with a fragment", { redirect_uris: ["https://app.example.com/cb#x"] }, "invalid_redirect_uri"],
    ["a wildcard redirect URI", { redirect_uris: ["https://*.example.com/cb"] }, "invalid_redirect_uri"],
    ["a javascript: redirect URI", { redirect_uris: ["javascript:alert(1)"] }, "invalid_redirect_uri"],
    ["no redirect URI for the code grant", { redirect_uris: [] }, "invalid_redirect_uri"],
    ["redirect_uris not a list", { redirect_uris: "https://app.example.com/cb" }, "invalid_redirect_uri"],
    ["response_types token", { response_types: ["token"] }, "invalid_client_metadata"],
    ["response_types id_token", { response_types: ["code", "id_token"] }, "invalid_client_metadata"],
    ["the password grant", { grant_types: ["password"] }, "invalid_client_metadata"],
    ["the implicit grant", { grant_types: ["implicit"] }, "invalid_client_metadata"],
    ["an unknown auth method", { token_endpoint_auth_method: "tls_client_auth" }, "invalid_client_metadata"],
    ["HS256 ID tokens", { id_token_signed_response_alg: "HS256" }, "invalid_client_metadata"],
    ["none-signed ID tokens", { id_token_signed_response_alg: "none" }, "invalid_client_metadata"],
    [
      "pairwise subjects over two hosts without a sector_identifier_uri",
      { subject_type: "pairwise", redirect_uris: ["https://a.example.com/cb", "https://b.example.com/cb"] },
      "invalid_client_metadata",
    ],
    ["an unknown subject_type", { subject_type: "opaque" }, "invalid_client_metadata"],
    ["encrypted request objects", { request_object_encryption_alg: "RSA-OAEP" }, "invalid_client_metadata"],
    ["jwks_uri without private_key_jwt", { jwks_uri: "https://app.example.com/jwks" }, "invalid_client_metadata"],
    ["jwks without private_key_jwt", { jwks: { keys: [] } }, "invalid_client_metadata"],
    ["encrypted ID tokens", { id_token_encrypted_response_alg: "RSA-OAEP" }, "invalid_client_metadata"],
    ["HS256 userinfo", { userinfo_signed_response_alg: "HS256" }, "invalid_client_metadata"],
    ["encrypted userinfo", { userinfo_encrypted_response_alg: "RSA-OAEP" }, "invalid_client_metadata"],
    ["resources (admin only)", { resources: ["https://api.example.com"] }, "invalid_client_metadata"],
    ["branding (admin only)", { branding: {} }, "invalid_client_metadata"],
    ["a scope outside OIDC for a login client", { scope: "openid admin" }, "invalid_client_metadata"],
    ["scope without openid", { scope: "email" }, "invalid_client_metadata"],
    ["a logo_uri that is no URL", { logo_uri: "not a url" }, "invalid_client_metadata"],
    ["contacts not a list", { contacts: "dev@example.com" }, "invalid_client_metadata"],
    ["client_name not a string", { client_name: 42 }, "invalid_client_metadata"],
    ["a body that is not JSON", "{nope", "invalid_client_metadata"],
    ["a JSON array", "[]", "invalid_client_metadata"],
  ];
  for (const [name, body, error] of cases)
    it(`${name}: ${error}`, async () => {
      const { token } = await mintToken();
      const payload = typeof body === "string" ? body : metadata(body);
      const res = await registerAt("", payload, token);
      const answer = await expectError(res, 400, error);
      expect(answer.error_description).toBeTruthy();
    });

  it("pairwise subjects and unsigned request objects may be registered (OIDC Registration §2)", async () => {
    const { token } = await mintToken();
    const res = await registerAt("", metadata({ subject_type: "pairwise", request_object_signing_alg: "none" }), token);
    expect(res.status, await res.clone().text()).toBe(201);
    expect(await res.json()).toMatchObject({ subject_type: "pairwise", request_object_signing_alg: "none" });
  });

  it("a body that is not application/json: invalid_client_metadata; GET /register: 405", async () => {
    const { token } = await mintToken();
    const res = await call("/register", {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/x-www-form-urlencoded" },
      body: "redirect_uris=https://a.example.com/cb",
    });
    await expectError(res, 400, "invalid_client_metadata");
    expect((await call("/register")).status).toBe(405);
  });

  it("any JSON type in any field is a 400 (or a registration), never a 500", async () => {
    const { token } = await mintToken({ multi_use: true });
    const fields = [
      "redirect_uris",
      "post_logout_redirect_uris",
      "token_endpoint_auth_method",
      "grant_types",
      "response_types",
      "scope",
      "client_name",
      "jwks",
      "id_token_signed_response_alg",
      "subject_type",
      "sector_identifier_uri",
      "contacts",
      "logo_uri",
      "require_pkce",
      "allowed_cors_origins",
      "application_type",
    ];
    const values = [1, true, {}, [], [1], [{}], [null], "x".repeat(3000), "", { keys: [{ kty: "oct", k: "AA" }] }];
    for (const field of fields)
      for (const value of values) {
        const res = await registerAt("", metadata({ [field]: value }), token);
        expect([201, 400], `${field}: ${JSON.stringify(value).slice(0, 40)} -> ${res.status}`).toContain(res.status);
      }
  }, 120_000);

  it("ignores metadata Keyway does not know (RFC 7591 §2), leaving it out of the answer", async () => {
    const client = await registered({ default_max_age: 3600, "client_name#ja": "クライアント", frobnicate: true });
    expect(client).not.toHaveProperty("default_max_age");
    expect(client).not.toHaveProperty("frobnicate");
  });
});

describe("client configuration (RFC 7592)", () => {
  it("reads the registration with its access token (the secret is not shown again)", async () => {
    const client = await registered({ logo_uri: "https://cdn.example.com/logo.png" });
    const res = await configure(client);
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      client_id: client.client_id,
      client_name: client.client_name,
      redirect_uris: client.redirect_uris,
      logo_uri: "https://cdn.example.com/logo.png",
      client_secret_expires_at: 0,
      registration_client_uri: client.registration_client_uri,
    });
    expect(body).not.toHaveProperty("client_secret");
    expect(body).not.toHaveProperty("registration_access_token");
  });

  it("refuses a missing or wrong token, another client's token, and an admin-registered client: 401 invalid_token", async () => {
    const client = await registered();
    const other = await registered();
    for (const method of ["GET", "PUT", "DELETE"]) {
      const none = await configure(client, { method, token: null });
      await expectError(none, 401, "invalid_token");
      expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
      await expectError(
        await configure(client, { method, token: `${client.registration_access_token}x` }),
        401,
        "invalid_token",
      );
      await expectError(
        await configure(client, { method, token: other.registration_access_token }),
        401,
        "invalid_token",
      );
    }
    const adminMade = await registerClient();
    const res = await call(`/register/${adminMade.client_id}`, {
      headers: { Authorization: `Bearer ${client.registration_access_token}` },
    });
    await expectError(res, 401, "invalid_token");
    // Still there, unchanged.
    expect((await configure(client)).status).toBe(200);
  });

  it("replaces the metadata (same validation); the new redirect URI signs in, the old one no longer", async () => {
    const client = await registered();
    const newUri = `https://moved${tag()}.example.com/cb`;
    const put = await configure(client, {
      method: "PUT",
      json: {
        client_id: client.client_id,
        client_secret: client.client_secret,
        client_name: "renamed",
        redirect_uris: [newUri],
        grant_types: ["authorization_code", "refresh_token"],
        token_endpoint_auth_method: "client_secret_post",
        registration_client_uri: client.registration_client_uri,
      },
    });
    expect(put.status, await put.clone().text()).toBe(200);
    const body = (await put.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      client_name: "renamed",
      redirect_uris: [newUri],
      token_endpoint_auth_method: "client_secret_post",
      post_logout_redirect_uris: [],
    });
    const moved: TestClient = { ...client, redirect_uris: [newUri], token_endpoint_auth_method: "client_secret_post" };
    await fullLogin(moved);
    const browser = new Browser();
    const old = await browser.fetch(
      `/authorize?response_type=code&client_id=${client.client_id}&redirect_uri=${encodeURIComponent(client.redirect_uris[0] as string)}&scope=openid&code_challenge=${"a".repeat(43)}&code_challenge_method=S256`,
    );
    expect(old.status).toBe(400);
    // The registration access token was not rotated: it still reads the client.
    expect((await configure(client)).status).toBe(200);
  });

  it("replaces the subject type and the request object algorithm too (RFC 7592 §2.2: the whole registration)", async () => {
    const client = await registered();
    const put = await configure(client, {
      method: "PUT",
      json: {
        client_id: client.client_id,
        redirect_uris: client.redirect_uris,
        subject_type: "pairwise",
        request_object_signing_alg: "none",
      },
    });
    expect(put.status, await put.clone().text()).toBe(200);
    expect(await put.json()).toMatchObject({ subject_type: "pairwise", request_object_signing_alg: "none" });
    const row = await env.DB.prepare("SELECT subject_type, request_object_signing_alg FROM clients WHERE client_id = ?")
      .bind(client.client_id)
      .first();
    expect(row).toEqual({ subject_type: "pairwise", request_object_signing_alg: "none" });
  });

  it("refuses a replacement with bad metadata, another client_id, a wrong secret or another kind of authentication", async () => {
    const client = await registered();
    const base = { client_id: client.client_id, redirect_uris: client.redirect_uris };
    const put = (json: Record<string, unknown>) => configure(client, { method: "PUT", json });
    await expectError(await put({ ...base, redirect_uris: ["http://x.example.com/cb"] }), 400, "invalid_redirect_uri");
    await expectError(await put({ ...base, client_id: "kwc_other" }), 400, "invalid_client_metadata");
    await expectError(await put({ redirect_uris: client.redirect_uris }), 400, "invalid_client_metadata");
    await expectError(await put({ ...base, client_secret: "kws_wrong" }), 400, "invalid_client_metadata");
    await expectError(await put({ ...base, token_endpoint_auth_method: "none" }), 400, "invalid_client_metadata");
    await expectError(await put({ ...base, response_types: ["token"] }), 400, "invalid_client_metadata");
    const read = (await (await configure(client)).json()) as Record<string, unknown>;
    expect(read.redirect_uris).toEqual(client.redirect_uris);
    expect(read.client_name).toBe(client.client_name);
  });

  it("deletes the client: its token endpoint, registration and configuration endpoint are gone", async () => {
    const client = await registered();
    const login = await loginForCode(client);
    const res = await configure(client, { method: "DELETE" });
    expect(res.status).toBe(204);
    await expectError(await configure(client), 401, "invalid_token");
    const redeemed = await redeem(client, login.code, login.verifier);
    expect(redeemed.status).toBe(401);
    expect((await admin(`/clients/${client.client_id}`)).status).toBe(404);
  });
});

describe("sector_identifier_uri (OIDC Registration §5)", () => {
  /** Publishes a document on the test's HTTP peer (a loopback address: allowed outside production). */
  async function publish(value: unknown): Promise<string> {
    const name = `sector-${tag()}`;
    const res = await fetch(`http://127.0.0.1:${documentsPort()}/documents/${name}`, {
      method: "PUT",
      headers: { "Content-Type": "application/json" },
      body: typeof value === "string" ? value : JSON.stringify(value),
    });
    expect(res.status).toBe(200);
    return `http://127.0.0.1:${documentsPort()}/documents/${name}`;
  }

  it("is fetched and must list every redirect URI", async () => {
    const md = metadata({ redirect_uris: [`https://s${tag()}.example.com/a`, `https://s${tag()}.example.com/b`] });
    const uris = md.redirect_uris as string[];
    const good = await publish([...uris, "https://other.example.com/cb"]);
    const { token } = await mintToken({ multi_use: true });
    const ok = await registerAt("", { ...md, sector_identifier_uri: good }, token);
    expect(ok.status, await ok.clone().text()).toBe(201);
    expect(((await ok.json()) as Record<string, unknown>).sector_identifier_uri).toBe(good);

    const partial = await publish([uris[0]]);
    const missing = await expectError(
      await registerAt("", { ...md, sector_identifier_uri: partial }, token),
      400,
      "invalid_client_metadata",
    );
    expect(missing.error_description).toContain(uris[1]);
    const notArray = await publish({ redirect_uris: uris });
    await expectError(
      await registerAt("", { ...md, sector_identifier_uri: notArray }, token),
      400,
      "invalid_client_metadata",
    );
    const notJson = await publish("<html>");
    await expectError(
      await registerAt("", { ...md, sector_identifier_uri: notJson }, token),
      400,
      "invalid_client_metadata",
    );
    const absent = `http://127.0.0.1:${documentsPort()}/documents/never-${tag()}`;
    await expectError(
      await registerAt("", { ...md, sector_identifier_uri: absent }, token),
      400,
      "invalid_client_metadata",
    );
    // A redirect is not followed, even to a document that would do.
    const redirected = good.replace("/documents/", "/documents/redirect-");
    const r = await expectError(
      await registerAt("", { ...md, sector_identifier_uri: redirected }, token),
      400,
      "invalid_client_metadata",
    );
    expect(r.error_description).toContain("redirect");
  });

  it("is refused by the webhook sender's address rules before any fetch", async () => {
    const { token } = await mintToken({ multi_use: true });
    for (const uri of [
      "http://sectors.example.com/list.json",
      "https://10.0.0.8/list.json",
      "https://169.254.169.254/latest",
      "https://[fd00::1]/list.json",
      "https://user:pw@sectors.example.com/list.json",
      "ftp://sectors.example.com/list.json",
      "not a url",
    ])
      await expectError(
        await registerAt("", metadata({ sector_identifier_uri: uri }), token),
        400,
        "invalid_client_metadata",
      );
  });
});

describe("the audit trail and webhooks", () => {
  it("records a registration, a replacement and a deletion as client_registration events, client.* webhooks", async () => {
    const minted = await mintToken();
    const res = await registerAt("", metadata(), minted.token);
    const client = (await res.json()) as Registered;
    expect(
      (
        await configure(client, {
          method: "PUT",
          json: { client_id: client.client_id, redirect_uris: client.redirect_uris },
        })
      ).status,
    ).toBe(200);
    expect((await configure(client, { method: "DELETE" })).status).toBe(204);
    for (let s = 0; s < 4; s++) await runAlarmSettled(writeBehindStub("audit", s));
    const { results } = await env.DB.prepare(
      `SELECT kind, client_id, detail FROM ${await auditEvents()} WHERE client_id = ? ORDER BY at`,
    )
      .bind(client.client_id)
      .all<{ kind: string; detail: string }>();
    expect(results.map((r) => [r.kind, JSON.parse(r.detail).action])).toEqual([
      ["client_registration", "created"],
      ["client_registration", "updated"],
      ["client_registration", "deleted"],
    ]);
    expect(JSON.parse(results[0]?.detail ?? "{}").registration_token).toBe(minted.id);
    expect(JSON.stringify(results)).not.toContain(client.registration_access_token);
    const event = auditEvent({ kind: "client_registration", client: "kwc_x", detail: { action: "created" } });
    expect(webhookEventsOf(event)).toEqual([
      { type: "client.created", data: { id: "kwc_x", via: "dynamic_registration" } },
    ]);
  });
});
