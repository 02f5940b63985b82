import { afterEach, describe, expect, it, vi } from "vitest";
import {
  admin,
  call,
  form,
  fullLogin,
  pinClock,
  policy,
  refreshGrant,
  registerClient,
  sha256,
  sql,
  stubForId,
  type TestClient,
  type Tokens,
  uniqueEmail,
  userinfo,
  verifyJwt,
  withVars,
} from "../support/harness";

afterEach(() => {
  vi.useRealTimers();
});

async function expectInvalidGrant(res: Response) {
  expect(res.status, await res.clone().text()).toBe(400);
  expect(res.headers.get("cache-control")).toBe("no-store");
  expect(((await res.json()) as { error: string }).error).toBe("invalid_grant");
}

async function rotate(client: TestClient, refreshToken: string, extra: Record<string, string> = {}): Promise<Tokens> {
  const res = await refreshGrant(client, refreshToken, extra);
  expect(res.status, await res.clone().text()).toBe(200);
  expect(res.headers.get("cache-control")).toBe("no-store");
  return (await res.json()) as Tokens;
}

async function familyRow(refreshToken: string) {
  const grantId = refreshToken.split(".")[0] as string;
  const [row] = await sql<{ current_hash: string; previous_hash: string | null; revoked: number }>(
    stubForId("refresh", grantId),
    "SELECT current_hash, previous_hash, revoked FROM families WHERE family_hash = ?",
    await sha256(grantId),
  );
  return row;
}

describe("Token: refresh_token rotation (CONTRACT §3)", () => {
  it("rotates: a new refresh token, new access and ID tokens of the same login", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    const next = await rotate(client, tokens.refresh_token as string);
    expect(next.refresh_token).toBeTruthy();
    expect(next.refresh_token).not.toBe(tokens.refresh_token);
    // Same family (grant id prefix), new secret.
    expect(next.refresh_token?.split(".")[0]).toBe(tokens.refresh_token?.split(".")[0]);
    expect(next.access_token).not.toBe(tokens.access_token);
    expect(next.scope).toBe(tokens.scope);
    const before = await verifyJwt(tokens.id_token, { audience: client.client_id });
    const after = await verifyJwt(next.id_token, { audience: client.client_id });
    for (const claim of ["sub", "sid", "auth_time", "email"])
      expect(after.payload[claim]).toEqual(before.payload[claim]);
    expect((await userinfo(next.access_token)).status).toBe(200);
    expect(await familyRow(next.refresh_token as string)).toEqual({
      current_hash: await sha256(next.refresh_token as string),
      previous_hash: await sha256(tokens.refresh_token as string),
      revoked: 0,
    });
    // The new one rotates in turn.
    await rotate(client, next.refresh_token as string);
  });

  it("answers a retry within the grace window with the same response (D2)", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    const at = pinClock();
    const first = await rotate(client, tokens.refresh_token as string);
    at(4_000);
    const retry = await rotate(client, tokens.refresh_token as string);
    expect(retry).toEqual(first);
    // Only one rotation happened: the retry's refresh token is the current one, and it works.
    expect((await familyRow(first.refresh_token as string))?.current_hash).toBe(
      await sha256(first.refresh_token as string),
    );
    at(10_000);
    await rotate(client, first.refresh_token as string);
  });

  it("gives simultaneous duplicate refreshes one rotation and the same answer (D2)", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    const results = await Promise.all([0, 1, 2].map(() => rotate(client, tokens.refresh_token as string)));
    expect(new Set(results.map((r) => r.refresh_token)).size).toBe(1);
    expect(new Set(results.map((r) => r.access_token)).size).toBe(1);
  });

  it("revokes the whole family when a spent token comes back after the grace window (D1)", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    const at = pinClock();
    const second = await rotate(client, tokens.refresh_token as string);
    const third = await rotate(client, second.refresh_token as string);
    at(6_000);
    await expectInvalidGrant(await refreshGrant(client, tokens.refresh_token as string));
    // Every token of the family is dead, the newest included, and so are its access tokens.
    await expectInvalidGrant(await refreshGrant(client, third.refresh_token as string));
    for (const t of [tokens, second, third]) expect((await userinfo(t.access_token)).status).toBe(401);
    expect((await familyRow(third.refresh_token as string))?.revoked).toBe(1);
    const intro = await form(client, { token: third.refresh_token as string }, "/introspect");
    expect(await intro.json()).toEqual({ active: false });
  });

  it("honours refresh_grace_seconds from the policy", async () => {
    const e = withVars({ POLICY: policy({ refresh_grace_seconds: 0 }) });
    const client = await registerClient({}, e);
    const { tokens } = await fullLogin(client, uniqueEmail(), { env: e });
    const at = pinClock();
    const first = await refreshGrant(client, tokens.refresh_token as string, {}, e);
    expect(first.status).toBe(200);
    at(1);
    await expectInvalidGrant(await refreshGrant(client, tokens.refresh_token as string, {}, e));
  });

  it("caps a family's rotations an hour: 429 with Retry-After, the family intact", async () => {
    const e = withVars({ POLICY: policy({ refresh_rotations_per_hour: 6 }) });
    const client = await registerClient({}, e);
    const { tokens } = await fullLogin(client, uniqueEmail(), { env: e });
    const at = pinClock();
    let token = tokens.refresh_token as string;
    for (let i = 0; i < 6; i++) {
      const res = await refreshGrant(client, token, {}, e);
      expect(res.status, await res.clone().text()).toBe(200);
      token = ((await res.json()) as Tokens).refresh_token as string;
      at((i + 1) * 10_000);
    }
    const refused = await refreshGrant(client, token, {}, e);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(3000);
    expect(((await refused.json()) as { error: string }).error).toBe("too_many_requests");
    // The hour over, the same current token rotates again.
    at(3_600_001);
    expect((await refreshGrant(client, token, {}, e)).status).toBe(200);
  });

  it("refuses another client's refresh token without harming the family (D3)", async () => {
    const a = await registerClient();
    const b = await registerClient();
    const { tokens } = await fullLogin(a);
    await expectInvalidGrant(await refreshGrant(b, tokens.refresh_token as string));
    expect((await userinfo(tokens.access_token)).status).toBe(200);
    await rotate(a, tokens.refresh_token as string);
  });

  it("refuses a wider scope with invalid_scope and does not rotate; a narrower scope works (D4)", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    const res = await refreshGrant(client, tokens.refresh_token as string, { scope: "openid email profile" });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe("invalid_scope");
    expect((await familyRow(tokens.refresh_token as string))?.previous_hash).toBeNull();
    const narrow = await rotate(client, tokens.refresh_token as string, { scope: "openid" });
    expect(narrow.scope).toBe("openid");
    const { payload } = await verifyJwt(narrow.access_token, { typ: "at+jwt" });
    expect(payload.scope).toBe("openid");
    expect(((await (await userinfo(narrow.access_token)).json()) as { email?: string }).email).toBeUndefined();
    // The family keeps its full grant: a later refresh without scope gets all of it back.
    const full = await rotate(client, narrow.refresh_token as string);
    expect(full.scope).toBe(tokens.scope);
  });

  it("refuses refresh past the absolute lifetime (D5)", async () => {
    const client = await registerClient();
    const at = pinClock();
    const { tokens } = await fullLogin(client);
    at(29 * 86_400_000);
    const late = await rotate(client, tokens.refresh_token as string);
    at(30 * 86_400_000);
    await expectInvalidGrant(await refreshGrant(client, late.refresh_token as string));
  });

  it("refuses refresh after logout and after the user is revoked (D5)", async () => {
    const client = await registerClient();
    const out = await fullLogin(client);
    const hint = new URLSearchParams({ id_token_hint: out.tokens.id_token });
    expect((await out.browser.fetch(`/logout?${hint}`)).status).toBe(200);
    await expectInvalidGrant(await refreshGrant(client, out.tokens.refresh_token as string));

    const revoked = await fullLogin(client);
    const { sub } = (await verifyJwt(revoked.tokens.id_token)).payload;
    expect((await admin(`/users/${sub}/revoke`, { method: "POST" })).status).toBe(200);
    await expectInvalidGrant(await refreshGrant(client, revoked.tokens.refresh_token as string));
    expect((await familyRow(revoked.tokens.refresh_token as string))?.revoked).toBe(1);
  });

  it("keeps two logins of one user on one client in two families (D9)", async () => {
    const client = await registerClient();
    const email = uniqueEmail();
    const at = pinClock();
    const one = await fullLogin(client, email);
    at(61_000);
    const two = await fullLogin(client, email);
    const subOne = (await verifyJwt(one.tokens.id_token)).payload.sub;
    expect((await verifyJwt(two.tokens.id_token)).payload.sub).toBe(subOne);
    expect(one.tokens.refresh_token?.split(".")[0]).not.toBe(two.tokens.refresh_token?.split(".")[0]);

    // Revoking one leaves the other working.
    const revoke = await form(client, { token: one.tokens.refresh_token as string }, "/revoke");
    expect(revoke.status).toBe(200);
    await expectInvalidGrant(await refreshGrant(client, one.tokens.refresh_token as string));
    expect((await userinfo(one.tokens.access_token)).status).toBe(401);
    const twoNext = await rotate(client, two.tokens.refresh_token as string);
    expect((await userinfo(two.tokens.access_token)).status).toBe(200);

    // Reuse detected on the second leaves a third family working.
    at(122_000);
    const three = await fullLogin(client, email);
    at(130_000);
    await expectInvalidGrant(await refreshGrant(client, two.tokens.refresh_token as string));
    await expectInvalidGrant(await refreshGrant(client, twoNext.refresh_token as string));
    await rotate(client, three.tokens.refresh_token as string);
    expect((await userinfo(three.tokens.access_token)).status).toBe(200);
  });

  it("refuses a made-up token of a real family without revoking it: grant_id is in every access token", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    const grantId = (await verifyJwt(tokens.access_token)).payload.grant_id as string;
    expect(tokens.refresh_token?.startsWith(`${grantId}.`)).toBe(true);
    await expectInvalidGrant(await refreshGrant(client, `${grantId}.${"A".repeat(43)}`));
    expect((await familyRow(tokens.refresh_token as string))?.revoked).toBe(0);
    expect((await userinfo(tokens.access_token)).status).toBe(200);
    await rotate(client, tokens.refresh_token as string);
  });

  it("refuses malformed refresh requests with OAuth errors", async () => {
    const client = await registerClient();
    for (const token of [
      "",
      "garbage",
      "gr_0_0_x",
      "gr_9_0_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.bbb",
      "x".repeat(5000),
    ]) {
      const res = await form(client, { grant_type: "refresh_token", refresh_token: token });
      expect(res.status).toBe(400);
      expect(["invalid_grant", "invalid_request"]).toContain(((await res.json()) as { error: string }).error);
    }
    const missing = await call("/token", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "refresh_token", client_id: client.client_id }),
    });
    expect(missing.status).toBe(401);
  });
});
