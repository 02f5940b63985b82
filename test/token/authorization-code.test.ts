import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { loadConfig } from "../../workers/shared/config/config";
import { issueSealedId } from "../../workers/shared/routing/sealed-id";
import {
  admin,
  basicAuth,
  call,
  codeFamilyShard,
  codeFromSession,
  codeSpend,
  form,
  fullLogin,
  ISSUER,
  idParts,
  loginForCode,
  openSealed,
  pinClock,
  policy,
  redeem,
  refreshGrant,
  registerClient,
  sealedIdPart,
  sha256,
  sql,
  stubForId,
  type Tokens,
  uniqueEmail,
  userinfo,
  verifyJwt,
  withVars,
} from "../support/harness";

afterEach(() => {
  vi.useRealTimers();
});

async function expectOAuthError(res: Response, status: number, error: string) {
  expect(res.status, await res.clone().text()).toBe(status);
  expect(res.headers.get("cache-control")).toBe("no-store");
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  expect(((await res.json()) as { error: string }).error).toBe(error);
}

async function expectTokens(res: Response): Promise<Tokens> {
  expect(res.status, await res.clone().text()).toBe(200);
  expect(res.headers.get("cache-control")).toBe("no-store");
  return (await res.json()) as Tokens;
}

async function expectRevoked(tokens: Tokens, client: Parameters<typeof refreshGrant>[0]) {
  const info = await userinfo(tokens.access_token);
  expect(info.status).toBe(401);
  expect(info.headers.get("www-authenticate")).toContain('error="invalid_token"');
  if (tokens.refresh_token)
    await expectOAuthError(await refreshGrant(client, tokens.refresh_token), 400, "invalid_grant");
  const intro = await form(client, { token: tokens.access_token }, "/introspect");
  expect(await intro.json()).toEqual({ active: false });
}

describe("Token: authorization_code (CONTRACT §2.5, §3)", () => {
  it("issues a Bearer access token, an ID token and a refresh token, all verifiable against /jwks.json", async () => {
    const client = await registerClient();
    const before = Math.floor(Date.now() / 1000);
    const { tokens, email, browser } = await fullLogin(client);
    expect(tokens.token_type).toBe("Bearer");
    expect(tokens.expires_in).toBe(600);
    expect(tokens.scope.split(" ").sort()).toEqual(["email", "offline_access", "openid"]);
    expect(tokens.refresh_token).toMatch(/^gr_/);

    const user = await env.DB.prepare("SELECT id FROM users WHERE email = ?").bind(email).first<{ id: string }>();
    const sessionId = browser.cookies.get("kw_session") as string;
    const [session] = await sql<{ sid: string; auth_time: number }>(
      stubForId("session", sessionId),
      "SELECT sid, auth_time FROM sessions WHERE session_hash = ?",
      await sha256(sessionId),
    );

    const id = await verifyJwt(tokens.id_token, { audience: client.client_id });
    expect(id.header).toMatchObject({ alg: "RS256", kid: expect.any(String) });
    const p = id.payload;
    expect(p.iss).toBe(ISSUER);
    expect(p.sub).toBe(user?.id);
    expect(p.aud).toBe(client.client_id);
    expect(p.iat).toBeGreaterThanOrEqual(before);
    expect(p.exp).toBe((p.iat as number) + 600);
    expect(p.auth_time).toBe(session?.auth_time);
    expect(p.nonce).toBe("n-456");
    expect(p.amr).toEqual(["otp"]);
    expect(p.email).toBe(email);
    expect(p.email_verified).toBe(true);
    expect(p.sid).toBe(session?.sid);

    const at = await verifyJwt(tokens.access_token, { typ: "at+jwt" });
    expect(at.header).toMatchObject({ typ: "at+jwt", alg: "RS256", kid: expect.any(String) });
    const a = at.payload;
    expect(a.iss).toBe(ISSUER);
    expect(a.sub).toBe(user?.id);
    expect(a.aud).toBe(`${ISSUER}/userinfo`);
    expect(a.exp).toBe((a.iat as number) + 600);
    expect(a.client_id).toBe(client.client_id);
    expect(a.scope).toBe(tokens.scope);
    expect(a.jti).toMatch(/^at_/);
    expect(a.sid).toBe(session?.sid);
    // The jti lives in the revocation shard of its session, so one call checks both.
    const { gen, shard } = idParts(a.jti as string);
    expect(idParts(session?.sid as string)).toMatchObject({ gen, shard });

    // The refresh family is stored under hashes only.
    const grantId = (tokens.refresh_token as string).split(".")[0] as string;
    expect(grantId).toBe(a.grant_id);
    const [family] = await sql<{ current_hash: string; client_id: string; revoked: number }>(
      stubForId("refresh", grantId),
      "SELECT current_hash, client_id, revoked FROM families WHERE family_hash = ?",
      await sha256(grantId),
    );
    expect(family).toEqual({
      current_hash: await sha256(tokens.refresh_token as string),
      client_id: client.client_id,
      revoked: 0,
    });
  });

  it("signs ID tokens with ES256 for a client that registered it", async () => {
    const client = await registerClient({ id_token_signed_response_alg: "ES256" });
    const { tokens } = await fullLogin(client);
    const id = await verifyJwt(tokens.id_token, { audience: client.client_id });
    expect(id.header.alg).toBe("ES256");
  });

  it("signs access tokens with ES256 when the policy says so; userinfo, introspection and refresh take them", async () => {
    const e = withVars({ POLICY: policy({ access_token_signing_alg: "ES256" }) });
    const client = await registerClient({}, e);
    const { tokens } = await fullLogin(client, undefined, { env: e });
    const at = await verifyJwt(tokens.access_token, { typ: "at+jwt" });
    expect(at.header).toMatchObject({ alg: "ES256", typ: "at+jwt" });
    // The ID token keeps the client's algorithm (RS256 by default).
    expect((await verifyJwt(tokens.id_token, { audience: client.client_id })).header.alg).toBe("RS256");
    expect((await userinfo(tokens.access_token, e)).status).toBe(200);
    const intro = await form(client, { token: tokens.access_token }, "/introspect", e);
    expect(((await intro.json()) as { active: boolean }).active).toBe(true);
    const refreshed = await refreshGrant(client, tokens.refresh_token as string, {}, e);
    expect(refreshed.status).toBe(200);
    const next = (await refreshed.json()) as Tokens;
    expect((await verifyJwt(next.access_token, { typ: "at+jwt" })).header.alg).toBe("ES256");
  });

  it("puts at_hash in every ID token issued with an access token, RS256 and ES256 (OIDC Core §3.1.3.6)", async () => {
    // As an RP (go-oidc's VerifyAccessToken) checks it: the left half of SHA-256(access_token), base64url.
    const leftHalf = async (token: string) => {
      const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token)));
      return btoa(String.fromCharCode(...digest.subarray(0, 16)))
        .replace(/\+/g, "-")
        .replace(/\//g, "_")
        .replace(/=+$/, "");
    };
    for (const alg of ["RS256", "ES256"]) {
      const client = await registerClient({ id_token_signed_response_alg: alg });
      const { tokens } = await fullLogin(client);
      const id = await verifyJwt(tokens.id_token, { audience: client.client_id });
      expect(id.header.alg).toBe(alg);
      expect(id.payload.at_hash).toBe(await leftHalf(tokens.access_token));
      // A refresh issues a new pair; the new ID token hashes the new access token.
      const next = await expectTokens(await refreshGrant(client, tokens.refresh_token as string));
      const nextId = await verifyJwt(next.id_token, { audience: client.client_id });
      expect(nextId.payload.at_hash).toBe(await leftHalf(next.access_token));
      expect(nextId.payload.at_hash).not.toBe(id.payload.at_hash);
    }
  });

  it("omits nonce when none was sent, and email without the email scope", async () => {
    const client = await registerClient();
    const q = { scope: "openid", nonce: null };
    const login = await loginForCode(client, undefined, { extra: q });
    const tokens = await expectTokens(await redeem(client, login.code, login.verifier));
    expect(tokens.scope).toBe("openid");
    expect(tokens.refresh_token).toBeUndefined();
    const { payload } = await verifyJwt(tokens.id_token, { audience: client.client_id });
    expect(payload.nonce).toBeUndefined();
    expect(payload.email).toBeUndefined();
    expect(payload.email_verified).toBeUndefined();
    const info = await userinfo(tokens.access_token);
    expect(Object.keys((await info.json()) as object)).toEqual(["sub"]);
  });

  it("authenticates client_secret_basic, client_secret_post and public clients", async () => {
    for (const method of ["client_secret_basic", "client_secret_post", "none"]) {
      const client = await registerClient({ token_endpoint_auth_method: method });
      expect(client.client_secret === undefined).toBe(method === "none");
      const login = await loginForCode(client);
      const tokens = await expectTokens(await redeem(client, login.code, login.verifier));
      expect(tokens.access_token).toBeTruthy();
    }
  });

  it("lets a confidential client prove its secret by either method, whichever it registered (RFC 6749 §2.3.1)", async () => {
    const basic = await registerClient();
    const post = await registerClient({ token_endpoint_auth_method: "client_secret_post" });
    const viaPost = await loginForCode(basic);
    await expectTokens(
      await redeem({ ...basic, token_endpoint_auth_method: "client_secret_post" }, viaPost.code, viaPost.verifier),
    );
    const viaBasic = await loginForCode(post);
    await expectTokens(
      await redeem({ ...post, token_endpoint_auth_method: "client_secret_basic" }, viaBasic.code, viaBasic.verifier),
    );
  });

  it("answers failed client authentication with 401 invalid_client (C7)", async () => {
    const basic = await registerClient();
    const post = await registerClient({ token_endpoint_auth_method: "client_secret_post" });
    const pub = await registerClient({ token_endpoint_auth_method: "none" });
    const login = await loginForCode(basic);
    const params = {
      grant_type: "authorization_code",
      code: login.code,
      redirect_uri: basic.redirect_uris[0] as string,
      code_verifier: login.verifier,
    };
    const send = (headers: Record<string, string>, extra: Record<string, string> = {}) =>
      call("/token", {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded", ...headers },
        body: new URLSearchParams({ ...params, ...extra }),
      });

    const wrongBasic = await send({ Authorization: basicAuth({ ...basic, client_secret: "kws_wrong" }) });
    expect(wrongBasic.headers.get("www-authenticate")).toMatch(/^Basic /);
    await expectOAuthError(wrongBasic, 401, "invalid_client");
    const unknown = await send({ Authorization: basicAuth({ ...basic, client_id: "kwc_nope" }) });
    expect(unknown.headers.get("www-authenticate")).toMatch(/^Basic /);
    await expectOAuthError(unknown, 401, "invalid_client");
    const garbage = await send({ Authorization: "Basic !!!" });
    expect(garbage.headers.get("www-authenticate")).toBeTruthy();
    await expectOAuthError(garbage, 401, "invalid_client");
    // A confidential client without its secret, a wrong secret by post, a public client with a secret.
    await expectOAuthError(await send({}, { client_id: basic.client_id }), 401, "invalid_client");
    const wrongPost = await send({}, { client_id: post.client_id, client_secret: "kws_wrong" });
    expect(wrongPost.headers.get("www-authenticate")).toMatch(/^Basic /);
    await expectOAuthError(wrongPost, 401, "invalid_client");
    await expectOAuthError(await send({}, { client_id: pub.client_id, client_secret: "x" }), 401, "invalid_client");
    await expectOAuthError(
      await send({ Authorization: basicAuth({ ...pub, client_secret: "x" }) }),
      401,
      "invalid_client",
    );
    // No client at all.
    await expectOAuthError(await send({}), 401, "invalid_client");
    // Two methods at once.
    await expectOAuthError(
      await send({ Authorization: basicAuth(basic) }, { client_secret: basic.client_secret as string }),
      400,
      "invalid_request",
    );
    // None of that spent the code.
    await expectTokens(await redeem(basic, login.code, login.verifier));
  });

  it("refuses a code used twice and revokes what the first use issued (C1)", async () => {
    const client = await registerClient();
    const login = await loginForCode(client);
    const first = await expectTokens(await redeem(client, login.code, login.verifier));
    expect((await userinfo(first.access_token)).status).toBe(200);
    await expectOAuthError(await redeem(client, login.code, login.verifier), 400, "invalid_grant");
    await expectRevoked(first, client);
    // Stored: the grant mark in the session's revocation shard, and the family revoked.
    const { payload } = await verifyJwt(first.access_token);
    const marks = await sql(
      stubForId("revocation", payload.sid as string),
      "SELECT key FROM revoked WHERE key = ?",
      `grant:${payload.grant_id}`,
    );
    expect(marks).toHaveLength(1);
    const grantId = payload.grant_id as string;
    const [family] = await sql<{ revoked: number }>(
      stubForId("refresh", grantId),
      "SELECT revoked FROM families WHERE family_hash = ?",
      await sha256(grantId),
    );
    expect(family?.revoked).toBe(1);
  });

  it("lets exactly one of simultaneous redemptions succeed (C2)", async () => {
    const client = await registerClient();
    const login = await loginForCode(client);
    const results = await Promise.all([0, 1, 2, 3].map(() => redeem(client, login.code, login.verifier)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 400, 400, 400]);
  });

  it("refuses an expired code (C3)", async () => {
    const client = await registerClient();
    const start = Date.now();
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(start);
    const login = await loginForCode(client);
    vi.setSystemTime(start + 60_000);
    await expectOAuthError(await redeem(client, login.code, login.verifier), 400, "invalid_grant");
  });

  it("refuses a wrong or missing code_verifier, and the code is then spent (C4)", async () => {
    const client = await registerClient();
    const login = await loginForCode(client);
    await expectOAuthError(
      await redeem(client, login.code, login.verifier, { code_verifier: "" }),
      400,
      "invalid_grant",
    );
    await expectOAuthError(
      await redeem(client, login.code, login.verifier, { code_verifier: "short" }),
      400,
      "invalid_grant",
    );
    const other = `${login.verifier.slice(0, -1)}${login.verifier.endsWith("A") ? "B" : "A"}`;
    await expectOAuthError(
      await redeem(client, login.code, login.verifier, { code_verifier: other }),
      400,
      "invalid_grant",
    );
    await expectOAuthError(await redeem(client, login.code, login.verifier), 400, "invalid_grant");
  });

  it("refuses a redirect_uri different from the authorization request, and the code is then spent (C5)", async () => {
    const client = await registerClient({
      redirect_uris: ["https://rp-c5.example.com/a", "https://rp-c5.example.com/b"],
    });
    const login = await loginForCode(client);
    await expectOAuthError(
      await redeem(client, login.code, login.verifier, { redirect_uri: "https://rp-c5.example.com/b" }),
      400,
      "invalid_grant",
    );
    await expectOAuthError(await redeem(client, login.code, login.verifier), 400, "invalid_grant");
  });

  it("refuses a code issued to another client without spending it (C6)", async () => {
    const a = await registerClient();
    const b = await registerClient();
    const login = await loginForCode(a);
    await expectOAuthError(
      await redeem(b, login.code, login.verifier, { redirect_uri: a.redirect_uris[0] as string }),
      400,
      "invalid_grant",
    );
    await expectTokens(await redeem(a, login.code, login.verifier));
    // After the real redemption, client B's replay neither succeeds nor revokes A's tokens.
    const b2 = await redeem(b, login.code, login.verifier, { redirect_uri: a.redirect_uris[0] as string });
    await expectOAuthError(b2, 400, "invalid_grant");
  });

  it("keeps A's tokens alive when B replays A's spent code", async () => {
    const a = await registerClient();
    const b = await registerClient();
    const login = await loginForCode(a);
    const tokens = await expectTokens(await redeem(a, login.code, login.verifier));
    await redeem(b, login.code, login.verifier, { redirect_uri: a.redirect_uris[0] as string });
    expect((await userinfo(tokens.access_token)).status).toBe(200);
  });

  it("answers malformed token requests with OAuth errors (C8, C9)", async () => {
    const client = await registerClient();
    const login = await loginForCode(client);
    await expectOAuthError(
      await form(client, { grant_type: "password", username: "u", password: "p" }),
      400,
      "unsupported_grant_type",
    );
    // A grant Keyway has but this client did not register (RFC 6749 §5.2).
    await expectOAuthError(await form(client, { grant_type: "client_credentials" }), 400, "unauthorized_client");
    await expectOAuthError(await form(client, { code: login.code }), 400, "invalid_request");
    await expectOAuthError(
      await form(client, {
        grant_type: "authorization_code",
        code_verifier: login.verifier,
        redirect_uri: client.redirect_uris[0] as string,
      }),
      400,
      "invalid_request",
    );
    await expectOAuthError(
      await form(client, {
        grant_type: "authorization_code",
        code: "ac_0_0_garbage-garbage-garbage-garbage",
        code_verifier: login.verifier,
        redirect_uri: client.redirect_uris[0] as string,
      }),
      400,
      "invalid_grant",
    );

    const get = await call(`/token?grant_type=authorization_code&code=${login.code}`, {
      headers: { Authorization: basicAuth(client) },
    });
    expect(get.headers.get("allow")).toBe("POST");
    await expectOAuthError(get, 405, "invalid_request");

    const asJson = await call("/token", {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: basicAuth(client) },
      body: JSON.stringify({
        grant_type: "authorization_code",
        code: login.code,
        redirect_uri: client.redirect_uris[0],
        code_verifier: login.verifier,
      }),
    });
    await expectOAuthError(asJson, 400, "invalid_request");

    const repeated = await call("/token", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Authorization: basicAuth(client) },
      body: `grant_type=authorization_code&grant_type=refresh_token&code=${login.code}`,
    });
    await expectOAuthError(repeated, 400, "invalid_request");
    // None of it spent the code.
    await expectTokens(await redeem(client, login.code, login.verifier));
  });

  it("refuses a grant type the client did not register with unauthorized_client", async () => {
    const client = await registerClient({ grant_types: ["authorization_code"] });
    await expectOAuthError(await refreshGrant(client, "gr_0_0_x.y"), 400, "unauthorized_client");
  });
});

describe("codes issued before their spend moved to the login's shard (issue 28)", () => {
  it("a code without the `spend` mark is spent once in its own AuthCodeStore shard, and its reuse revokes", async () => {
    const client = await registerClient();
    const login = await loginForCode(client);
    // The same grant sealed as a code was before: no `spend`, so it is spent where its id names.
    const { spend: _, ...state } = (await openSealed<Record<string, unknown>>("code", login.code)) as Record<
      string,
      unknown
    >;
    const config = loadConfig(env);
    const old = (await issueSealedId(config, "code", "auth-code", state, { region: config.REGIONS.default })).value;
    const { access_token } = await expectTokens(await redeem(client, old, login.verifier));
    const spentThere = await sql<{ grant_id: string | null }>(
      stubForId("code", old),
      "SELECT grant_id FROM spent_codes WHERE code_hash = ?",
      await sha256(sealedIdPart(old)),
    );
    expect(spentThere).toEqual([{ grant_id: expect.stringMatching(/^gr_/) }]);
    await expectOAuthError(await redeem(client, old, login.verifier), 400, "invalid_grant");
    expect((await userinfo(access_token)).status).toBe(401);
  });
});

describe("a code dies with its login (CONTRACT §3, §5)", () => {
  it("refuses a code whose session was logged out before it was redeemed, and spends it issuing nothing", async () => {
    const client = await registerClient();
    const first = await fullLogin(client);
    // A second code from the same session (same sid), then a logout of that session.
    const later = await codeFromSession(first.browser, client);
    const hint = new URLSearchParams({ id_token_hint: first.tokens.id_token });
    expect((await first.browser.fetch(`/logout?${hint}`)).status).toBe(200);
    // The shard of the family the later code's grant id names, and the token_issued events waiting there.
    const familyShard = await codeFamilyShard(later.code);
    const tokenEvents = async () =>
      (await sql<{ n: number }>(familyShard, "SELECT COUNT(*) AS n FROM audit_outbox WHERE kind = 'token_issued'"))[0]
        ?.n;
    const before = await tokenEvents();
    await expectOAuthError(await redeem(client, later.code, later.verifier), 400, "invalid_grant");
    // Its family (the code's spend, issue 28) was made before the login's check answered: taken back,
    // revoked, with its token_issued event, so the trail says no token was issued.
    expect(await codeSpend(later.code)).toMatchObject({ by: "family", issued: false });
    expect(await tokenEvents()).toBe(before);
    // Spent: a second try is refused the same way, and revokes nothing.
    await expectOAuthError(await redeem(client, later.code, later.verifier), 400, "invalid_grant");
  });

  for (const action of ["revoked", "deleted"] as const) {
    it(`refuses a code whose user was ${action} after the login began`, async () => {
      const client = await registerClient();
      const email = uniqueEmail(action);
      const login = await loginForCode(client, email);
      const user = await env.DB.prepare("SELECT id FROM users WHERE email = ?").bind(email).first<{ id: string }>();
      const res =
        action === "revoked"
          ? await admin(`/users/${user?.id}/revoke`, { method: "POST" })
          : await admin(`/users/${user?.id}`, { method: "DELETE" });
      expect(res.status).toBeLessThan(300);
      await expectOAuthError(await redeem(client, login.code, login.verifier), 400, "invalid_grant");
      expect(await codeSpend(login.code)).toMatchObject({ issued: false });
    });
  }

  it("still redeems the code of a login that began after the user was revoked", async () => {
    const client = await registerClient();
    const email = uniqueEmail("after");
    const at = pinClock();
    await fullLogin(client, email);
    const user = await env.DB.prepare("SELECT id FROM users WHERE email = ?").bind(email).first<{ id: string }>();
    expect((await admin(`/users/${user?.id}/revoke`, { method: "POST" })).status).toBe(200);
    at(61_000);
    const login = await loginForCode(client, email);
    await expectTokens(await redeem(client, login.code, login.verifier));
  });
});

describe("discovery and keys (CONTRACT §1)", () => {
  it("publishes a discovery document whose endpoints answer", async () => {
    const res = await call("/.well-known/openid-configuration");
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    const doc = (await res.json()) as Record<string, unknown>;
    expect(doc).toMatchObject({
      issuer: ISSUER,
      authorization_endpoint: `${ISSUER}/authorize`,
      token_endpoint: `${ISSUER}/token`,
      userinfo_endpoint: `${ISSUER}/userinfo`,
      jwks_uri: `${ISSUER}/jwks.json`,
      revocation_endpoint: `${ISSUER}/revoke`,
      introspection_endpoint: `${ISSUER}/introspect`,
      end_session_endpoint: `${ISSUER}/logout`,
      response_types_supported: ["code"],
      // CONTRACT §9: pairwise too, once built (issue 40).
      subject_types_supported: ["public", "pairwise"],
      code_challenge_methods_supported: ["S256"],
      authorization_response_iss_parameter_supported: true,
    });
    expect(doc.grant_types_supported).toEqual(expect.arrayContaining(["authorization_code", "refresh_token"]));
    expect(doc.id_token_signing_alg_values_supported).toEqual(expect.arrayContaining(["RS256", "ES256"]));
    expect(doc.token_endpoint_auth_methods_supported).toEqual(
      expect.arrayContaining(["client_secret_basic", "client_secret_post", "none"]),
    );
    expect(doc.scopes_supported).toEqual(expect.arrayContaining(["openid", "email", "profile", "offline_access"]));
    expect(doc.claims_supported).toEqual(expect.arrayContaining(["sub", "email", "sid", "auth_time", "amr", "name"]));
    // Only prompts that do something: `consent` is accepted but there is no consent step to show.
    expect(doc.prompt_values_supported).toEqual(["none", "login", "select_account"]);
  });

  it("publishes public signing keys with kid, alg and use", async () => {
    const res = await call("/jwks.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    const { keys } = (await res.json()) as { keys: Record<string, unknown>[] };
    expect(keys.map((k) => k.alg)).toEqual(expect.arrayContaining(["RS256", "ES256"]));
    for (const k of keys) {
      expect(k).toMatchObject({ kid: expect.any(String), use: "sig" });
      for (const priv of ["d", "p", "q", "dp", "dq", "qi"]) expect(k[priv]).toBeUndefined();
    }
  });
});
