import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { expectRedirectError, finishLogin, startJson } from "../support/authorize-flow";
import {
  Browser,
  basicAuth,
  call,
  ISSUER,
  openSealed,
  pinClock,
  pkce,
  redeem,
  registerClient,
  sealedIdPart,
  sha256,
  sql,
  stubForId,
  type TestClient,
  withVars,
} from "../support/harness";

afterEach(() => {
  vi.useRealTimers();
});

/**
 * Pushed authorization requests (RFC 9126; issue 41): the request is pushed to /par with client
 * authentication and checked there, then named at /authorize by its request_uri, once, for a short
 * while; the query's other parameters count for nothing.
 */

const URN = "urn:ietf:params:oauth:request_uri:";

/** The authorization request's parameters, as a client pushes them. */
function requestParams(client: TestClient, challenge: string, extra: Record<string, string> = {}) {
  return {
    response_type: "code",
    client_id: client.client_id,
    redirect_uri: client.redirect_uris[0] as string,
    scope: "openid email",
    state: "par-state",
    nonce: "par-nonce",
    code_challenge: challenge,
    code_challenge_method: "S256",
    ...extra,
  };
}

function push(client: TestClient, params: Record<string, string>, testEnv?: object) {
  return call(
    "/par",
    {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Authorization: basicAuth(client) },
      body: new URLSearchParams(params),
    },
    testEnv,
  );
}

async function pushed(client: TestClient, challenge: string, extra: Record<string, string> = {}) {
  const res = await push(client, requestParams(client, challenge, extra));
  expect(res.status, await res.clone().text()).toBe(201);
  expect(res.headers.get("cache-control")).toContain("no-store");
  return (await res.json()) as { request_uri: string; expires_in: number };
}

const byReference = (client: TestClient, requestUri: string) =>
  new URLSearchParams({ client_id: client.client_id, request_uri: requestUri }).toString();

describe("the PAR endpoint", () => {
  it("answers 201 with a request_uri URN good for 60 s, and discovery names the endpoint", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const body = await pushed(client, challenge);
    expect(body.request_uri.startsWith(URN)).toBe(true);
    expect(body.expires_in).toBe(60);
    const doc = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, unknown>;
    expect(doc.pushed_authorization_request_endpoint).toBe(`${ISSUER}/par`);
    expect(doc.require_pushed_authorization_requests).toBe(false);
  });

  it("keeps the request sealed: nothing of it is readable in the request_uri", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const { request_uri } = await pushed(client, challenge, { state: "secret-state-value" });
    expect(request_uri).not.toContain("secret-state-value");
    expect(atob(request_uri.split(".")[1]?.replace(/-/g, "+").replace(/_/g, "/") ?? "")).not.toContain("secret");
    const opened = await openSealed<{ params: Record<string, string> }>("par", request_uri.slice(URN.length));
    expect(opened?.params.state).toBe("secret-state-value");
  });

  it("authenticates the client: no or a wrong secret is invalid_client, 401", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const params = requestParams(client, challenge);
    const none = await call("/par", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(params),
    });
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: string }).error).toBe("invalid_client");
    const wrong = await push({ ...client, client_secret: "not-the-secret" }, params);
    expect(wrong.status).toBe(401);
  });

  it("checks the request as /authorize would, answering JSON errors and redirecting nothing", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const cases: [Record<string, string>, string][] = [
      [{ redirect_uri: "https://evil.example.com/cb" }, "invalid_request"],
      [{ response_type: "token" }, "unsupported_response_type"],
      [{ code_challenge_method: "plain" }, "invalid_request"],
      [{ scope: "email" }, "invalid_scope"],
      [{ request_uri: `${URN}x` }, "invalid_request"],
    ];
    for (const [extra, error] of cases) {
      const res = await push(client, requestParams(client, challenge, extra));
      expect(res.status, JSON.stringify(extra)).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      const body = (await res.json()) as { error: string; error_description: string };
      expect(body.error, JSON.stringify(body)).toBe(error);
      expect(body.error_description.length).toBeGreaterThan(0);
    }
    // A client_id other than the authenticated client's is refused as its authentication.
    const other = await push(client, requestParams(client, challenge, { client_id: "someone-else" }));
    expect(other.status).toBe(401);
    const get = await call("/par");
    expect(get.status).toBe(405);
  });

  it("takes a signed request object in the pushed body (RFC 9126 §3), its parameters alone", async () => {
    const { privateKey, publicKey } = await generateKeyPair("PS256", { extractable: true });
    const jwk = { ...(await exportJWK(publicKey)), alg: "PS256", use: "sig", kid: "par-ps256" };
    const client = await registerClient({
      token_endpoint_auth_method: "private_key_jwt",
      jwks: { keys: [jwk] },
      redirect_uris: ["https://par-ro.example.com/cb"],
    });
    const { verifier, challenge } = await pkce();
    const now = Math.floor(Date.now() / 1000);
    const sign = (claims: Record<string, unknown>) =>
      new SignJWT(claims).setProtectedHeader({ alg: "PS256", kid: "par-ps256" }).sign(privateKey);
    const request = await sign({
      iss: client.client_id,
      aud: ISSUER,
      exp: now + 60,
      nbf: now,
      ...requestParams(client, challenge, { redirect_uri: "https://par-ro.example.com/cb", state: "from-object" }),
    });
    const assertion = await sign({
      iss: client.client_id,
      sub: client.client_id,
      aud: ISSUER,
      jti: crypto.randomUUID(),
      exp: now + 60,
    });
    const res = await call("/par", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        client_id: client.client_id,
        request,
        client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        client_assertion: assertion,
      }),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    const { request_uri } = (await res.json()) as { request_uri: string };
    const browser = new Browser();
    const start = await startJson(browser, byReference(client, request_uri));
    expect(start.status, await start.clone().text()).toBe(200);
    const { tx } = (await start.json()) as { tx: string };
    const done = await finishLogin(browser, tx);
    expect(done.searchParams.get("state")).toBe("from-object");
    expect(verifier.length).toBeGreaterThan(0);
  });
});

describe("private_key_jwt at the PAR endpoint", () => {
  it("takes the issuer alone as the assertion's audience, even where the token endpoint may be one", async () => {
    const testEnv = withVars({
      POLICY: JSON.stringify({ client_cache_seconds: 0, client_assertion_token_endpoint_audience: true }),
    });
    const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true });
    const jwk = { ...(await exportJWK(publicKey)), alg: "ES256", use: "sig", kid: "par-aud" };
    const client = await registerClient(
      { token_endpoint_auth_method: "private_key_jwt", jwks: { keys: [jwk] } },
      testEnv,
    );
    const { challenge } = await pkce();
    const withAud = async (aud: unknown) => {
      const now = Math.floor(Date.now() / 1000);
      const assertion = await new SignJWT({ aud: aud as string, jti: crypto.randomUUID() })
        .setProtectedHeader({ alg: "ES256", kid: "par-aud" })
        .setIssuer(client.client_id)
        .setSubject(client.client_id)
        .setIssuedAt(now)
        .setExpirationTime(now + 60)
        .sign(privateKey);
      return call(
        "/par",
        {
          method: "POST",
          headers: { "Content-Type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            ...requestParams(client, challenge),
            client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            client_assertion: assertion,
          }),
        },
        testEnv,
      );
    };
    for (const aud of [`${ISSUER}/token`, `${ISSUER}/par`, [ISSUER, `${ISSUER}/token`]]) {
      const res = await withAud(aud);
      expect(res.status, JSON.stringify(aud)).toBe(401);
      expect(((await res.json()) as { error: string }).error).toBe("invalid_client");
    }
    expect((await withAud(ISSUER)).status).toBe(201);
  });
});

describe("/authorize with a pushed request_uri", () => {
  it("logs in with the pushed parameters and ignores the query's others", async () => {
    const client = await registerClient();
    const { verifier, challenge } = await pkce();
    const { request_uri } = await pushed(client, challenge);
    const browser = new Browser();
    const query = `${byReference(client, request_uri)}&state=from-query&redirect_uri=${encodeURIComponent("https://evil.example.com/x")}`;
    const start = await startJson(browser, query);
    expect(start.status, await start.clone().text()).toBe(200);
    const { tx } = (await start.json()) as { tx: string };
    const redirect = await finishLogin(browser, tx);
    expect(`${redirect.origin}${redirect.pathname}`).toBe(client.redirect_uris[0]);
    expect(redirect.searchParams.get("state")).toBe("par-state");
    expect(redirect.searchParams.get("iss")).toBe(ISSUER);
    const tokens = await redeem(client, redirect.searchParams.get("code") as string, verifier);
    expect(tokens.status, await tokens.clone().text()).toBe(200);
  });

  it("spends the request_uri once: a second use goes back to the client as invalid_request_uri, even from a browser with a session", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const { request_uri } = await pushed(client, challenge);
    const browser = new Browser();
    const first = await startJson(browser, byReference(client, request_uri));
    expect(first.status).toBe(200);
    // Spent in the RevocationStore shard its id names, as one row keyed by the id's hash.
    const id = sealedIdPart(request_uri.slice(URN.length));
    const rows = await sql(
      stubForId("revocation", id),
      "SELECT key FROM spent_once WHERE key = ?",
      `par:${await sha256(id)}`,
    );
    expect(rows.length).toBe(1);
    await finishLogin(browser, ((await first.json()) as { tx: string }).tx);
    // Keyway's own request_uri, used: back to the client's pushed redirect URI, with its pushed state.
    const again = await browser.fetch(`/authorize?${byReference(client, request_uri)}`);
    expectRedirectError(again, client.redirect_uris[0] as string, "invalid_request_uri", "par-state");
    const fresh = await startJson(new Browser(), byReference(client, request_uri));
    expectRedirectError(fresh, client.redirect_uris[0] as string, "invalid_request_uri", "par-state");
  });

  it("refuses a forged or another client's request_uri on its page, an expired one at the client", async () => {
    const client = await registerClient();
    const other = await registerClient();
    const { challenge } = await pkce();
    const { request_uri } = await pushed(client, challenge);
    // Each refusal is Keyway's own page (no redirect URI is trusted), saying what is wrong.
    const stolen = await startJson(new Browser(), byReference(other, request_uri));
    expect(stolen.status).toBe(400);
    expect(stolen.headers.get("location")).toBeNull();
    expect(await stolen.text()).toContain("pushed by another client");
    const forged = `${request_uri.slice(0, -4)}AAAA`;
    const bad = await startJson(new Browser(), byReference(client, forged));
    expect(bad.status).toBe(400);
    expect(bad.headers.get("location")).toBeNull();
    expect(await bad.text()).toContain("not one this server issued");

    const advance = pinClock();
    const late = await pushed(client, challenge);
    advance(61_000);
    const res = await startJson(new Browser(), byReference(client, late.request_uri));
    const loc = expectRedirectError(res, client.redirect_uris[0] as string, "invalid_request_uri", "par-state");
    expect(loc.searchParams.get("error_description")).toContain("expired");
  });

  it("is required for a client registered with require_pushed_authorization_requests", async () => {
    const client = await registerClient({ require_pushed_authorization_requests: true });
    const { challenge } = await pkce();
    const plain = await new Browser().fetch(
      `/authorize?${new URLSearchParams(requestParams(client, challenge)).toString()}`,
    );
    expectRedirectError(plain, client.redirect_uris[0] as string, "invalid_request", "par-state");
    const { request_uri } = await pushed(client, challenge);
    const res = await startJson(new Browser(), byReference(client, request_uri));
    expect(res.status, await res.clone().text()).toBe(200);
  });

  it("is required for every client where the policy says so, and discovery says it", async () => {
    const testEnv = withVars({
      POLICY: JSON.stringify({ client_cache_seconds: 0, require_pushed_authorization_requests: true }),
    });
    const client = await registerClient({}, testEnv);
    const { challenge } = await pkce();
    const doc = (await (await call("/.well-known/openid-configuration", {}, testEnv)).json()) as Record<
      string,
      unknown
    >;
    expect(doc.require_pushed_authorization_requests).toBe(true);
    const plain = await new Browser({ env: testEnv }).fetch(
      `/authorize?${new URLSearchParams(requestParams(client, challenge)).toString()}`,
    );
    expectRedirectError(plain, client.redirect_uris[0] as string, "invalid_request", "par-state");
    const res = await push(client, requestParams(client, challenge), testEnv);
    expect(res.status).toBe(201);
    const { request_uri } = (await res.json()) as { request_uri: string };
    const start = await startJson(new Browser({ env: testEnv }), byReference(client, request_uri));
    expect(start.status, await start.clone().text()).toBe(200);
  });
});
