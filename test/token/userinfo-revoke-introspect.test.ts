import { env } from "cloudflare:test";
import { SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  admin,
  authorizeQuery,
  Browser,
  call,
  codeFromSession,
  form,
  fullLogin,
  ISSUER,
  pinClock,
  pkce,
  redeem,
  refreshGrant,
  registerClient,
  sha256,
  sql,
  stubForId,
  type TestClient,
  uniqueEmail,
  userinfo,
  verifyJwt,
} from "../support/harness";

afterEach(() => {
  vi.useRealTimers();
});

const introspect = async (client: TestClient, token: string, extra: Record<string, string> = {}) => {
  const res = await form(client, { token, ...extra }, "/introspect");
  expect(res.status, await res.clone().text()).toBe(200);
  expect(res.headers.get("cache-control")).toBe("no-store");
  return (await res.json()) as Record<string, unknown>;
};

async function revoke(client: TestClient, token: string, extra: Record<string, string> = {}) {
  const res = await form(client, { token, ...extra }, "/revoke");
  expect(res.status, await res.clone().text()).toBe(200);
  expect(res.headers.get("cache-control")).toBe("no-store");
}

async function expectInvalidToken(res: Response) {
  expect(res.status).toBe(401);
  expect(res.headers.get("www-authenticate")).toMatch(/^Bearer .*error="invalid_token"/);
  expect(res.headers.get("cache-control")).toBe("no-store");
}

describe("userinfo (CONTRACT §3)", () => {
  it("answers GET and POST with sub, email and email_verified, no-store", async () => {
    const client = await registerClient();
    const { tokens, email } = await fullLogin(client);
    const { sub } = (await verifyJwt(tokens.id_token)).payload;
    for (const method of ["GET", "POST"]) {
      const res = await call("/userinfo", { method, headers: { Authorization: `Bearer ${tokens.access_token}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get("cache-control")).toBe("no-store");
      expect(await res.json()).toEqual({ sub, email, email_verified: true });
    }
  });

  it("takes the token from a POST form body (RFC 6750 §2.2), never from the query, never from two places", async () => {
    const client = await registerClient();
    const { tokens, email } = await fullLogin(client);
    const { sub } = (await verifyJwt(tokens.id_token)).payload;
    const post = (body: string, headers: Record<string, string> = {}) =>
      call("/userinfo", {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded", ...headers },
        body,
      });
    const inBody = await post(new URLSearchParams({ access_token: tokens.access_token }).toString());
    expect(inBody.status, await inBody.clone().text()).toBe(200);
    expect(await inBody.json()).toEqual({ sub, email, email_verified: true });
    // §2.3 (the query string) is not supported: the token there counts as absent.
    const inQuery = await call(`/userinfo?access_token=${encodeURIComponent(tokens.access_token)}`);
    expect(inQuery.status).toBe(401);
    expect(inQuery.headers.get("www-authenticate")).toBe('Bearer realm="keyway"');
    // Header and body at once: RFC 6750 §2 allows one method per request.
    const both = await post(new URLSearchParams({ access_token: tokens.access_token }).toString(), {
      Authorization: `Bearer ${tokens.access_token}`,
    });
    expect(both.status).toBe(400);
    expect(((await both.json()) as { error: string }).error).toBe("invalid_request");
    await expectInvalidToken(await post("access_token=garbage%20token"));
    await expectInvalidToken(await post("access_token="));
  });

  it("returns the user's name for the profile scope, and nothing more without it (OIDC Core §5.4)", async () => {
    const advance = pinClock();
    const client = await registerClient({ scope: "openid email profile" });
    const email = uniqueEmail("named");
    const created = await admin("/users", { method: "POST", json: { email, name: "Ada Lovelace" } });
    expect(created.status).toBe(201);
    const withProfile = await fullLogin(client, email, { extra: { scope: "openid profile" } });
    expect(withProfile.tokens.scope).toBe("openid profile");
    const res = await userinfo(withProfile.tokens.access_token);
    expect(await res.json()).toEqual({ sub: ((await created.json()) as { id: string }).id, name: "Ada Lovelace" });
    advance(61_000); // past the address's resend interval
    const without = await fullLogin(client, email, { extra: { scope: "openid email" } });
    expect(await (await userinfo(without.tokens.access_token)).json()).not.toHaveProperty("name");
  });

  it("refuses a deleted client's access token (issue 27 item 12)", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    expect((await userinfo(tokens.access_token)).status).toBe(200);
    expect((await admin(`/clients/${client.client_id}`, { method: "DELETE" })).status).toBe(204);
    await expectInvalidToken(await userinfo(tokens.access_token));
  });

  it("answers a missing, malformed, forged or expired token with 401 (G4, D8)", async () => {
    const client = await registerClient();
    const start = Date.now();
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(start);
    const { tokens } = await fullLogin(client);
    const none = await call("/userinfo");
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
    await expectInvalidToken(await userinfo("garbage"));
    // The ID token is not an access token.
    await expectInvalidToken(await userinfo(tokens.id_token));
    // alg none, and HS256 keyed with something public.
    const [, body] = tokens.access_token.split(".");
    const noneHeader = btoa(JSON.stringify({ alg: "none", typ: "at+jwt" })).replace(/=+$/, "");
    await expectInvalidToken(await userinfo(`${noneHeader}.${body}.`));
    const hs = await new SignJWT((await verifyJwt(tokens.access_token)).payload)
      .setProtectedHeader({
        alg: "HS256",
        typ: "at+jwt",
        kid: (await verifyJwt(tokens.access_token)).header.kid as string,
      })
      .sign(new TextEncoder().encode(JSON.stringify(await (await call("/jwks.json")).json())));
    await expectInvalidToken(await userinfo(hs));
    // A flipped signature byte.
    const sig = tokens.access_token.slice(-10);
    const flipped = `${tokens.access_token.slice(0, -10)}${sig.startsWith("A") ? "B" : "A"}${sig.slice(1)}`;
    await expectInvalidToken(await userinfo(flipped));
    expect((await userinfo(tokens.access_token)).status).toBe(200);
    vi.setSystemTime(start + 601_000);
    await expectInvalidToken(await userinfo(tokens.access_token));
  });
});

describe("revocation (RFC 7009)", () => {
  it("revokes a refresh token: its family and the access tokens of its grant (D6)", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    await revoke(client, tokens.refresh_token as string, { token_type_hint: "refresh_token" });
    expect((await refreshGrant(client, tokens.refresh_token as string)).status).toBe(400);
    await expectInvalidToken(await userinfo(tokens.access_token));
    const grantId = (tokens.refresh_token as string).split(".")[0] as string;
    const { payload } = await verifyJwt(tokens.access_token);
    expect(
      await sql(
        stubForId("revocation", payload.sid as string),
        "SELECT key FROM revoked WHERE key = ?",
        `grant:${grantId}`,
      ),
    ).toHaveLength(1);
    // Revoking it again is still 200.
    await revoke(client, tokens.refresh_token as string);
  });

  it("revokes an access token alone: userinfo refuses it, the refresh token still works", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    await revoke(client, tokens.access_token, { token_type_hint: "access_token" });
    await expectInvalidToken(await userinfo(tokens.access_token));
    expect(await introspect(client, tokens.access_token)).toEqual({ active: false });
    const { payload } = await verifyJwt(tokens.access_token);
    expect(
      await sql(
        stubForId("revocation", payload.jti as string),
        "SELECT key FROM revoked WHERE key = ?",
        `jti:${payload.jti}`,
      ),
    ).toHaveLength(1);
    const next = await refreshGrant(client, tokens.refresh_token as string);
    expect(next.status).toBe(200);
    expect((await userinfo(((await next.json()) as { access_token: string }).access_token)).status).toBe(200);
  });

  it("answers 200 for a garbage token and does nothing to another client's token (D6)", async () => {
    const a = await registerClient();
    const b = await registerClient();
    const { tokens } = await fullLogin(a);
    await revoke(b, "garbage");
    await revoke(b, "gr_0_0_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.bbbb");
    await revoke(b, tokens.refresh_token as string);
    await revoke(b, tokens.access_token);
    expect((await userinfo(tokens.access_token)).status).toBe(200);
    expect((await refreshGrant(a, tokens.refresh_token as string)).status).toBe(200);
  });

  it("requires client authentication and a token", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    const anon = await call("/revoke", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: tokens.access_token }),
    });
    expect(anon.status).toBe(401);
    const missing = await form(client, {}, "/revoke");
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: string }).error).toBe("invalid_request");
    expect((await userinfo(tokens.access_token)).status).toBe(200);
  });
});

describe("introspection (RFC 7662)", () => {
  it("describes an active access token and refresh token of the calling client", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    const { payload } = await verifyJwt(tokens.access_token);
    expect(await introspect(client, tokens.access_token)).toMatchObject({
      active: true,
      token_type: "Bearer",
      scope: tokens.scope,
      client_id: client.client_id,
      sub: payload.sub,
      exp: payload.exp,
      iat: payload.iat,
      iss: ISSUER,
      jti: payload.jti,
    });
    const rt = await introspect(client, tokens.refresh_token as string);
    expect(rt).toMatchObject({ active: true, client_id: client.client_id, sub: payload.sub });
    // RFC 7662 §2.2's token_type is an access token type (RFC 6749 §7.1); a refresh token has none.
    expect(rt).not.toHaveProperty("token_type");
    expect(rt.exp).toBeGreaterThan(Date.now() / 1000 + 29 * 86_400);
  });

  it("answers inactive for revoked, expired, garbage and other clients' tokens (D7)", async () => {
    const a = await registerClient();
    const b = await registerClient();
    const start = Date.now();
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(start);
    const one = await fullLogin(a);
    expect(await introspect(b, one.tokens.access_token)).toEqual({ active: false });
    expect(await introspect(b, one.tokens.refresh_token as string)).toEqual({ active: false });
    expect(await introspect(a, "garbage")).toEqual({ active: false });
    await revoke(a, one.tokens.refresh_token as string);
    expect(await introspect(a, one.tokens.access_token)).toEqual({ active: false });
    expect(await introspect(a, one.tokens.refresh_token as string)).toEqual({ active: false });
    const two = await fullLogin(a);
    vi.setSystemTime(start + 601_000);
    expect(await introspect(a, two.tokens.access_token)).toEqual({ active: false });
    expect((await introspect(a, two.tokens.refresh_token as string)).active).toBe(true);
  });

  it("answers 401 without client authentication (D7)", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    for (const headers of [{}, { Authorization: `Bearer ${tokens.access_token}` }] as Record<string, string>[]) {
      const res = await call("/introspect", {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded", ...headers },
        body: new URLSearchParams({ token: tokens.access_token }),
      });
      expect(res.status).toBe(401);
      expect(((await res.json()) as { error: string }).error).toBe("invalid_client");
    }
    const wrong = await call("/introspect", {
      method: "POST",
      headers: {
        "Content-Type": "application/x-www-form-urlencoded",
        Authorization: `Basic ${btoa(`${client.client_id}:wrong`)}`,
      },
      body: new URLSearchParams({ token: tokens.access_token }),
    });
    expect(wrong.status).toBe(401);
  });
});

describe("logout (CONTRACT §3) and user revocation (§5)", () => {
  it("ends the session and the tokens of its logins, and redirects to a registered URI with state (E3)", async () => {
    const client = await registerClient();
    const { tokens, browser } = await fullLogin(client);
    const sessionId = browser.cookies.get("kw_session") as string;
    const other = await registerClient();
    const c = await codeFromSession(browser, other);
    const otherLogin = (await (await redeem(other, c.code, c.verifier)).json()) as { access_token: string };

    const res = await browser.fetch(
      `/logout?${new URLSearchParams({
        id_token_hint: tokens.id_token,
        post_logout_redirect_uri: client.post_logout_redirect_uris[0] as string,
        state: "bye-state",
      })}`,
    );
    expect(res.status).toBe(302);
    const loc = new URL(res.headers.get("location") as string);
    expect(`${loc.origin}${loc.pathname}`).toBe(client.post_logout_redirect_uris[0]);
    expect(loc.searchParams.get("state")).toBe("bye-state");
    expect(browser.cookies.has("kw_session")).toBe(false);

    // The session row is expired and holds nothing of the person (it may still carry its login's audit
    // events to D1, issue 44), the sid is marked, every token of the session is dead (both clients).
    const { sid } = (await verifyJwt(tokens.id_token)).payload;
    expect(
      await sql(
        stubForId("session", sessionId),
        "SELECT expires_at, email, sub FROM sessions WHERE session_hash = ?",
        await sha256(sessionId),
      ),
    ).toEqual([{ expires_at: 0, email: "", sub: "" }]);
    expect(
      await sql(stubForId("revocation", sid as string), "SELECT key FROM revoked WHERE key = ?", `sid:${sid}`),
    ).toHaveLength(1);
    await expectInvalidToken(await userinfo(tokens.access_token));
    await expectInvalidToken(await userinfo(otherLogin.access_token));
    expect((await refreshGrant(client, tokens.refresh_token as string)).status).toBe(400);

    // prompt=none with the old cookie: login_required.
    const old = new Browser();
    old.cookies.set("kw_session", sessionId);
    const none = await old.fetch(`/authorize?${authorizeQuery(client, (await pkce()).challenge, { prompt: "none" })}`);
    expect(new URL(none.headers.get("location") as string).searchParams.get("error")).toBe("login_required");
  });

  it("refuses an unregistered post_logout_redirect_uri with an error page and ends nothing", async () => {
    const client = await registerClient();
    const { tokens, browser } = await fullLogin(client);
    const res = await browser.fetch(
      `/logout?${new URLSearchParams({ id_token_hint: tokens.id_token, post_logout_redirect_uri: "https://evil.example.com/" })}`,
    );
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
    expect((await userinfo(tokens.access_token)).status).toBe(200);
    expect((await codeFromSession(browser, client)).code).toBeTruthy();
  });

  it("ends the session's tokens on logout by id_token_hint alone, and the session with them (E3)", async () => {
    const client = await registerClient();
    const { tokens, browser } = await fullLogin(client);
    const res = await call(`/logout?${new URLSearchParams({ id_token_hint: tokens.id_token })}`);
    expect(res.status).toBe(200);
    await expectInvalidToken(await userinfo(tokens.access_token));
    // The browser whose session that was can no longer get codes silently.
    const none = await browser.fetch(
      `/authorize?${authorizeQuery(client, (await pkce()).challenge, { prompt: "none" })}`,
    );
    expect(new URL(none.headers.get("location") as string).searchParams.get("error")).toBe("login_required");
  });

  it("ends every session and token of a revoked user (admin)", async () => {
    const client = await registerClient();
    const { tokens, browser, email } = await fullLogin(client);
    const user = await env.DB.prepare("SELECT id FROM users WHERE email = ?").bind(email).first<{ id: string }>();
    const res = await admin(`/users/${user?.id}/revoke`, { method: "POST" });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { revoked_at: number }).revoked_at).toBeGreaterThan(0);
    await expectInvalidToken(await userinfo(tokens.access_token));
    expect((await refreshGrant(client, tokens.refresh_token as string)).status).toBe(400);
    expect(await introspect(client, tokens.access_token)).toEqual({ active: false });
    const none = await browser.fetch(
      `/authorize?${authorizeQuery(client, (await pkce()).challenge, { prompt: "none" })}`,
    );
    expect(new URL(none.headers.get("location") as string).searchParams.get("error")).toBe("login_required");
  });

  it("lets the user log in again right after a revocation, though logins are timed in whole seconds", async () => {
    const client = await registerClient();
    // The first login a minute back (the resend interval), the revocation and the next login now.
    pinClock(Date.now() - 61_000);
    const { tokens, email } = await fullLogin(client);
    vi.useRealTimers();
    const { sub } = (await verifyJwt(tokens.id_token)).payload;
    expect((await admin(`/users/${sub}/revoke`, { method: "POST" })).status).toBe(200);
    await expectInvalidToken(await userinfo(tokens.access_token));

    const again = await fullLogin(client, email);
    expect((await verifyJwt(again.tokens.id_token)).payload.sub).toBe(sub);
    expect((await userinfo(again.tokens.access_token)).status).toBe(200);
    expect(await introspect(client, again.tokens.access_token)).toMatchObject({ active: true });
    expect((await refreshGrant(client, again.tokens.refresh_token as string)).status).toBe(200);
  });
});
