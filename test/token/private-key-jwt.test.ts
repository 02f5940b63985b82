import { env } from "cloudflare:test";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { admin, call, ISSUER, pinClock, registerClient, type TestClient, withVars } from "../support/harness";
import { createTenant, at as tenantPath } from "../tenants/support";

afterEach(() => {
  vi.useRealTimers();
});

const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

async function keyPair(alg: "RS256" | "PS256" | "ES256") {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = {
    ...(await exportJWK(publicKey)),
    alg,
    use: "sig",
    kid: `k-${alg}-${Math.random().toString(36).slice(2, 8)}`,
  };
  return { privateKey, jwk };
}

async function keyClient(alg: "RS256" | "PS256" | "ES256" = "ES256", testEnv?: object) {
  const key = await keyPair(alg);
  const client = await registerClient(
    {
      redirect_uris: [],
      post_logout_redirect_uris: [],
      token_endpoint_auth_method: "private_key_jwt",
      grant_types: ["client_credentials"],
      scope: "reports:read",
      jwks: { keys: [key.jwk] },
    },
    testEnv,
  );
  return { client, key };
}

type Key = Awaited<ReturnType<typeof keyPair>>;

function assertion(client: TestClient, key: Key, claims: Record<string, unknown> = {}, lifetime = 60) {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ jti: crypto.randomUUID(), aud: ISSUER, ...claims })
    .setProtectedHeader({ alg: key.jwk.alg, kid: key.jwk.kid })
    .setIssuer(client.client_id)
    .setSubject(client.client_id)
    .setIssuedAt(now)
    .setExpirationTime(now + lifetime)
    .sign(key.privateKey);
}

const post = (path: string, params: Record<string, string>) =>
  call(path, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(params),
  });

const withAssertion = (value: string, extra: Record<string, string> = {}) => ({
  client_assertion_type: JWT_BEARER,
  client_assertion: value,
  ...extra,
});

async function expectError(res: Response, status: number, error: string) {
  expect(res.status, await res.clone().text()).toBe(status);
  expect(((await res.json()) as { error: string }).error).toBe(error);
}

describe("private_key_jwt client authentication (RFC 7523 §2.2, issue 14)", () => {
  it("registers a key client without a secret, and refuses private keys, missing keys and keys on a secret client", async () => {
    const { client } = await keyClient();
    expect(client.client_secret).toBeUndefined();
    expect(client.token_endpoint_auth_method).toBe("private_key_jwt");
    const rsa = await keyPair("RS256");
    const privateJwk = await exportJWK((await generateKeyPair("ES256", { extractable: true })).privateKey);
    const base = {
      client_name: "k",
      token_endpoint_auth_method: "private_key_jwt",
      grant_types: ["client_credentials"],
      scope: "reports:read",
    };
    for (const body of [
      { ...base }, // no jwks
      { ...base, jwks: { keys: [] } },
      { ...base, jwks: { keys: [privateJwk] } }, // a private key
      { ...base, jwks: { keys: [{ kty: "EC", crv: "P-384", x: "a", y: "b" }] } },
      { ...base, token_endpoint_auth_method: "client_secret_basic", jwks: { keys: [rsa.jwk] } },
    ]) {
      const res = await admin("/clients", { method: "POST", json: body });
      expect(res.status, JSON.stringify(body).slice(0, 120)).toBe(400);
    }
    const discovery = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, string[]>;
    expect(discovery.token_endpoint_auth_methods_supported).toContain("private_key_jwt");
    expect(discovery.token_endpoint_auth_signing_alg_values_supported).toEqual(["RS256", "PS256", "ES256"]);
  });

  for (const alg of ["ES256", "RS256", "PS256"] as const)
    it(`authenticates a client by an ${alg} assertion at the token, introspection and revocation endpoints`, async () => {
      const { client, key } = await keyClient(alg);
      const token = await post(
        "/token",
        withAssertion(await assertion(client, key), { grant_type: "client_credentials" }),
      );
      expect(token.status, await token.clone().text()).toBe(200);
      const { access_token } = (await token.json()) as { access_token: string };
      // The same kind of assertion (audience: the issuer) at every endpoint.
      const intro = await post("/introspect", withAssertion(await assertion(client, key), { token: access_token }));
      expect(await intro.json(), "introspect").toMatchObject({ active: true, client_id: client.client_id });
      const revoked = await post(
        "/revoke",
        withAssertion(await assertion(client, key, { aud: ISSUER }), { token: access_token }),
      );
      expect(revoked.status).toBe(200);
    });

  it("uses an assertion once: a replay is invalid_client", async () => {
    const { client, key } = await keyClient();
    const once = await assertion(client, key);
    expect((await post("/token", withAssertion(once, { grant_type: "client_credentials" }))).status).toBe(200);
    await expectError(
      await post("/token", withAssertion(once, { grant_type: "client_credentials" })),
      401,
      "invalid_client",
    );
  });

  it("refuses a wrong key, another client's identity, a wrong audience, an expired or too long-lived assertion, no jti", async () => {
    const { client, key } = await keyClient();
    const other = await keyClient();
    const stranger = await keyPair("ES256");
    const bad = [
      await assertion(client, stranger), // a key the client did not register
      await assertion(other.client, key), // signed with client's key, claims to be the other client
      await assertion(client, key, { aud: "https://elsewhere.example" }),
      // RFC 7523bis: only the issuer identifier, alone; an endpoint or a list could be another server's.
      await assertion(client, key, { aud: `${ISSUER}/token` }),
      await assertion(client, key, { aud: [ISSUER, "https://other-as.example"] }),
      await assertion(client, key, {}, -10), // expired
      await assertion(client, key, {}, 7200), // would have to be remembered two hours
      await new SignJWT({})
        .setProtectedHeader({ alg: "ES256", kid: key.jwk.kid })
        .setIssuer(client.client_id)
        .setSubject(client.client_id)
        .setAudience(ISSUER)
        .setExpirationTime("1m")
        .sign(key.privateKey), // no jti
      "not-a-jwt",
    ];
    for (const value of bad)
      await expectError(
        await post("/token", withAssertion(value, { grant_type: "client_credentials" })),
        401,
        "invalid_client",
      );
    // A key client cannot fall back to a secret, and an assertion cannot come with one.
    await expectError(
      await post("/token", { grant_type: "client_credentials", client_id: client.client_id, client_secret: "kws_x" }),
      401,
      "invalid_client",
    );
    await expectError(
      await post(
        "/token",
        withAssertion(await assertion(client, key), { grant_type: "client_credentials", client_secret: "kws_x" }),
      ),
      400,
      "invalid_request",
    );
    await expectError(
      await post("/token", {
        grant_type: "client_credentials",
        client_assertion_type: "urn:other",
        client_assertion: "x",
      }),
      400,
      "invalid_request",
    );
  });

  it("says which check a refused assertion failed, without a Basic challenge (issue 27 item 4)", async () => {
    const { client, key } = await keyClient();
    const stranger = await keyPair("ES256");
    const cases: [string, RegExp][] = [
      [await assertion(client, key, { aud: `${ISSUER}/token` }), /aud must be the issuer identifier .* alone/],
      [await assertion(client, key, { aud: [ISSUER, "https://other-as.example"] }), /aud must be the issuer/],
      [await assertion(client, key, {}, -10), /expired/],
      [await assertion(client, key, {}, 3700), /exp may be at most 3600 s ahead/],
      [await assertion(client, stranger), /signature does not verify/],
    ];
    for (const [value, described] of cases) {
      const res = await post("/token", withAssertion(value, { grant_type: "client_credentials" }));
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBeNull();
      const body = (await res.json()) as { error: string; error_description: string };
      expect(body.error).toBe("invalid_client");
      expect(body.error_description).toMatch(described);
    }
  });

  it("keeps an assertion single use across two revocation-store switches within its lifetime (issue 27 item 8)", async () => {
    const T0 = Date.now();
    const iso = (ms: number) => new Date(ms).toISOString();
    const e = withVars({
      SHARDS: JSON.stringify({
        session: [3],
        challenge: [3],
        code: [3],
        refresh: [3],
        // Two new generations, a minute apart, both within one assertion's 5 minutes.
        revocation: [3, { shards: 5, from: iso(T0 + 60_000) }, { shards: 7, from: iso(T0 + 120_000) }],
      }),
    });
    const at = pinClock(T0);
    const { client, key } = await keyClient("ES256", e);
    const send = (value: string) =>
      call(
        "/token",
        {
          method: "POST",
          headers: { "Content-Type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams(withAssertion(value, { grant_type: "client_credentials" })),
        },
        e,
      );
    at(30_000);
    const once = await assertion(client, key, {}, 250);
    expect((await send(once)).status).toBe(200);
    // After both switches, the replay is still refused.
    at(150_000);
    await expectError(await send(once), 401, "invalid_client");
  });
});

/**
 * The policy `client_assertion_token_endpoint_audience` (default false): where true, an assertion's
 * `aud` may also be the tenant's own token endpoint URL, alone (a string or a one-element array), as
 * OIDC Core §9 advised and the OpenID Foundation's suite sends; never another value, never several.
 */
describe("client_assertion_token_endpoint_audience (OIDC Core §9 against RFC 7523bis)", () => {
  const postAt = (path: string, params: Record<string, string>, testEnv: object = env) =>
    call(
      path,
      {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(params),
      },
      testEnv,
    );
  const clientCredentials = (value: string, path = "/token", testEnv: object = env) =>
    postAt(path, withAssertion(value, { grant_type: "client_credentials" }), testEnv);

  /** Each audience an assertion is sent with, and whether the server takes it. */
  async function expectAudiences(
    client: TestClient,
    key: Key,
    cases: [unknown, boolean][],
    path = "/token",
    testEnv: object = env,
  ) {
    for (const [aud, taken] of cases) {
      const res = await clientCredentials(await assertion(client, key, { aud }), path, testEnv);
      if (taken) expect(res.status, `${JSON.stringify(aud)}: ${await res.clone().text()}`).toBe(200);
      else {
        expect(res.status, JSON.stringify(aud)).toBe(401);
        const body = (await res.json()) as { error: string; error_description: string };
        expect(body.error).toBe("invalid_client");
        expect(body.error_description, JSON.stringify(aud)).toMatch(/aud must be the issuer identifier/);
      }
    }
  }

  it("off (the default): only the issuer identifier; the token endpoint URL is refused", async () => {
    const { client, key } = await keyClient();
    await expectAudiences(client, key, [
      [ISSUER, true],
      [[ISSUER], true],
      [`${ISSUER}/token`, false],
      [[`${ISSUER}/token`], false],
    ]);
  });

  it("on: the token endpoint URL alone too, never another endpoint, another server's, or several values", async () => {
    const on = withVars({
      POLICY: JSON.stringify({ client_cache_seconds: 0, client_assertion_token_endpoint_audience: true }),
    });
    const { client, key } = await keyClient("ES256", on);
    await expectAudiences(
      client,
      key,
      [
        [ISSUER, true],
        [`${ISSUER}/token`, true],
        [[`${ISSUER}/token`], true],
        [[`${ISSUER}/token`, ISSUER], false],
        [[ISSUER, `${ISSUER}/token`], false],
        [[`${ISSUER}/token`, "https://other-as.example/token"], false],
        [`${ISSUER}/revoke`, false],
        [`${ISSUER}/token/`, false],
        [`${ISSUER}/t/other/token`, false],
        ["https://other-as.example/token", false],
      ],
      "/token",
      on,
    );
    // The same at introspection: the audience names the token endpoint, wherever it is presented.
    const intro = await postAt(
      "/introspect",
      withAssertion(await assertion(client, key, { aud: `${ISSUER}/token` }), { token: "x" }),
      on,
    );
    expect(intro.status, await intro.clone().text()).toBe(200);
  });

  it("a tenant sets it for itself: its own token endpoint only; another tenant and the origin keep the default", async () => {
    const open = await createTenant({ policy: { client_assertion_token_endpoint_audience: true } });
    const closed = await createTenant();
    expect(open.policy).toMatchObject({ client_assertion_token_endpoint_audience: true });
    const register = async (tenant: string) => {
      const key = await keyPair("RS256");
      const client = await registerClient(
        {
          redirect_uris: [],
          post_logout_redirect_uris: [],
          token_endpoint_auth_method: "private_key_jwt",
          grant_types: ["client_credentials"],
          scope: "reports:read",
          jwks: { keys: [key.jwk] },
        },
        env,
        tenant,
      );
      return { client, key };
    };
    const a = await register(open.id);
    await expectAudiences(
      a.client,
      a.key,
      [
        [open.issuer, true],
        [`${open.issuer}/token`, true],
        [`${ISSUER}/token`, false], // the origin's token endpoint is another issuer's
        [`${closed.issuer}/token`, false],
      ],
      tenantPath(open.id, "/token"),
    );
    const b = await register(closed.id);
    await expectAudiences(
      b.client,
      b.key,
      [
        [closed.issuer, true],
        [`${closed.issuer}/token`, false],
      ],
      tenantPath(closed.id, "/token"),
    );
    // The origin (default tenant) is unchanged by a tenant's policy.
    const origin = await keyClient();
    await expectAudiences(origin.client, origin.key, [[`${ISSUER}/token`, false]]);
  });
});
