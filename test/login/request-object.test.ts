import { exportJWK, generateKeyPair, type JWTPayload, SignJWT, UnsecuredJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { expectRedirectError, finishLogin, startJson } from "../support/authorize-flow";
import {
  admin,
  Browser,
  call,
  ISSUER,
  openSealed,
  pkce,
  redeem,
  registerClient,
  type TestClient,
  verifyJwt,
} from "../support/harness";

/**
 * Request objects (OIDC Core §6.1, RFC 9101; issue 40): the `request` parameter at /authorize, as the
 * OpenID Foundation's plans send it (oidcc-unsigned-request-object-supported-correctly-or-rejected-as-unsupported,
 * oidcc-ensure-request-object-with-redirect-uri).
 */

afterEach(() => {
  vi.useRealTimers();
});

const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

type Alg = "RS256" | "ES256";

async function keyPair(alg: Alg) {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), alg, use: "sig", kid: `k-${Math.random().toString(36).slice(2, 8)}` };
  return { privateKey, jwk, alg };
}
type Key = Awaited<ReturnType<typeof keyPair>>;

/** A login client that proves itself, and signs its request objects, with a registered key. */
async function keyClient(alg: Alg = "ES256", extra: Record<string, unknown> = {}) {
  const key = await keyPair(alg);
  const tag = Math.random().toString(36).slice(2, 8);
  const client = await registerClient({
    redirect_uris: [`https://ro${tag}.example.com/cb`, `https://ro${tag}.example.com/other`],
    token_endpoint_auth_method: "private_key_jwt",
    jwks: { keys: [key.jwk] },
    ...extra,
  });
  return { client, key };
}

function sign(key: Key, claims: JWTPayload, header: Record<string, unknown> = {}) {
  return new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.jwk.kid, ...header }).sign(key.privateKey);
}

const unsigned = (claims: JWTPayload) => new UnsecuredJWT(claims).encode();

/** What the conformance suite puts in a request object: the whole request, with iss and aud. */
function objectClaims(client: TestClient, challenge: string, extra: JWTPayload = {}): JWTPayload {
  return {
    iss: client.client_id,
    aud: ISSUER,
    client_id: client.client_id,
    response_type: "code",
    redirect_uri: client.redirect_uris[0],
    scope: "openid email",
    state: "object-state",
    nonce: "object-nonce",
    code_challenge: challenge,
    code_challenge_method: "S256",
    ...extra,
  };
}

/** The query beside a request object: what OIDC Core §6.1 requires there, plus `extra` (null removes). */
function query(client: TestClient, request: string, extra: Record<string, string | null> = {}) {
  const q: Record<string, string | null> = {
    response_type: "code",
    client_id: client.client_id,
    scope: "openid",
    redirect_uri: client.redirect_uris[0] as string,
    state: "query-state",
    request,
    ...extra,
  };
  return new URLSearchParams(Object.entries(q).filter((e): e is [string, string] => e[1] !== null)).toString();
}

/** Steps 2-4 for a transaction begun: the redirect to the client. */

describe("signed request objects (OIDC Core §6.1, RFC 9101)", () => {
  it("takes the client's signed object over the query: its redirect_uri, state, nonce and max_age win, and the login completes", async () => {
    for (const alg of ["RS256", "ES256"] as const) {
      const { client, key } = await keyClient(alg);
      const { verifier, challenge } = await pkce();
      const request = await sign(
        key,
        objectClaims(client, challenge, {
          max_age: 3600,
          claims: { id_token: { name: null } },
          exp: Math.floor(Date.now() / 1000) + 300,
        }),
      );
      const browser = new Browser();
      // As oidcc-ensure-request-object-with-redirect-uri: the query's redirect_uri is not even registered.
      const res = await startJson(
        browser,
        query(client, request, { redirect_uri: "https://attacker.example.com/cb", nonce: "query-nonce" }),
      );
      expect(res.status, await res.clone().text()).toBe(200);
      const { tx } = (await res.json()) as { tx: string };
      const sealed = await openSealed<{ request: Record<string, unknown> }>("tx", tx);
      expect(sealed?.request).toEqual({
        client_id: client.client_id,
        redirect_uri: client.redirect_uris[0],
        scope: "openid email",
        state: "object-state",
        nonce: "object-nonce",
        code_challenge: challenge,
        max_age: 3600,
        requested_claims: { id_token: ["name"] },
      });

      const redirect = await finishLogin(browser, tx);
      expect(`${redirect.origin}${redirect.pathname}`).toBe(client.redirect_uris[0]);
      expect(redirect.searchParams.get("state")).toBe("object-state");
      const now = Math.floor(Date.now() / 1000);
      const assertion = await new SignJWT({ jti: crypto.randomUUID(), aud: ISSUER })
        .setProtectedHeader({ alg, kid: key.jwk.kid })
        .setIssuer(client.client_id)
        .setSubject(client.client_id)
        .setIssuedAt(now)
        .setExpirationTime(now + 60)
        .sign(key.privateKey);
      const token = await redeem(client, redirect.searchParams.get("code") as string, verifier, {
        client_assertion_type: JWT_BEARER,
        client_assertion: assertion,
      });
      expect(token.status, await token.clone().text()).toBe(200);
      const { payload } = await verifyJwt(((await token.json()) as { id_token: string }).id_token);
      expect(payload.nonce).toBe("object-nonce");
      expect(payload.aud).toBe(client.client_id);
    }
  });

  it("keeps the query's parameters the object does not carry (OIDC Core §6.3.3)", async () => {
    const { client, key } = await keyClient();
    const { challenge } = await pkce();
    const claims = objectClaims(client, challenge);
    delete claims.state;
    delete claims.nonce;
    const res = await startJson(
      new Browser(),
      query(client, await sign(key, claims), { state: "from-query", nonce: "nonce-from-query" }),
    );
    expect(res.status).toBe(200);
    const sealed = await openSealed<{ request: Record<string, unknown> }>(
      "tx",
      ((await res.json()) as { tx: string }).tx,
    );
    expect(sealed?.request).toMatchObject({ state: "from-query", nonce: "nonce-from-query", scope: "openid email" });
  });

  it("refuses, as invalid_request_object at the client, every object that is not this client's now", async () => {
    const { client, key } = await keyClient("ES256");
    const { client: other, key: otherKey } = await keyClient("ES256");
    const stranger = await keyPair("ES256");
    const { challenge } = await pkce();
    const now = Math.floor(Date.now() / 1000);
    const good = (extra: JWTPayload = {}) => objectClaims(client, challenge, extra);
    const without = (name: string) => {
      const c = good();
      delete c[name];
      return c;
    };
    const hs256 = await new SignJWT(good())
      .setProtectedHeader({ alg: "HS256" })
      .sign(new TextEncoder().encode("a-shared-secret-of-32-bytes-long!!"));
    const cases: [string, string][] = [
      ["unsigned, from a client that did not register none", unsigned(good())],
      ["signed by a key the client did not register", await sign(stranger, good(), { kid: key.jwk.kid })],
      ["the other client's own object, signed by its key", await sign(otherKey, objectClaims(other, challenge))],
      [
        "naming the other client, signed by this one",
        await sign(key, good({ client_id: other.client_id, iss: other.client_id })),
      ],
      ["client_id of another client, iss this one", await sign(key, good({ client_id: other.client_id }))],
      ["without iss", await sign(key, without("iss"))],
      ["iss another client", await sign(key, good({ iss: other.client_id }))],
      ["without aud", await sign(key, without("aud"))],
      ["aud another issuer", await sign(key, good({ aud: "https://other-issuer.example.com" }))],
      ["aud the authorization endpoint", await sign(key, good({ aud: `${ISSUER}/authorize` }))],
      ["expired", await sign(key, good({ exp: now - 120 }))],
      ["not valid yet", await sign(key, good({ nbf: now + 600 }))],
      ["response_type differing from the query's", await sign(key, good({ response_type: "token" }))],
      ["HS256", hs256],
      ["a request_uri inside", await sign(key, good({ request_uri: "https://rp.example.com/ro" }))],
      ["a parameter that is an object", await sign(key, good({ nonce: { a: 1 } }))],
      ["not a JWT", "eyJ.x.y"],
      ["encrypted (five parts)", "a.b.c.d.e"],
    ];
    for (const [name, request] of cases) {
      const res = await startJson(new Browser(), query(client, request));
      // The object is not trusted: the error goes by the query's redirect URI and state.
      expectRedirectError(res, client.redirect_uris[0] as string, "invalid_request_object", "query-state");
      expect(res.headers.getSetCookie(), name).toEqual([]);
    }
    // The good object passes: each case above fails for its own reason.
    const ok = await startJson(new Browser(), query(client, await sign(key, good())));
    expect(ok.status).toBe(200);
  });

  it("shows Keyway's page when the refused object's redirect URI cannot be trusted", async () => {
    const { client } = await keyClient();
    const stranger = await keyPair("ES256");
    const { challenge } = await pkce();
    // The object names a registered URI, but its signature is not the client's: the query's URI is used, and it is not registered.
    const request = await sign(stranger, objectClaims(client, challenge));
    for (const redirect of [null, "https://attacker.example.com/cb"]) {
      const res = await call(`/authorize?${query(client, request, { redirect_uri: redirect })}`);
      expect(res.status).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    }
  });

  it("needs response_type, client_id and scope with openid in the query (OIDC Core §6.1); an unregistered request_uri is refused", async () => {
    const { client, key } = await keyClient();
    const { challenge } = await pkce();
    const request = await sign(key, objectClaims(client, challenge));
    const uri = client.redirect_uris[0] as string;
    expectRedirectError(
      await call(`/authorize?${query(client, request, { response_type: null })}`),
      uri,
      "invalid_request",
      "query-state",
    );
    expectRedirectError(
      await call(`/authorize?${query(client, request, { scope: "email" })}`),
      uri,
      "invalid_scope",
      "query-state",
    );
    const noClient = await call(`/authorize?${query(client, request, { client_id: null })}`);
    expect(noClient.status).toBe(400);
    expect(noClient.headers.get("location")).toBeNull();
    expectRedirectError(
      await call(`/authorize?${query(client, request, { request_uri: "https://rp.example.com/ro" })}`),
      uri,
      "invalid_request",
      "query-state",
    );
    expectRedirectError(
      await call(`/authorize?${query(client, request, { request: null, request_uri: "https://rp.example.com/ro" })}`),
      uri,
      // Not registered for the client (request-uri.test.ts has request_uri itself).
      "invalid_request_uri",
      "query-state",
    );
  });

  it("checks what the object says after it is proven, and answers by the object's redirect URI and state", async () => {
    const { client, key } = await keyClient();
    const { challenge } = await pkce();
    const request = await sign(key, objectClaims(client, challenge, { scope: "email", state: "object-state" }));
    expectRedirectError(
      await call(`/authorize?${query(client, request, { redirect_uri: client.redirect_uris[1] as string })}`),
      client.redirect_uris[0] as string,
      "invalid_scope",
      "object-state",
    );
  });

  it("holds a client registered with RS256 to RS256", async () => {
    const rsa = await keyPair("RS256");
    const ec = await keyPair("ES256");
    const client = await registerClient({
      redirect_uris: ["https://rs-only.example.com/cb"],
      token_endpoint_auth_method: "private_key_jwt",
      jwks: { keys: [rsa.jwk, ec.jwk] },
      request_object_signing_alg: "RS256",
    });
    const { challenge } = await pkce();
    const byEc = await startJson(new Browser(), query(client, await sign(ec, objectClaims(client, challenge))));
    expectRedirectError(byEc, "https://rs-only.example.com/cb", "invalid_request_object", "query-state");
    const byRsa = await startJson(new Browser(), query(client, await sign(rsa, objectClaims(client, challenge))));
    expect(byRsa.status).toBe(200);
  });
});

describe('unsigned request objects (alg "none", OIDC Core §6.1)', () => {
  it('are taken only from a client registered with request_object_signing_alg "none", which may then send only those', async () => {
    const client = await registerClient({ request_object_signing_alg: "none" });
    expect(client.request_object_signing_alg).toBe("none");
    const { verifier, challenge } = await pkce();
    const browser = new Browser();
    // The conformance suite's shape: iss and aud set, the query with response_type, client_id, scope, redirect_uri.
    const res = await startJson(browser, query(client, unsigned(objectClaims(client, challenge)), { state: null }));
    expect(res.status, await res.clone().text()).toBe(200);
    const { tx } = (await res.json()) as { tx: string };
    expect(await openSealed("tx", tx)).toMatchObject({ request: { state: "object-state", nonce: "object-nonce" } });
    const redirect = await finishLogin(browser, tx);
    expect(redirect.searchParams.get("state")).toBe("object-state");
    expect((await redeem(client, redirect.searchParams.get("code") as string, verifier)).status).toBe(200);

    // prompt=none inside the object: the session answers.
    const silent = await browser.fetch(
      `/authorize?${query(client, unsigned(objectClaims(client, challenge, { prompt: "none", state: "again" })))}`,
    );
    expect(silent.status).toBe(302);
    const loc = new URL(silent.headers.get("location") as string);
    expect(loc.searchParams.get("state")).toBe("again");
    expect(loc.searchParams.get("code")).toBeTruthy();

    // Its iss and aud, when present, are checked; an expired one is refused.
    const uri = client.redirect_uris[0] as string;
    for (const bad of [
      { iss: "kwc_someone_else" },
      { aud: "https://other-issuer.example.com" },
      { client_id: "kwc_someone_else" },
      { exp: Math.floor(Date.now() / 1000) - 60 },
    ]) {
      const refused = await call(`/authorize?${query(client, unsigned(objectClaims(client, challenge, bad)))}`);
      expectRedirectError(refused, uri, "invalid_request_object", "query-state");
    }
    // A signed object from a client that registered none is refused.
    const key = await keyPair("RS256");
    const signed = await call(`/authorize?${query(client, await sign(key, objectClaims(client, challenge)))}`);
    expectRedirectError(signed, uri, "invalid_request_object", "query-state");
  });
});

describe("request_object_signing_alg in the admin API and discovery", () => {
  it("is optional, RS256 and ES256 need the client's jwks, and PATCH changes it", async () => {
    const plain = await registerClient();
    expect(plain.request_object_signing_alg).toBeNull();
    const refused = await admin("/clients", {
      method: "POST",
      json: {
        client_name: "ro without keys",
        redirect_uris: ["https://ro-nokeys.example.com/cb"],
        token_endpoint_auth_method: "client_secret_basic",
        request_object_signing_alg: "RS256",
      },
    });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain("request_object_signing_alg");
    for (const value of ["HS256", "PS256"]) {
      const bad = await admin(`/clients/${plain.client_id}`, {
        method: "PATCH",
        json: { request_object_signing_alg: value },
      });
      expect(bad.status).toBe(400);
    }
    const patched = await admin(`/clients/${plain.client_id}`, {
      method: "PATCH",
      json: { request_object_signing_alg: "none" },
    });
    expect(patched.status).toBe(200);
    expect(((await patched.json()) as TestClient).request_object_signing_alg).toBe("none");
    const cleared = await admin(`/clients/${plain.client_id}`, {
      method: "PATCH",
      json: { request_object_signing_alg: null },
    });
    expect(((await cleared.json()) as TestClient).request_object_signing_alg).toBeNull();
    const { client } = await keyClient("RS256", { request_object_signing_alg: "RS256" });
    expect(client.request_object_signing_alg).toBe("RS256");
  });

  it("says request objects are supported, with the algorithms accepted, and request_uri with registration", async () => {
    const doc = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, unknown>;
    expect(doc.request_parameter_supported).toBe(true);
    expect(doc.request_object_signing_alg_values_supported).toEqual(["RS256", "PS256", "ES256", "none"]);
    expect(doc.request_uri_parameter_supported).toBe(true);
    expect(doc.require_request_uri_registration).toBe(true);
  });
});
