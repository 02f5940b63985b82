import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { documentFetches, documentName, documentUrl, publishDocument } from "../support/documents";
import {
  admin,
  call,
  ISSUER,
  loginForCode,
  pinClock,
  redeem,
  registerClient,
  type TestClient,
  type Tokens,
} from "../support/harness";
import { clientRow, readRegistration, registerDynamic } from "../support/registration";

/**
 * A client's keys by reference (OIDC Registration §2, RFC 7591 §2: `jwks_uri`; issue 40): registered
 * through the admin API or at `<issuer>/register`, fetched when a private_key_jwt assertion is
 * verified, kept per isolate, and fetched again once for a key it does not hold, which is how a
 * client rotates its keys (the OpenID Foundation's oidcc-refresh-token-rp-key-rotation). The JWK Sets
 * are served by the tests' HTTP peer at a loopback address (allowed outside production).
 */

afterEach(() => {
  vi.useRealTimers();
});

const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

async function keyPair(alg: "RS256" | "ES256" = "RS256") {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), alg, use: "sig", kid: `k-${Math.random().toString(36).slice(2, 10)}` };
  return { privateKey, jwk, alg };
}
type Key = Awaited<ReturnType<typeof keyPair>>;

/** Publishes `keys` as a JWK Set under a fresh name; its name and URL. */
async function publishKeys(...keys: Key[]): Promise<{ name: string; uri: string }> {
  const name = documentName("jwks");
  return { name, uri: await publishDocument(name, { keys: keys.map((k) => k.jwk) }) };
}

function assertion(client: TestClient, key: Key) {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ jti: crypto.randomUUID(), aud: ISSUER })
    .setProtectedHeader({ alg: key.alg, kid: key.jwk.kid })
    .setIssuer(client.client_id)
    .setSubject(client.client_id)
    .setIssuedAt(now)
    .setExpirationTime(now + 60)
    .sign(key.privateKey);
}

const withAssertion = async (client: TestClient, key: Key) => ({
  client_assertion_type: JWT_BEARER,
  client_assertion: await assertion(client, key),
});

const post = (path: string, params: Record<string, string>) =>
  call(path, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(params),
  });

/** A machine client (client_credentials) whose keys are at `jwks_uri`. */
const machineClient = (jwksUri: string) =>
  registerClient({
    redirect_uris: [],
    post_logout_redirect_uris: [],
    token_endpoint_auth_method: "private_key_jwt",
    grant_types: ["client_credentials"],
    scope: "reports:read",
    jwks_uri: jwksUri,
  });

async function clientCredentials(client: TestClient, key: Key): Promise<Response> {
  return post("/token", { grant_type: "client_credentials", ...(await withAssertion(client, key)) });
}

async function expectInvalidClient(res: Response, described?: RegExp): Promise<void> {
  const text = await res.text();
  expect(res.status, text).toBe(401);
  const body = JSON.parse(text) as { error: string; error_description: string };
  expect(body.error).toBe("invalid_client");
  if (described) expect(body.error_description).toMatch(described);
}

describe("jwks_uri at registration", () => {
  it("the admin API stores it, shows it, and holds it to one of jwks and jwks_uri, for private_key_jwt only", async () => {
    const key = await keyPair();
    const { uri } = await publishKeys(key);
    const client = await machineClient(uri);
    expect(client).toMatchObject({ jwks_uri: uri, jwks: null, token_endpoint_auth_method: "private_key_jwt" });
    expect(client.client_secret).toBeUndefined();
    expect(await clientRow(client.client_id)).toMatchObject({ jwks_uri: uri, jwks: null });
    expect(await (await admin(`/clients/${client.client_id}`)).json()).toMatchObject({ jwks_uri: uri });

    const base = {
      client_name: "k",
      token_endpoint_auth_method: "private_key_jwt",
      grant_types: ["client_credentials"],
      scope: "reports:read",
    };
    for (const body of [
      { ...base, jwks_uri: uri, jwks: { keys: [key.jwk] } }, // both (RFC 7591 §2)
      { ...base, token_endpoint_auth_method: "client_secret_basic", jwks_uri: uri }, // not a key client
      { ...base, jwks_uri: "http://keys.example.com/jwks" }, // http off loopback
      { ...base, jwks_uri: "https://user:pw@keys.example.com/jwks" },
      { ...base, jwks_uri: "https://keys.example.com/jwks#k" },
      { ...base, jwks_uri: "not a url" },
    ]) {
      const res = await admin("/clients", { method: "POST", json: body });
      expect(res.status, JSON.stringify(body)).toBe(400);
    }

    // The keys move from the jwks_uri to jwks by value and back, by PATCH (jwks: null removes them).
    const byValue = await admin(`/clients/${client.client_id}`, {
      method: "PATCH",
      json: { jwks_uri: null, jwks: { keys: [key.jwk] } },
    });
    expect(byValue.status, await byValue.clone().text()).toBe(200);
    expect(await clientRow(client.client_id)).toMatchObject({ jwks_uri: null });
    const both = await admin(`/clients/${client.client_id}`, { method: "PATCH", json: { jwks_uri: uri } });
    expect(both.status).toBe(400);
    const back = await admin(`/clients/${client.client_id}`, { method: "PATCH", json: { jwks_uri: uri, jwks: null } });
    expect(await back.json()).toMatchObject({ jwks_uri: uri, jwks: null });
  });

  it("is registered at <issuer>/register, reflected in the 201 and the RFC 7592 read, and used", async () => {
    const key = await keyPair();
    const { uri } = await publishKeys(key);
    const tag = Math.random().toString(36).slice(2, 8);
    const client = await registerDynamic({
      redirect_uris: [`https://jwks${tag}.example.com/cb`],
      token_endpoint_auth_method: "private_key_jwt",
      jwks_uri: uri,
      grant_types: ["authorization_code", "refresh_token"],
    });
    expect(client.jwks_uri).toBe(uri);
    expect(client.jwks).toBeUndefined();
    expect(client.client_secret).toBeUndefined();
    expect(await readRegistration(client)).toMatchObject({ jwks_uri: uri });
    expect(await clientRow(client.client_id)).toMatchObject({ jwks_uri: uri, jwks: null, registered_via: "dynamic" });

    const login = await loginForCode(client);
    const res = await redeem(client, login.code, login.verifier, await withAssertion(client, key));
    expect(res.status, await res.clone().text()).toBe(200);
  });
});

describe("private_key_jwt with keys at the jwks_uri", () => {
  it("authenticates at the token, introspection and revocation endpoints, fetching the set once", async () => {
    const key = await keyPair("ES256");
    const { name, uri } = await publishKeys(key);
    const client = await machineClient(uri);
    const token = await clientCredentials(client, key);
    expect(token.status, await token.clone().text()).toBe(200);
    const { access_token } = (await token.json()) as { access_token: string };
    const intro = await post("/introspect", { token: access_token, ...(await withAssertion(client, key)) });
    expect(await intro.json()).toMatchObject({ active: true, client_id: client.client_id });
    const revoked = await post("/revoke", { token: access_token, ...(await withAssertion(client, key)) });
    expect(revoked.status).toBe(200);
    // Kept by this isolate: one fetch for three verifications.
    expect(await documentFetches(name)).toBe(1);
    // A key the set does not hold is refused (after one refetch that does not find it either).
    await expectInvalidClient(await clientCredentials(client, await keyPair("ES256")), /does not verify/);
    expect(await documentFetches(name)).toBe(2);
  });

  it("finds a key rotated at the jwks_uri by one refetch, and refetches for unknown keys at most once per 30 s", async () => {
    const T0 = Date.now();
    const at = pinClock(T0);
    const first = await keyPair();
    const { name, uri } = await publishKeys(first);
    const client = await registerClient({ token_endpoint_auth_method: "private_key_jwt", jwks_uri: uri });
    const login = await loginForCode(client);
    const redeemed = await redeem(client, login.code, login.verifier, await withAssertion(client, first));
    expect(redeemed.status, await redeemed.clone().text()).toBe(200);
    const { refresh_token } = (await redeemed.json()) as Tokens;
    expect(await documentFetches(name)).toBe(1);

    // The client rotates: a new key with a new kid replaces the old one at its jwks_uri.
    at(5_000);
    const second = await keyPair();
    await publishDocument(name, { keys: [second.jwk] });
    const refreshed = await post("/token", {
      grant_type: "refresh_token",
      refresh_token: refresh_token as string,
      ...(await withAssertion(client, second)),
    });
    expect(refreshed.status, await refreshed.clone().text()).toBe(200);
    expect(await documentFetches(name)).toBe(2);
    // The retired key is gone from the kept set with it.
    await expectInvalidClient(
      await post("/token", {
        grant_type: "refresh_token",
        refresh_token: ((await refreshed.json()) as Tokens).refresh_token as string,
        ...(await withAssertion(client, first)),
      }),
    );
    expect(await documentFetches(name)).toBe(2);

    // Unknown kids: no fetch within 30 s of the last refetch, then one, then none again.
    const stranger = await keyPair();
    await expectInvalidClient(await codeGrant(client, stranger));
    expect(await documentFetches(name)).toBe(2);
    at(5_000 + 31_000);
    await expectInvalidClient(await codeGrant(client, stranger));
    expect(await documentFetches(name)).toBe(3);
    await expectInvalidClient(await codeGrant(client, stranger));
    expect(await documentFetches(name)).toBe(3);
    // Past the kept set's 5 minutes, it is fetched afresh, and the current key still works.
    at(5_000 + 6 * 60_000);
    const later = await codeGrant(client, second);
    expect(later.status, await later.clone().text()).toBe(400); // a made-up code: the client was authenticated
    expect(await documentFetches(name)).toBe(4);
  });

  it("answers invalid_client, never a 500, when the jwks_uri fails", async () => {
    const key = await keyPair();
    const missing = documentName("jwks-missing");
    const cases: [string, RegExp][] = [
      [documentUrl(missing), /answered 404/],
      [await publishDocument(documentName("jwks-html"), "<html>", "text/html"), /not JSON/],
      [await publishDocument(documentName("jwks-shape"), { keys: "none" }), /not a JWK Set/],
      [await publishDocument(documentName("jwks-big"), { keys: [], pad: "x".repeat(70_000) }), /larger than/],
      // A redirect is not followed, even to a set that would do.
      [(await publishKeys(key)).uri.replace("/documents/", "/documents/redirect-"), /redirects are not followed/],
      // Refused by the address rules before any fetch (the schema takes any https host).
      ["https://10.0.0.8/jwks.json", /private, link-local or reserved/],
      ["https://169.254.169.254/latest/jwks", /private, link-local or reserved/],
    ];
    for (const [uri, described] of cases) {
      const client = await machineClient(uri);
      await expectInvalidClient(await clientCredentials(client, key), described);
    }
    expect(await documentFetches(missing)).toBe(1);
  });
});

/** A token request the client must authenticate for: an authorization code grant with a made-up code. */
async function codeGrant(client: TestClient, key: Key): Promise<Response> {
  return post("/token", {
    grant_type: "authorization_code",
    code: "made-up",
    redirect_uri: client.redirect_uris[0] as string,
    ...(await withAssertion(client, key)),
  });
}
