import { exportJWK, generateKeyPair, type JWTPayload, SignJWT, UnsecuredJWT } from "jose";
import { describe, expect, it } from "vitest";
import { expectRedirectError, finishLogin, startJson } from "../support/authorize-flow";
import { documentFetches, documentName, documentUrl, publishDocument } from "../support/documents";
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
import { clientRow, readRegistration, registerDynamic } from "../support/registration";

/**
 * Request objects by reference (OIDC Core §6.2, RFC 9101 §5.2; issue 40): `request_uri` at
 * /authorize, fetched only from a URI the client registered (`request_uris`, OIDC Registration §2;
 * RFC 9101 §10.4.1), then processed as a `request` parameter. As the OpenID Foundation's
 * oidcc-request-uri-unsigned and oidcc-request-uri-signed-rs256 send them. The objects are served by
 * the tests' HTTP peer at a loopback address (allowed outside production).
 */

const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

async function keyPair(alg: "RS256" | "ES256" = "RS256") {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), alg, use: "sig", kid: `k-${Math.random().toString(36).slice(2, 10)}` };
  return { privateKey, jwk, alg };
}
type Key = Awaited<ReturnType<typeof keyPair>>;

const sign = (key: Key, claims: JWTPayload) =>
  new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.jwk.kid }).sign(key.privateKey);
const unsigned = (claims: JWTPayload) => new UnsecuredJWT(claims).encode();

const tag = () => Math.random().toString(36).slice(2, 8);

/** A login client that registered a request_uri (a fresh document name) and `extra`. */
async function uriClient(extra: Record<string, unknown> = {}) {
  const name = documentName("ro");
  const t = tag();
  const client = await registerClient({
    redirect_uris: [`https://ru${t}.example.com/cb`, `https://ru${t}.example.com/other`],
    request_uris: [documentUrl(name)],
    ...extra,
  });
  return { client, name, uri: documentUrl(name) };
}

/** The whole request, with iss and aud, as the suite puts it in a request object. */
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

/** The query beside a request_uri: what OIDC Core §6.1 requires there, plus `extra` (null removes). */
function query(client: TestClient, requestUri: string, extra: Record<string, string | null> = {}) {
  const q: Record<string, string | null> = {
    response_type: "code",
    client_id: client.client_id,
    scope: "openid",
    redirect_uri: client.redirect_uris[0] as string,
    state: "query-state",
    request_uri: requestUri,
    ...extra,
  };
  return new URLSearchParams(Object.entries(q).filter((e): e is [string, string] => e[1] !== null)).toString();
}

async function assertionFor(client: TestClient, key: Key) {
  const now = Math.floor(Date.now() / 1000);
  return {
    client_assertion_type: JWT_BEARER,
    client_assertion: await new SignJWT({ jti: crypto.randomUUID(), aud: ISSUER })
      .setProtectedHeader({ alg: key.alg, kid: key.jwk.kid })
      .setIssuer(client.client_id)
      .setSubject(client.client_id)
      .setIssuedAt(now)
      .setExpirationTime(now + 60)
      .sign(key.privateKey),
  };
}

describe("request_uris at registration", () => {
  it("the admin API stores and shows them, and refuses what Keyway could not fetch", async () => {
    const { client, uri } = await uriClient();
    expect(client.request_uris).toEqual([uri]);
    expect(JSON.parse((await clientRow(client.client_id)).request_uris as string)).toEqual([uri]);
    const patched = await admin(`/clients/${client.client_id}`, {
      method: "PATCH",
      json: { request_uris: [uri, "https://rp.example.com/ro#abc"] },
    });
    expect(await patched.json()).toMatchObject({ request_uris: [uri, "https://rp.example.com/ro#abc"] });
    for (const request_uris of [
      ["http://rp.example.com/ro"], // http off loopback
      ["https://user:pw@rp.example.com/ro"],
      ["not a url"],
      "https://rp.example.com/ro", // not a list
      Array.from({ length: 21 }, (_, i) => `https://rp.example.com/ro/${i}`),
    ]) {
      const res = await admin("/clients", {
        method: "POST",
        json: { client_name: "r", redirect_uris: ["https://rp.example.com/cb"], request_uris },
      });
      expect(res.status, JSON.stringify(request_uris).slice(0, 80)).toBe(400);
    }
  });

  it("are registered at <issuer>/register, reflected in the 201 and the RFC 7592 read", async () => {
    const uri = documentUrl(documentName("ro-dyn"));
    const client = await registerDynamic({
      redirect_uris: [`https://rd${tag()}.example.com/cb`],
      request_uris: [uri],
    });
    expect(client.request_uris).toEqual([uri]);
    expect(await readRegistration(client)).toMatchObject({ request_uris: [uri] });
    expect(JSON.parse((await clientRow(client.client_id)).request_uris as string)).toEqual([uri]);
  });

  it("discovery says request_uri is supported, from registered URIs only", async () => {
    const doc = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, unknown>;
    expect(doc.request_uri_parameter_supported).toBe(true);
    expect(doc.require_request_uri_registration).toBe(true);
  });
});

describe("request_uri at /authorize (OIDC Core §6.2, RFC 9101 §5.2)", () => {
  it("fetches a signed object from a registered request_uri and takes it as a request parameter; the login completes", async () => {
    const key = await keyPair("RS256");
    const { client, name } = await uriClient({
      token_endpoint_auth_method: "private_key_jwt",
      jwks: { keys: [key.jwk] },
    });
    const { verifier, challenge } = await pkce();
    await publishDocument(name, await sign(key, objectClaims(client, challenge)), "application/oauth-authz-req+jwt");
    const browser = new Browser();
    // The fragment (a content hash, OIDC Registration §2) is not part of the match.
    const res = await startJson(browser, query(client, `${documentUrl(name)}#v2`, { nonce: "query-nonce" }));
    expect(res.status, await res.clone().text()).toBe(200);
    const { tx } = (await res.json()) as { tx: string };
    const sealed = await openSealed<{ request: Record<string, unknown> }>("tx", tx);
    expect(sealed?.request).toMatchObject({
      client_id: client.client_id,
      redirect_uri: client.redirect_uris[0],
      scope: "openid email",
      state: "object-state",
      nonce: "object-nonce",
      code_challenge: challenge,
    });
    expect(await documentFetches(name)).toBe(1);

    const redirect = await finishLogin(browser, tx);
    expect(redirect.searchParams.get("state")).toBe("object-state");
    const token = await redeem(
      client,
      redirect.searchParams.get("code") as string,
      verifier,
      await assertionFor(client, key),
    );
    expect(token.status, await token.clone().text()).toBe(200);
    const { payload } = await verifyJwt(((await token.json()) as { id_token: string }).id_token);
    expect(payload.nonce).toBe("object-nonce");
  });

  it("takes an unsigned object by reference from a client that registered no request_object_signing_alg, not from one held to RS256", async () => {
    const { client, name, uri } = await uriClient();
    const { challenge } = await pkce();
    await publishDocument(name, unsigned(objectClaims(client, challenge)), "application/jose");
    const res = await startJson(new Browser(), query(client, uri));
    expect(res.status, await res.clone().text()).toBe(200);
    // By value, the same object stays refused (request-object.test.ts): only the registered URI vouches for it.
    const byValue = new URLSearchParams(query(client, uri));
    byValue.delete("request_uri");
    byValue.set("request", unsigned(objectClaims(client, challenge)));
    expectRedirectError(
      await startJson(new Browser(), byValue.toString()),
      client.redirect_uris[0] as string,
      "invalid_request_object",
      "query-state",
    );

    const key = await keyPair("RS256");
    const held = await uriClient({
      token_endpoint_auth_method: "private_key_jwt",
      jwks: { keys: [key.jwk] },
      request_object_signing_alg: "RS256",
    });
    await publishDocument(held.name, unsigned(objectClaims(held.client, challenge)));
    expectRedirectError(
      await startJson(new Browser(), query(held.client, held.uri)),
      held.client.redirect_uris[0] as string,
      "invalid_request_object",
      "query-state",
    );
  });

  it("refuses, as invalid_request_uri at the client, a request_uri not registered or that cannot be fetched, without fetching an unregistered one", async () => {
    const { client, uri } = await uriClient();
    const { challenge } = await pkce();
    const stray = documentName("ro-stray");
    await publishDocument(stray, unsigned(objectClaims(client, challenge)));
    const big = documentName("ro-big");
    const redirected = documentName("ro-redirected");
    await publishDocument(redirected, unsigned(objectClaims(client, challenge)));
    await publishDocument(big, "x".repeat(70_000), "application/jwt");
    const registeredAll = await admin(`/clients/${client.client_id}`, {
      method: "PATCH",
      json: {
        request_uris: [
          uri, // never published: 404
          documentUrl(big),
          documentUrl(redirected).replace("/documents/", "/documents/redirect-"),
          "https://10.0.0.8/ro.jwt", // refused by the address rules
        ],
      },
    });
    expect(registeredAll.status).toBe(200);
    const cases: [string, RegExp][] = [
      [documentUrl(stray), /not one the client registered/],
      [`${documentUrl(stray)}?x=1`, /not one the client registered/],
      [uri, /answered 404/],
      [documentUrl(big), /larger than/],
      [documentUrl(redirected).replace("/documents/", "/documents/redirect-"), /redirects are not followed/],
      ["https://10.0.0.8/ro.jwt", /private, link-local or reserved/],
    ];
    for (const [requestUri, described] of cases) {
      const loc = expectRedirectError(
        await startJson(new Browser(), query(client, requestUri)),
        client.redirect_uris[0] as string,
        "invalid_request_uri",
        "query-state",
      );
      expect(loc.searchParams.get("error_description")).toMatch(described);
    }
    expect(await documentFetches(stray)).toBe(0);
    // With a request as well: invalid_request, nothing fetched.
    expectRedirectError(
      await startJson(new Browser(), query(client, uri, { request: unsigned(objectClaims(client, challenge)) })),
      client.redirect_uris[0] as string,
      "invalid_request",
      "query-state",
    );
  });

  it("shows Keyway's page when the query's redirect URI cannot be trusted, and checks the fetched object as a request", async () => {
    const { client, name, uri } = await uriClient();
    const { challenge } = await pkce();
    for (const redirect of [null, "https://attacker.example.com/cb"]) {
      const res = await call(
        `/authorize?${query(client, documentUrl(documentName("ro-none")), { redirect_uri: redirect })}`,
      );
      expect(res.status).toBe(400);
      expect(res.headers.get("location")).toBeNull();
    }
    // An object for another client, or that is no JWT: invalid_request_object, as a request parameter would be.
    const other = await registerClient();
    for (const body of [unsigned(objectClaims(other, challenge)), "not a request object"]) {
      await publishDocument(name, body);
      expectRedirectError(
        await startJson(new Browser(), query(client, uri)),
        client.redirect_uris[0] as string,
        "invalid_request_object",
        "query-state",
      );
    }
  });

  it("verifies a signed object with a key at the client's jwks_uri; a failing jwks_uri is invalid_request_object", async () => {
    const key = await keyPair("RS256");
    const jwksName = documentName("ro-jwks");
    const jwksUri = await publishDocument(jwksName, { keys: [key.jwk] });
    const { client, name, uri } = await uriClient({ token_endpoint_auth_method: "private_key_jwt", jwks_uri: jwksUri });
    const { challenge } = await pkce();
    await publishDocument(name, await sign(key, objectClaims(client, challenge)));
    const res = await startJson(new Browser(), query(client, uri));
    expect(res.status, await res.clone().text()).toBe(200);

    const broken = await uriClient({
      token_endpoint_auth_method: "private_key_jwt",
      jwks_uri: documentUrl(documentName("ro-jwks-missing")),
    });
    await publishDocument(broken.name, await sign(key, objectClaims(broken.client, challenge)));
    const loc = expectRedirectError(
      await startJson(new Browser(), query(broken.client, broken.uri)),
      broken.client.redirect_uris[0] as string,
      "invalid_request_object",
      "query-state",
    );
    expect(loc.searchParams.get("error_description")).toMatch(/jwks_uri answered 404/);
  });
});
