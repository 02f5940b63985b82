import { env } from "cloudflare:test";
import { createLocalJWKSet, decodeJwt, jwtVerify } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import {
  admin,
  Browser,
  call,
  fullLogin,
  ISSUER,
  registerClient,
  type TestClient,
  type Tokens,
  uniqueEmail,
} from "../support/harness";
import { at, createTenant, registerTenantClient, tenantCode, tenantFullLogin, tenantToken } from "./support";

/**
 * Tenants are a hard boundary (issue 23, CONTRACT §8): every kind of id and token one tenant issued is
 * refused by another as if made up, before any Durable Object call where the id says its tenant.
 */

async function jwksOf(tenant: string) {
  const res = await call(at(tenant, "/jwks.json"));
  expect(res.status).toBe(200);
  return (await res.json()) as { keys: { kid: string }[] };
}

async function doCalls(): Promise<number> {
  const res = await admin("/stats");
  return ((await res.json()) as { totals: { durable_object_calls: number } }).totals.durable_object_calls;
}

/** What `step` cost in Durable Object calls (the platform's counters). */
async function callsOf(step: () => Promise<unknown>): Promise<number> {
  const before = await doCalls();
  await step();
  return (await doCalls()) - before;
}

describe("tenants: each its own issuer, discovery and keys", () => {
  it("serves a tenant's discovery under /t/<tenant>, every endpoint under its issuer", async () => {
    const t = await createTenant();
    expect(t.issuer).toBe(`${ISSUER}/t/${t.id}`);
    const res = await call(at(t.id, "/.well-known/openid-configuration"));
    expect(res.status).toBe(200);
    const doc = (await res.json()) as Record<string, string>;
    expect(doc.issuer).toBe(t.issuer);
    for (const key of [
      "authorization_endpoint",
      "token_endpoint",
      "userinfo_endpoint",
      "jwks_uri",
      "revocation_endpoint",
      "introspection_endpoint",
      "end_session_endpoint",
    ])
      expect(doc[key], key).toMatch(new RegExp(`^${t.issuer}/`));
    // RFC 8414 §3.1's form of the same document (the well-known segment before the issuer's path).
    const rfc8414 = await call(`/.well-known/openid-configuration/t/${t.id}`);
    expect(rfc8414.status).toBe(200);
    expect(((await rfc8414.json()) as { issuer: string }).issuer).toBe(t.issuer);
    // The origin's own discovery is the default tenant's, unchanged.
    const own = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, string>;
    expect(own.issuer).toBe(ISSUER);
  });

  it("signs with the tenant's own keys: none shared with another tenant or the default", async () => {
    const [a, b] = [await createTenant(), await createTenant()];
    const kids = async (t: string) => new Set((await jwksOf(t)).keys.map((k) => k.kid));
    const [ka, kb, kd] = [await kids(a.id), await kids(b.id), await kids("default")];
    expect(ka.size).toBe(2);
    for (const kid of ka) {
      expect(kb.has(kid)).toBe(false);
      expect(kd.has(kid)).toBe(false);
    }
  });

  it("a tenant's ID token verifies with its issuer and JWKS, and with no other", async () => {
    const [a, b] = [await createTenant(), await createTenant()];
    const client = await registerTenantClient(a.id);
    const { tokens } = await tenantFullLogin(a.id, client);
    const idToken = decodeJwt(tokens.id_token);
    expect(idToken.iss).toBe(a.issuer);
    expect(decodeJwt(tokens.access_token).iss).toBe(a.issuer);
    await jwtVerify(tokens.id_token, createLocalJWKSet((await jwksOf(a.id)) as never), {
      issuer: a.issuer,
      audience: client.client_id,
    });
    for (const other of [b.id, "default"])
      await expect(jwtVerify(tokens.id_token, createLocalJWKSet((await jwksOf(other)) as never))).rejects.toThrow();
  });

  it("rotates a tenant's keys through its own admin route, leaving other tenants' keys alone", async () => {
    const [a, b] = [await createTenant(), await createTenant()];
    const beforeB = (await jwksOf(b.id)).keys.map((k) => k.kid).sort();
    const rotated = await admin(`/tenants/${a.id}/keys/rotate`, { method: "POST" });
    expect(rotated.status).toBe(200);
    const { published } = (await rotated.json()) as { published: { kid: string }[] };
    expect(published).toHaveLength(2);
    const kidsA = (await jwksOf(a.id)).keys.map((k) => k.kid);
    for (const p of published) expect(kidsA).toContain(p.kid);
    expect((await jwksOf(b.id)).keys.map((k) => k.kid).sort()).toEqual(beforeB);
    const { results } = await env.DB.prepare("SELECT tenant FROM signing_keys WHERE kid = ?")
      .bind(published[0]?.kid)
      .all<{ tenant: string }>();
    expect(results).toEqual([{ tenant: a.id }]);
  });
});

describe("tenants: nothing of one is reachable from another", () => {
  let a: { id: string; issuer: string };
  let b: { id: string; issuer: string };
  let clientA: TestClient;
  let clientB: TestClient;
  let login: Awaited<ReturnType<typeof tenantFullLogin>>;

  beforeAll(async () => {
    a = await createTenant();
    b = await createTenant();
    clientA = await registerTenantClient(a.id);
    clientB = await registerTenantClient(b.id);
    login = await tenantFullLogin(a.id, clientA);
  });

  it("names the tenant in every id it issues, under the MAC", () => {
    const refresh = login.tokens.refresh_token as string;
    // A refresh token is its family's grant id and a secret.
    expect(refresh.startsWith(`gr_${a.id}~`)).toBe(true);
    expect(login.tx.startsWith(`tx_${a.id}~`)).toBe(true);
    expect(decodeJwt(login.tokens.access_token).jti).toMatch(new RegExp(`^at_${a.id}~`));
    expect(decodeJwt(login.tokens.id_token).sid).toMatch(new RegExp(`^sid_${a.id}~`));
    expect(login.code.startsWith(`ac_${a.id}~`)).toBe(true);
  });

  it("a client of A does not exist at B", async () => {
    const res = await call(
      at(
        b.id,
        `/authorize?response_type=code&client_id=${clientA.client_id}&redirect_uri=${encodeURIComponent(clientA.redirect_uris[0] as string)}&scope=openid&code_challenge=x&code_challenge_method=S256`,
      ),
    );
    expect(res.status).toBe(400);
    const token = await tenantToken(b.id, clientA, { grant_type: "refresh_token", refresh_token: "x" });
    expect(token.status).toBe(401);
    expect(((await token.json()) as { error: string }).error).toBe("invalid_client");
    // Nor at the default tenant's endpoints.
    expect((await tenantToken("default", clientA, { grant_type: "refresh_token", refresh_token: "x" })).status).toBe(
      401,
    );
  });

  it("A's refresh token and authorization code at B are refused before any Durable Object call", async () => {
    const refresh = login.tokens.refresh_token as string;
    const calls = await callsOf(async () => {
      const res = await tenantToken(b.id, clientB, { grant_type: "refresh_token", refresh_token: refresh });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe("invalid_grant");
      const code = await tenantToken(b.id, clientB, {
        grant_type: "authorization_code",
        code: login.code,
        redirect_uri: clientB.redirect_uris[0] as string,
        code_verifier: login.verifier,
      });
      expect(code.status).toBe(400);
      expect(((await code.json()) as { error: string }).error).toBe("invalid_grant");
    });
    expect(calls).toBe(0);
    // And still good where it was issued.
    const own = await tenantToken(a.id, clientA, { grant_type: "refresh_token", refresh_token: refresh });
    expect(own.status, await own.clone().text()).toBe(200);
    login.tokens = (await own.json()) as Tokens;
  });

  it("A's access token is refused by B's userinfo and introspection, and by the default tenant's", async () => {
    const token = login.tokens.access_token;
    expect((await call(at(a.id, "/userinfo"), { headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);
    for (const t of [b.id, "default"]) {
      const res = await call(at(t, "/userinfo"), { headers: { Authorization: `Bearer ${token}` } });
      expect(res.status, t).toBe(401);
      expect(res.headers.get("www-authenticate")).toContain('error="invalid_token"');
    }
    const introspected = await tenantToken(b.id, clientB, { token }, "/introspect");
    expect(introspected.status).toBe(200);
    expect(await introspected.json()).toEqual({ active: false });
  });

  it("revoking A's refresh token at B changes nothing at A (RFC 7009: 200 for a token it does not know)", async () => {
    const refresh = login.tokens.refresh_token as string;
    expect((await tenantToken(b.id, clientB, { token: refresh }, "/revoke")).status).toBe(200);
    const own = await tenantToken(a.id, clientA, { grant_type: "refresh_token", refresh_token: refresh });
    expect(own.status, await own.clone().text()).toBe(200);
    login.tokens = (await own.json()) as Tokens;
  });

  it("A's login transaction and session cookie mean nothing at B", async () => {
    const browser = login.browser;
    // The session: B asks for a login (prompt=none answers login_required), making no session call.
    const query = new URLSearchParams({
      response_type: "code",
      client_id: clientB.client_id,
      redirect_uri: clientB.redirect_uris[0] as string,
      scope: "openid",
      state: "s",
      code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
      code_challenge_method: "S256",
      prompt: "none",
    });
    const res = await browser.fetch(`${ISSUER}${at(b.id, `/authorize?${query}`)}`);
    expect(res.status).toBe(302);
    expect(new URL(res.headers.get("location") as string).searchParams.get("error")).toBe("login_required");
    // The transaction: B refuses it as unknown.
    const gen = await browser.postJson(`${ISSUER}${at(b.id, "/email-code/generate")}`, {
      tx: login.tx,
      email: uniqueEmail(),
    });
    expect(gen.status).toBe(400);
    expect(((await gen.json()) as { error: string }).error).toBe("invalid_request");
  });

  it("one address is two users in two tenants, and a third in the default", async () => {
    const email = uniqueEmail("shared");
    const inA = await tenantFullLogin(a.id, clientA, email);
    const inB = await tenantFullLogin(b.id, clientB, email);
    const inDefault = await fullLogin(await registerClient(), email);
    const subs = [inA, inB, inDefault].map((l) => decodeJwt(l.tokens.id_token).sub);
    expect(new Set(subs).size).toBe(3);
    const { results } = await env.DB.prepare("SELECT tenant FROM users WHERE email = ? ORDER BY tenant")
      .bind(email)
      .all<{ tenant: string }>();
    expect(results.map((r) => r.tenant).sort()).toEqual([a.id, b.id, "default"].sort());
    // Each tenant's admin finds only its own.
    const found = await admin(`/tenants/${a.id}/users?email=${encodeURIComponent(email)}`);
    const users = ((await found.json()) as { users: { id: string }[] }).users;
    expect(users.map((u) => u.id)).toEqual([subs[0]]);
  });

  it("a default-tenant refresh token is refused at a tenant, before any call", async () => {
    const { tokens } = await fullLogin(await registerClient());
    const calls = await callsOf(async () => {
      const res = await tenantToken(a.id, clientA, {
        grant_type: "refresh_token",
        refresh_token: tokens.refresh_token as string,
      });
      expect(res.status).toBe(400);
    });
    expect(calls).toBe(0);
  });
});

describe("tenants: per-address limits count per tenant", () => {
  it("an address locked out in A still signs in at B", async () => {
    const policy = { email_failures_per_hour: 2, email_failures_per_hour_all_sources: 2 };
    const a = await createTenant({ policy });
    const b = await createTenant({ policy });
    const [clientA, clientB] = [await registerTenantClient(a.id), await registerTenantClient(b.id)];
    const email = uniqueEmail("locked");
    const browser = new Browser();
    const init = await browser.fetch(
      at(
        a.id,
        `/authorize?${new URLSearchParams({
          response_type: "code",
          client_id: clientA.client_id,
          redirect_uri: clientA.redirect_uris[0] as string,
          scope: "openid",
          code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
          code_challenge_method: "S256",
        })}`,
      ),
      { headers: { Accept: "application/json" } },
    );
    const { tx } = (await init.json()) as { tx: string };
    expect((await browser.postJson(at(a.id, "/email-code/generate"), { tx, email })).status).toBe(200);
    const right = await tenantCode(a.id, email);
    const wrong = right === "000000" ? "000001" : "000000";
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++)
      statuses.push((await browser.postJson(at(a.id, "/email-code/verify"), { tx, email, code: wrong })).status);
    expect(statuses).toEqual([400, 400, 429]);
    // The tenant's policy (2 an hour), not the deployment's (10), and only in A.
    const { tokens } = await tenantFullLogin(b.id, clientB, email);
    expect(decodeJwt(tokens.id_token).iss).toBe(b.issuer);
  });
});

describe("tenants: the MAC covers the tenant", () => {
  it("an id re-labelled with another tenant is refused there, before any call", async () => {
    const [a, b] = [await createTenant(), await createTenant()];
    const clientB = await registerTenantClient(b.id);
    const { tokens } = await tenantFullLogin(a.id, await registerTenantClient(a.id));
    const relabelled = (tokens.refresh_token as string).replace(`gr_${a.id}~`, `gr_${b.id}~`);
    const calls = await callsOf(async () => {
      const res = await tenantToken(b.id, clientB, { grant_type: "refresh_token", refresh_token: relabelled });
      expect(res.status).toBe(400);
    });
    expect(calls).toBe(0);
  });
});

describe("tenants: CORS origins are a tenant's", () => {
  it("a preflight at B for an origin only A's client registered is refused", async () => {
    const [a, b] = [await createTenant(), await createTenant()];
    const origin = `https://spa-${a.id}.example.com`;
    await registerTenantClient(a.id, { token_endpoint_auth_method: "none", allowed_cors_origins: [origin] });
    const preflight = (t: string) =>
      call(at(t, "/token"), {
        method: "OPTIONS",
        headers: { Origin: origin, "Access-Control-Request-Method": "POST" },
      });
    expect((await preflight(a.id)).status).toBe(204);
    expect((await preflight(b.id)).status).toBe(403);
    expect((await preflight("default")).status).toBe(403);
  });
});
