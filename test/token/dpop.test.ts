import { env } from "cloudflare:test";
import { calculateJwkThumbprint, decodeJwt, exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { finishLogin, startJson } from "../support/authorize-flow";
import {
  admin,
  Browser,
  basicAuth,
  call,
  form,
  ISSUER,
  latestCode,
  loginForCode,
  pkce,
  registerClient,
  s256,
  sha256,
  sql,
  stubForId,
  type TestClient,
  type TestEnv,
  type Tokens,
  uniqueEmail,
  verifyJwt,
  withVars,
} from "../support/harness";
import { clientRow, registerDynamic } from "../support/registration";

afterEach(() => {
  vi.useRealTimers();
});

interface DpopKey {
  privateKey: CryptoKey;
  jwk: JWK;
  jkt: string;
  alg: string;
}

async function dpopKey(alg = "ES256"): Promise<DpopKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(publicKey);
  return { privateKey, jwk, jkt: await calculateJwkThumbprint(jwk, "sha256"), alg };
}

/** A DPoP proof (RFC 9449 §4.2); `claims` and `header` override what a well-behaved client sends. */
async function proof(
  key: DpopKey,
  opts: {
    htm?: string;
    htu?: string;
    accessToken?: string;
    nonce?: string;
    claims?: Record<string, unknown>;
    header?: Record<string, unknown>;
  } = {},
): Promise<string> {
  const claims: Record<string, unknown> = {
    jti: crypto.randomUUID(),
    htm: opts.htm ?? "POST",
    htu: opts.htu ?? `${ISSUER}/token`,
    iat: Math.floor(Date.now() / 1000),
    ...(opts.accessToken ? { ath: await s256(opts.accessToken) } : {}),
    ...(opts.nonce ? { nonce: opts.nonce } : {}),
    ...opts.claims,
  };
  return new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, typ: "dpop+jwt", jwk: key.jwk, ...opts.header })
    .sign(key.privateKey);
}

/** A token request as the client registered it, with a DPoP header when `dpop` is given. */
function tokenRequest(client: TestClient, params: Record<string, string>, dpop?: string, testEnv: object = env) {
  const headers: Record<string, string> = { "Content-Type": "application/x-www-form-urlencoded" };
  const body: Record<string, string> = { ...params };
  if (client.token_endpoint_auth_method === "none") body.client_id = client.client_id;
  else headers.Authorization = basicAuth(client);
  if (dpop) headers.DPoP = dpop;
  return call("/token", { method: "POST", headers, body: new URLSearchParams(body) }, testEnv);
}

async function redeemWith(
  client: TestClient,
  login: { code: string; verifier: string },
  dpop?: string,
  testEnv: object = env,
) {
  return tokenRequest(
    client,
    {
      grant_type: "authorization_code",
      code: login.code,
      redirect_uri: client.redirect_uris[0] as string,
      code_verifier: login.verifier,
    },
    dpop,
    testEnv,
  );
}

/** A login redeemed with a proof of `key`: bound tokens. */
async function boundLogin(client: TestClient, key: DpopKey, testEnv: TestEnv = env) {
  const login = await loginForCode(client, undefined, { env: testEnv });
  const res = await redeemWith(client, login, await proof(key), testEnv);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as Tokens;
}

const userinfoWith = (accessToken: string, scheme: "DPoP" | "Bearer", dpop?: string, testEnv: object = env) =>
  call(
    "/userinfo",
    { headers: { Authorization: `${scheme} ${accessToken}`, ...(dpop ? { DPoP: dpop } : {}) } },
    testEnv,
  );

async function expectError(res: Response, status: number, error: string) {
  expect(res.status, await res.clone().text()).toBe(status);
  expect(((await res.json()) as { error: string }).error).toBe(error);
}

describe("DPoP: bound tokens at the token endpoint (RFC 9449 §5)", () => {
  it("binds the access token to the proof's key: cnf.jkt and token_type DPoP", { timeout: 20_000 }, async () => {
    const client = await registerClient();
    const key = await dpopKey();
    const tokens = await boundLogin(client, key);
    expect(tokens.token_type).toBe("DPoP");
    const { payload } = await verifyJwt(tokens.access_token, { typ: "at+jwt" });
    expect(payload.cnf).toEqual({ jkt: key.jkt });
    // Without a proof, the same client gets a Bearer token without cnf, as before.
    const plain = await redeemWith(client, await loginForCode(client));
    const body = (await plain.json()) as Tokens;
    expect(body.token_type).toBe("Bearer");
    expect(decodeJwt(body.access_token).cnf).toBeUndefined();
  });

  it("takes PS256 and EdDSA proofs, and discovery lists the algorithms", { timeout: 20_000 }, async () => {
    const client = await registerClient();
    for (const alg of ["PS256", "EdDSA"]) {
      const key = await dpopKey(alg);
      const tokens = await boundLogin(client, key);
      expect(decodeJwt(tokens.access_token).cnf).toEqual({ jkt: key.jkt });
    }
    const doc = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, string[]>;
    expect(doc.dpop_signing_alg_values_supported).toEqual(["ES256", "PS256", "EdDSA"]);
    expect(doc.token_endpoint_auth_signing_alg_values_supported).toContain("PS256");
  });

  it("binds client_credentials tokens", async () => {
    const client = await registerClient({
      redirect_uris: [],
      post_logout_redirect_uris: [],
      grant_types: ["client_credentials"],
      scope: "reports:read",
    });
    const key = await dpopKey();
    const res = await tokenRequest(client, { grant_type: "client_credentials" }, await proof(key));
    expect(res.status, await res.clone().text()).toBe(200);
    const body = (await res.json()) as Tokens;
    expect(body.token_type).toBe("DPoP");
    expect(decodeJwt(body.access_token).cnf).toEqual({ jkt: key.jkt });
  });

  it("requires a proof from a client registered with dpop_bound_access_tokens", { timeout: 20_000 }, async () => {
    const client = await registerClient({ dpop_bound_access_tokens: true });
    expect(client.dpop_bound_access_tokens).toBe(true);
    const login = await loginForCode(client);
    await expectError(await redeemWith(client, login), 400, "invalid_dpop_proof");
    // Refused before the code was spent: the same code redeems with a proof.
    const res = await redeemWith(client, login, await proof(await dpopKey()));
    expect(res.status, await res.clone().text()).toBe(200);
    expect(((await res.json()) as Tokens).token_type).toBe("DPoP");
  });
});

describe("DPoP: the device grant (RFC 9449 §5, RFC 8628)", () => {
  it("binds a device's tokens and a public client's family to the poll's key", { timeout: 20_000 }, async () => {
    const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
    const client = await registerClient({
      redirect_uris: [],
      post_logout_redirect_uris: [],
      token_endpoint_auth_method: "none",
      grant_types: [DEVICE_GRANT, "refresh_token"],
      scope: "openid email offline_access",
    });
    const started = (await (
      await call("/device_authorization", {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ client_id: client.client_id, scope: "openid email offline_access" }),
      })
    ).json()) as { device_code: string; user_code: string };
    const browser = new Browser();
    const email = uniqueEmail();
    const entry = await browser.fetch(`/device?user_code=${encodeURIComponent(started.user_code)}`);
    const tx = /name="tx" value="([^"]+)"/.exec(await entry.text())?.[1] as string;
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    const verify = await browser.postJson("/email-code/verify", { tx, email, code: await latestCode(email) });
    const { redirect_to } = (await verify.json()) as { redirect_to: string };
    await browser.fetch(
      new URL((await browser.fetch(redirect_to)).headers.get("location") as string).pathname +
        `?user_code=${started.user_code}`,
    );
    const decided = await browser.fetch("/device/decision", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Origin: ISSUER },
      body: new URLSearchParams({ user_code: started.user_code, decision: "approve" }),
    });
    expect(decided.status, await decided.clone().text()).toBeLessThan(400);
    const key = await dpopKey();
    const res = await tokenRequest(
      client,
      { grant_type: DEVICE_GRANT, device_code: started.device_code },
      await proof(key),
    );
    expect(res.status, await res.clone().text()).toBe(200);
    const tokens = (await res.json()) as Tokens;
    expect(tokens.token_type).toBe("DPoP");
    expect(decodeJwt(tokens.access_token).cnf).toEqual({ jkt: key.jkt });
    const other = await tokenRequest(
      client,
      { grant_type: "refresh_token", refresh_token: tokens.refresh_token as string },
      await proof(await dpopKey()),
    );
    await expectError(other, 400, "invalid_grant");
  });
});

describe("DPoP: proofs refused (RFC 9449 §4.3)", () => {
  it("refuses a replayed proof (its jti is spent)", { timeout: 20_000 }, async () => {
    const client = await registerClient();
    const key = await dpopKey();
    const login = await loginForCode(client);
    const once = await proof(key);
    expect((await redeemWith(client, login, once)).status).toBe(200);
    const again = await loginForCode(client);
    const replay = await redeemWith(client, again, once);
    await expectError(replay, 400, "invalid_dpop_proof");
  });

  it("refuses a wrong htm, a wrong htu, a stale or future iat, and malformed proofs", { timeout: 30_000 }, async () => {
    const client = await registerClient({
      redirect_uris: [],
      post_logout_redirect_uris: [],
      grant_types: ["client_credentials"],
      scope: "reports:read",
    });
    const key = await dpopKey();
    const now = Math.floor(Date.now() / 1000);
    const { privateKey, ...rest } = key;
    const privateJwk = await exportJWK(privateKey);
    const hs = await new SignJWT({ jti: "x", htm: "POST", htu: `${ISSUER}/token`, iat: now })
      .setProtectedHeader({ alg: "HS256", typ: "dpop+jwt", jwk: key.jwk })
      .sign(new TextEncoder().encode("a shared secret of thirty-two bytes!"));
    const bad: [string, string][] = [
      ["htm GET", await proof(key, { htm: "GET" })],
      ["htu userinfo", await proof(key, { htu: `${ISSUER}/userinfo` })],
      ["htu other host", await proof(key, { htu: "https://other.example/token" })],
      ["stale iat", await proof(key, { claims: { iat: now - 600 } })],
      ["future iat", await proof(key, { claims: { iat: now + 120 } })],
      ["no jti", await proof(key, { claims: { jti: undefined } })],
      ["long jti", await proof(key, { claims: { jti: "j".repeat(300) } })],
      ["typ JWT", await proof(key, { header: { typ: "JWT" } })],
      ["private jwk", await proof(key, { header: { jwk: privateJwk } })],
      ["other key", await proof({ ...rest, privateKey: (await dpopKey()).privateKey })],
      ["HS256", hs],
      // FAPI 2.0 §5.4.1: no RSASSA-PKCS1-v1_5, even with a key PS256 would take.
      ["RS256", await proof(await dpopKey("RS256"))],
      ["not a JWT", "not.a.jwt"],
      ["two headers", `${await proof(key)}, ${await proof(key)}`],
    ];
    for (const [what, value] of bad) {
      const res = await tokenRequest(client, { grant_type: "client_credentials" }, value);
      expect(res.status, what).toBe(400);
      expect(((await res.json()) as { error: string }).error, what).toBe("invalid_dpop_proof");
    }
    // htu is compared as a URL: scheme and host case, a default port, query and fragment do not matter.
    const url = new URL(`${ISSUER}/token`);
    const variant = `${url.protocol.toUpperCase()}//${url.host.toUpperCase()}${url.pathname}?x=1#f`;
    const ok = await tokenRequest(client, { grant_type: "client_credentials" }, await proof(key, { htu: variant }));
    expect(ok.status, await ok.clone().text()).toBe(200);
  });
});

describe("DPoP: codes bound by dpop_jkt (RFC 9449 §10)", () => {
  it("redeems a code only with a proof of the key its authorization request named", { timeout: 20_000 }, async () => {
    const client = await registerClient();
    const key = await dpopKey();
    const login = await loginForCode(client, undefined, { extra: { dpop_jkt: key.jkt } });
    await expectError(await redeemWith(client, login), 400, "invalid_grant");
    await expectError(await redeemWith(client, login, await proof(await dpopKey())), 400, "invalid_grant");
    // Refused before it was spent: the client holding the key still redeems it.
    const res = await redeemWith(client, login, await proof(key));
    expect(res.status, await res.clone().text()).toBe(200);
    expect(decodeJwt(((await res.json()) as Tokens).access_token).cnf).toEqual({ jkt: key.jkt });
  });
});

describe("DPoP: refresh tokens (RFC 9449 §5)", () => {
  const publicClient = () => registerClient({ token_endpoint_auth_method: "none" });

  async function familyGrant(refreshToken: string) {
    const grantId = refreshToken.split(".")[0] as string;
    const [row] = await sql<{ grant_json: string; current_hash: string }>(
      stubForId("refresh", grantId),
      "SELECT grant_json, current_hash FROM families WHERE family_hash = ?",
      await sha256(grantId),
    );
    return { grant: JSON.parse(row?.grant_json ?? "{}") as { dpop_jkt?: string }, current: row?.current_hash };
  }

  const refresh = (client: TestClient, refreshToken: string, dpop?: string) =>
    tokenRequest(client, { grant_type: "refresh_token", refresh_token: refreshToken }, dpop);

  it("binds a public client's family to the key: another key or none is refused, nothing rotates", {
    timeout: 20_000,
  }, async () => {
    const client = await publicClient();
    const key = await dpopKey();
    const tokens = await boundLogin(client, key);
    const rt = tokens.refresh_token as string;
    const before = await familyGrant(rt);
    expect(before.grant.dpop_jkt).toBe(key.jkt);
    await expectError(await refresh(client, rt, await proof(await dpopKey())), 400, "invalid_grant");
    await expectError(await refresh(client, rt), 400, "invalid_grant");
    expect((await familyGrant(rt)).current).toBe(before.current);
    const res = await refresh(client, rt, await proof(key));
    expect(res.status, await res.clone().text()).toBe(200);
    const next = (await res.json()) as Tokens;
    expect(next.token_type).toBe("DPoP");
    expect(decodeJwt(next.access_token).cnf).toEqual({ jkt: key.jkt });
    expect((await familyGrant(next.refresh_token as string)).current).toBe(await sha256(next.refresh_token as string));
  });

  it("a confidential client's family is not bound; each access token is bound to the refresh's key", {
    timeout: 20_000,
  }, async () => {
    const client = await registerClient();
    const tokens = await boundLogin(client, await dpopKey());
    const rt = tokens.refresh_token as string;
    expect((await familyGrant(rt)).grant.dpop_jkt).toBeUndefined();
    const other = await dpopKey();
    const res = await refresh(client, rt, await proof(other));
    expect(res.status, await res.clone().text()).toBe(200);
    const next = (await res.json()) as Tokens;
    expect(decodeJwt(next.access_token).cnf).toEqual({ jkt: other.jkt });
    // Without a proof: a Bearer token.
    const plain = (await (await refresh(client, next.refresh_token as string)).json()) as Tokens;
    expect(plain.token_type).toBe("Bearer");
  });

  it("a confidential client's retry in the grace window gets the same rotation, bound to the key it proves now", {
    timeout: 20_000,
  }, async () => {
    const client = await registerClient();
    const key = await dpopKey();
    const tokens = await boundLogin(client, key);
    const rt = tokens.refresh_token as string;
    const first = (await (await refresh(client, rt, await proof(key))).json()) as Tokens;
    const retry = await refresh(client, rt, await proof(key));
    expect(retry.status, await retry.clone().text()).toBe(200);
    const again = (await retry.json()) as Tokens;
    expect(again.refresh_token).toBe(first.refresh_token);
    expect(decodeJwt(again.access_token)).toEqual(decodeJwt(first.access_token));
    // FAPI 2.0 §5.3.2.1-9: the lost response recovered with a new key (the family is not bound).
    const newKey = await dpopKey();
    const recovered = await refresh(client, rt, await proof(newKey));
    expect(recovered.status, await recovered.clone().text()).toBe(200);
    const third = (await recovered.json()) as Tokens;
    expect(third.refresh_token).toBe(first.refresh_token);
    const { cnf, ...rest } = decodeJwt(third.access_token);
    expect(cnf).toEqual({ jkt: newKey.jkt });
    const { cnf: _first, ...firstRest } = decodeJwt(first.access_token);
    expect(rest).toEqual(firstRest);
  });

  it("a public client's retry must prove its family's key", { timeout: 20_000 }, async () => {
    const client = await registerClient({ token_endpoint_auth_method: "none" });
    const key = await dpopKey();
    const tokens = await boundLogin(client, key);
    const rt = tokens.refresh_token as string;
    const first = (await (await refresh(client, rt, await proof(key))).json()) as Tokens;
    const retry = (await (await refresh(client, rt, await proof(key))).json()) as Tokens;
    expect(retry.refresh_token).toBe(first.refresh_token);
    await expectError(await refresh(client, rt, await proof(await dpopKey())), 400, "invalid_grant");
    await expectError(await refresh(client, rt), 400, "invalid_grant");
  });
});

describe("DPoP: userinfo (RFC 9449 §7)", () => {
  const userinfoProof = (key: DpopKey, accessToken: string | undefined, opts: Parameters<typeof proof>[1] = {}) =>
    proof(key, { htm: "GET", htu: `${ISSUER}/userinfo`, ...(accessToken ? { accessToken } : {}), ...opts });

  it("answers a bound token with the DPoP scheme and a proof with ath", { timeout: 20_000 }, async () => {
    const client = await registerClient();
    const key = await dpopKey();
    const { access_token } = await boundLogin(client, key);
    const res = await userinfoWith(access_token, "DPoP", await userinfoProof(key, access_token));
    expect(res.status, await res.clone().text()).toBe(200);
    expect(((await res.json()) as { sub: string }).sub).toBeTruthy();
  });

  it("refuses a missing or wrong ath, another key, no proof, with a DPoP challenge", { timeout: 20_000 }, async () => {
    const client = await registerClient();
    const key = await dpopKey();
    const { access_token } = await boundLogin(client, key);
    const cases: [string, string | undefined, string][] = [
      ["no ath", await userinfoProof(key, undefined), "invalid_dpop_proof"],
      ["wrong ath", await userinfoProof(key, "another token"), "invalid_dpop_proof"],
      ["POST htm", await userinfoProof(key, access_token, { htm: "POST" }), "invalid_dpop_proof"],
      ["other key", await userinfoProof(await dpopKey(), access_token), "invalid_token"],
      ["no proof", undefined, "invalid_dpop_proof"],
    ];
    for (const [what, value, error] of cases) {
      const res = await userinfoWith(access_token, "DPoP", value);
      expect(res.status, what).toBe(401);
      expect(((await res.json()) as { error: string }).error, what).toBe(error);
      const challenge = res.headers.get("www-authenticate") ?? "";
      expect(challenge, what).toMatch(new RegExp(`^DPoP error="${error}"`));
      expect(challenge, what).toContain('algs="ES256 PS256 EdDSA"');
    }
  });

  it("refuses a bound token presented as Bearer, and an unbound one with the DPoP scheme", {
    timeout: 20_000,
  }, async () => {
    const client = await registerClient();
    const key = await dpopKey();
    const { access_token } = await boundLogin(client, key);
    const asBearer = await userinfoWith(access_token, "Bearer");
    await expectError(asBearer, 401, "invalid_token");
    const login = await loginForCode(client);
    const plain = ((await (await redeemWith(client, login)).json()) as Tokens).access_token;
    const asDpop = await userinfoWith(plain, "DPoP", await userinfoProof(key, plain));
    expect(asDpop.status).toBe(401);
    expect(asDpop.headers.get("www-authenticate")).toMatch(/^DPoP error="invalid_token"/);
    // The unbound token as Bearer is unchanged.
    expect((await userinfoWith(plain, "Bearer")).status).toBe(200);
  });
});

describe("DPoP: server nonces (RFC 9449 §8)", () => {
  const nonceEnv = () =>
    withVars({ POLICY: JSON.stringify({ client_cache_seconds: 0, dpop_require_nonce: true }) }) as TestEnv;

  it("use_dpop_nonce with a DPoP-Nonce, then success with the nonce, at /token and at userinfo", {
    timeout: 30_000,
  }, async () => {
    const e = nonceEnv();
    const client = await registerClient({}, e);
    const key = await dpopKey();
    const login = await loginForCode(client, undefined, { env: e });
    const first = await redeemWith(client, login, await proof(key), e);
    expect(first.status, await first.clone().text()).toBe(400);
    expect(((await first.json()) as { error: string }).error).toBe("use_dpop_nonce");
    const nonce = first.headers.get("dpop-nonce") as string;
    expect(nonce).toBeTruthy();
    // A made-up nonce is refused the same way.
    const madeUp = await redeemWith(client, login, await proof(key, { nonce: "0.bogus" }), e);
    await expectError(madeUp, 400, "use_dpop_nonce");
    const ok = await redeemWith(client, login, await proof(key, { nonce }), e);
    expect(ok.status, await ok.clone().text()).toBe(200);
    expect(ok.headers.get("dpop-nonce")).toBeTruthy();
    const { access_token } = (await ok.json()) as Tokens;

    const at = (opts: Parameters<typeof proof>[1]) =>
      proof(key, { htm: "GET", htu: `${ISSUER}/userinfo`, accessToken: access_token, ...opts });
    const refused = await userinfoWith(access_token, "DPoP", await at({}), e);
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toMatch(/^DPoP error="use_dpop_nonce"/);
    const fresh = refused.headers.get("dpop-nonce") as string;
    expect(fresh).toBeTruthy();
    const answered = await userinfoWith(access_token, "DPoP", await at({ nonce: fresh }), e);
    expect(answered.status, await answered.clone().text()).toBe(200);
  });

  it("checks a nonce sent even where none is required", async () => {
    const client = await registerClient({
      redirect_uris: [],
      post_logout_redirect_uris: [],
      grant_types: ["client_credentials"],
      scope: "reports:read",
    });
    const key = await dpopKey();
    const res = await tokenRequest(client, { grant_type: "client_credentials" }, await proof(key, { nonce: "x.y" }));
    await expectError(res, 400, "use_dpop_nonce");
  });
});

describe("DPoP: introspection (RFC 9449 §6.2)", () => {
  it("shows a bound token's token_type DPoP and cnf.jkt", { timeout: 20_000 }, async () => {
    const client = await registerClient();
    const key = await dpopKey();
    const { access_token } = await boundLogin(client, key);
    const res = await form(client, { token: access_token }, "/introspect");
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ active: true, token_type: "DPoP", cnf: { jkt: key.jkt } });
    const plain = ((await (await redeemWith(client, await loginForCode(client))).json()) as Tokens).access_token;
    const unbound = (await (await form(client, { token: plain }, "/introspect")).json()) as Record<string, unknown>;
    expect(unbound.token_type).toBe("Bearer");
    expect(unbound.cnf).toBeUndefined();
  });
});

describe("DPoP: client registration (RFC 9449 §5.2, RFC 9126 §6)", () => {
  it("keeps dpop_bound_access_tokens and require_pushed_authorization_requests, PATCHable, false by default", async () => {
    const client = await registerClient();
    expect(client).toMatchObject({ dpop_bound_access_tokens: false, require_pushed_authorization_requests: false });
    const patched = await admin(`/clients/${client.client_id}`, {
      method: "PATCH",
      json: { dpop_bound_access_tokens: true, require_pushed_authorization_requests: true },
    });
    expect(patched.status, await patched.clone().text()).toBe(200);
    expect(await patched.json()).toMatchObject({
      dpop_bound_access_tokens: true,
      require_pushed_authorization_requests: true,
    });
    const row = await env.DB.prepare(
      "SELECT dpop_bound_access_tokens, require_pushed_authorization_requests FROM clients WHERE client_id = ?",
    )
      .bind(client.client_id)
      .first();
    expect(row).toEqual({ dpop_bound_access_tokens: 1, require_pushed_authorization_requests: 1 });
    const bad = await admin(`/clients/${client.client_id}`, {
      method: "PATCH",
      json: { dpop_bound_access_tokens: "yes" },
    });
    expect(bad.status).toBe(400);
  });

  it("takes both in RFC 7591 registration and RFC 7592 PUT, and shows them back", async () => {
    const client = await registerDynamic({
      redirect_uris: ["https://dyn.example.com/cb"],
      dpop_bound_access_tokens: true,
    });
    expect(client).toMatchObject({ dpop_bound_access_tokens: true, require_pushed_authorization_requests: false });
    expect(await clientRow(client.client_id)).toMatchObject({
      dpop_bound_access_tokens: 1,
      require_pushed_authorization_requests: 0,
    });
    const put = await call(new URL(client.registration_client_uri).pathname, {
      method: "PUT",
      headers: { Authorization: `Bearer ${client.registration_access_token}`, "Content-Type": "application/json" },
      body: JSON.stringify({
        client_id: client.client_id,
        redirect_uris: ["https://dyn.example.com/cb"],
        require_pushed_authorization_requests: true,
      }),
    });
    expect(put.status, await put.clone().text()).toBe(200);
    // RFC 7592 §2.2: an omitted field takes its default.
    expect(await put.json()).toMatchObject({
      dpop_bound_access_tokens: false,
      require_pushed_authorization_requests: true,
    });
    expect(await clientRow(client.client_id)).toMatchObject({
      dpop_bound_access_tokens: 0,
      require_pushed_authorization_requests: 1,
    });
  });
});

describe("at the PAR endpoint (RFC 9449 §10.1)", () => {
  /** Pushes the authorization request with `dpop` as its DPoP header, then logs in by its request_uri. */
  async function pushedLogin(client: TestClient, extra: Record<string, string>, dpop?: string) {
    const { verifier, challenge } = await pkce();
    const headers: Record<string, string> = {
      "Content-Type": "application/x-www-form-urlencoded",
      Authorization: basicAuth(client),
    };
    if (dpop) headers.DPoP = dpop;
    const pushed = await call("/par", {
      method: "POST",
      headers,
      body: new URLSearchParams({
        response_type: "code",
        client_id: client.client_id,
        redirect_uri: client.redirect_uris[0] as string,
        scope: "openid email",
        code_challenge: challenge,
        code_challenge_method: "S256",
        ...extra,
      }),
    });
    if (pushed.status !== 201) return { pushed };
    const { request_uri } = (await pushed.json()) as { request_uri: string };
    const browser = new Browser();
    const start = await startJson(
      browser,
      new URLSearchParams({ client_id: client.client_id, request_uri }).toString(),
    );
    const redirect = await finishLogin(browser, ((await start.json()) as { tx: string }).tx);
    return { pushed, login: { code: redirect.searchParams.get("code") as string, verifier } };
  }

  it("binds the code to the proof's key: redeemed with it, bound; with another key, invalid_grant", async () => {
    const client = await registerClient();
    const key = await dpopKey();
    const bound = await pushedLogin(client, {}, await proof(key, { htu: `${ISSUER}/par` }));
    const other = await redeemWith(
      client,
      bound.login as { code: string; verifier: string },
      await proof(await dpopKey()),
    );
    await expectError(other, 400, "invalid_grant");
    const again = await pushedLogin(client, {}, await proof(key, { htu: `${ISSUER}/par` }));
    const ok = await redeemWith(client, again.login as { code: string; verifier: string }, await proof(key));
    expect(ok.status, await ok.clone().text()).toBe(200);
    const body = (await ok.json()) as { access_token: string; token_type: string };
    expect(body.token_type).toBe("DPoP");
    expect((decodeJwt(body.access_token).cnf as { jkt: string }).jkt).toBe(key.jkt);
  });

  it("refuses a proof whose key is not the dpop_jkt sent beside it, and a proof for another endpoint", async () => {
    const client = await registerClient();
    const key = await dpopKey();
    const other = await dpopKey();
    const mismatched = await pushedLogin(client, { dpop_jkt: other.jkt }, await proof(key, { htu: `${ISSUER}/par` }));
    await expectError(mismatched.pushed, 400, "invalid_dpop_proof");
    const wrongHtu = await pushedLogin(client, {}, await proof(key));
    await expectError(wrongHtu.pushed, 400, "invalid_dpop_proof");
    // dpop_jkt alone (no proof) is taken as sent, and binds the code (RFC 9449 §10).
    const byJkt = await pushedLogin(client, { dpop_jkt: other.jkt });
    expect(byJkt.pushed.status).toBe(201);
    const refused = await redeemWith(client, byJkt.login as { code: string; verifier: string }, await proof(key));
    await expectError(refused, 400, "invalid_grant");
  });
});
