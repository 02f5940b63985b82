import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { hmac } from "../../durable-objects/contract/crypto";
import { loadConfig } from "../../workers/shared/config/config";
import { routeKey } from "../../workers/shared/routing/shard-refs";
import {
  Browser,
  call,
  codeFromSession,
  form,
  fullLogin,
  idParts,
  loginForCode,
  mailbox,
  pinClock,
  pkce,
  policy,
  redeem,
  refreshGrant,
  registerClient,
  sealedIdPart,
  sha256,
  shardStub,
  sql,
  stubForId,
  type Tokens,
  uniqueEmail,
  userinfo,
  verifyJwt,
  withVars,
} from "../support/harness";

const STORES = ["session", "challenge", "code", "revocation", "refresh"] as const;
const NEW_COUNT = 8;

/** The test env with every store's shard count raised to 8: a new generation 1 appended. */
function raisedEnv() {
  const current = JSON.parse(env.SHARDS) as Record<string, number[]>;
  const next: Record<string, number[]> = { ...current };
  for (const s of STORES) next[s] = [...(current[s] as number[]), NEW_COUNT];
  return withVars({ SHARDS: JSON.stringify(next) });
}

/** The generation an id (or a refresh token, `<grant id>.<secret>`) was placed in. */
const genOf = (id: string) => idParts(id.split(".")[0] as string).gen;
const gen0 = (id: string) => expect(genOf(id), id).toBe(0);

async function json<T>(res: Response, status = 200): Promise<T> {
  expect(res.status, await res.clone().text()).toBe(status);
  return (await res.json()) as T;
}

describe("raising shard counts (a new generation)", () => {
  it("keeps every id issued before resolving, and places new ids in generation 1 across all new shards", async () => {
    const e2 = raisedEnv();
    const client = await registerClient();

    // ---- Before: state of every kind under generation 0. ----
    const a = await fullLogin(client); // a session, a sid, a refresh family, an access token
    const aSession = a.browser.cookies.get("kw_session") as string;
    const aAccess = await verifyJwt(a.tokens.access_token);
    gen0(aSession);
    gen0(a.tx);
    gen0(a.tokens.refresh_token as string);
    gen0(aAccess.payload.jti as string);
    gen0(aAccess.payload.sid as string);

    const b = await loginForCode(client); // an unredeemed code
    gen0(b.code);

    // A login waiting for its code (tx and challenge in generation 0) ...
    const c = { email: uniqueEmail("pending") };
    const { challenge: cChallenge, verifier: cVerifier } = await pkce();
    const cOld = new Browser();
    const cTxOld = await cOld.startLogin(client, cChallenge);
    gen0(cTxOld);
    expect((await cOld.postJson("/email-code/generate", { tx: cTxOld, email: c.email })).status).toBe(200);
    const cCode = (await mailbox(c.email))[0]?.code as string;
    // ... and one that has not asked for a code yet.
    const d = new Browser();
    const { challenge: dChallenge, verifier: dVerifier } = await pkce();
    const dTx = await d.startLogin(client, dChallenge);
    gen0(dTx);

    // ---- After: the same browsers and tokens, served under the raised config. ----
    for (const br of [a.browser, cOld, d]) Object.assign(br, { env: e2 });

    // The pending login finishes: verify goes to the challenge's recorded generation-0 shard.
    const cVer = await json<{ redirect_to: string }>(
      await cOld.postJson("/email-code/verify", { tx: cTxOld, email: c.email, code: cCode }),
    );
    const cSession = cOld.cookies.get("kw_session") as string;
    gen0(cSession); // a session is created in its tx's shard
    const cFin = await cOld.fetch(cVer.redirect_to);
    expect(cFin.status).toBe(302);
    const cNewCode = new URL(cFin.headers.get("location") as string).searchParams.get("code") as string;
    expect(idParts(cNewCode).gen).toBe(1);
    const cTokens = await json<Tokens>(await redeem(client, cNewCode, cVerifier, {}, e2));
    expect(genOf(cTokens.refresh_token as string)).toBe(1);

    // The login that had not asked yet: its code goes to the challenge generation the login began in
    // (its tx carries it sealed), so its generate and verify find the same shard whatever changes between.
    const dEmail = uniqueEmail("late");
    expect((await d.postJson("/email-code/generate", { tx: dTx, email: dEmail })).status).toBe(200);
    const dTxHash = await sha256(sealedIdPart(dTx));
    const where = [];
    for (const [gen, count] of [
      [0, 3],
      [1, NEW_COUNT],
    ] as const)
      for (let s = 0; s < count; s++)
        if ((await sql(shardStub("challenge", gen, s), "SELECT 1 FROM otp_codes WHERE tx_hash = ?", dTxHash)).length)
          where.push(gen);
    expect(where).toEqual([0]);
    const dCode = (await mailbox(dEmail, e2))[0]?.code as string;
    const dVer = await json<{ redirect_to: string }>(
      await d.postJson("/email-code/verify", { tx: dTx, email: dEmail, code: dCode }),
    );
    const dFin = await d.fetch(dVer.redirect_to);
    const dAuthCode = new URL(dFin.headers.get("location") as string).searchParams.get("code") as string;
    expect((await redeem(client, dAuthCode, dVerifier, {}, e2)).status).toBe(200);

    // The unredeemed generation-0 code redeems.
    const bTokens = await json<Tokens>(await redeem(client, b.code, b.verifier, {}, e2));
    expect(genOf(bTokens.refresh_token as string)).toBe(1);

    // The generation-0 session still answers prompt=none; the new code is generation 1.
    const aAgain = await codeFromSession(a.browser, client);
    expect(idParts(aAgain.code).gen).toBe(1);
    expect((await redeem(client, aAgain.code, aAgain.verifier, {}, e2)).status).toBe(200);

    // Old tokens: the access token's jti and sid resolve, the refresh family rotates in place.
    expect((await userinfo(a.tokens.access_token, e2)).status).toBe(200);
    const intro = await json<{ active: boolean }>(
      await form(client, { token: a.tokens.access_token }, "/introspect", e2),
    );
    expect(intro.active).toBe(true);
    const rotated = await json<Tokens>(await refreshGrant(client, a.tokens.refresh_token as string, {}, e2));
    gen0(rotated.refresh_token as string);
    const rotatedJti = (await verifyJwt(rotated.access_token)).payload.jti as string;
    gen0(rotatedJti); // colocated with its generation-0 sid
    expect((await userinfo(rotated.access_token, e2)).status).toBe(200);

    // Revocation under the new config lands where the old config looks too.
    expect((await form(client, { token: a.tokens.access_token }, "/revoke", e2)).status).toBe(200);
    expect((await userinfo(a.tokens.access_token)).status).toBe(401);
    expect((await userinfo(a.tokens.access_token, e2)).status).toBe(401);
    expect((await userinfo(rotated.access_token, e2)).status).toBe(200);

    // Logout of the generation-0 session ends it and its tokens.
    expect((await a.browser.fetch(`/logout?id_token_hint=${a.tokens.id_token}`)).status).toBe(200);
    expect(
      await sql(
        stubForId("session", aSession),
        "SELECT 1 FROM sessions WHERE session_hash = ? AND expires_at > 0",
        await sha256(aSession),
      ),
    ).toEqual([]);
    expect((await userinfo(rotated.access_token, e2)).status).toBe(401);
    expect((await refreshGrant(client, rotated.refresh_token as string, {}, e2)).status).toBe(400);

    // A generation-1 id means nothing to the old config (it never had those shards).
    const old = await userinfo(cTokens.access_token);
    expect(old.status).toBe(401);
    expect((await userinfo(cTokens.access_token, e2)).status).toBe(200);
  });

  it("spreads new ids of every kind over all shards of generation 1, and stores them there", async () => {
    const e2 = raisedEnv();
    const client = await registerClient({}, e2);
    const seen: Record<string, Set<number>> = {
      tx: new Set(),
      ses: new Set(),
      sid: new Set(),
      at: new Set(),
      ac: new Set(),
      gr: new Set(),
    };
    const note = (id: string) => {
      const p = idParts(id);
      expect(p.gen, id).toBe(1);
      seen[p.prefix]?.add(p.shard);
    };

    const logins = [];
    const N = 96;
    for (let batch = 0; batch < N; batch += 24)
      logins.push(
        ...(await Promise.all(
          Array.from({ length: 24 }, async () => {
            const r = await fullLogin(client, uniqueEmail("spread"), { env: e2 });
            const at = await verifyJwt(r.tokens.access_token);
            note(r.tx);
            note(r.browser.cookies.get("kw_session") as string);
            note(at.payload.sid as string);
            note(at.payload.jti as string);
            note(r.code);
            note((r.tokens.refresh_token as string).split(".")[0] as string);
            return r;
          }),
        )),
      );
    for (const [kind, shards] of Object.entries(seen))
      expect(
        [...shards].sort((x, y) => x - y),
        kind,
      ).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);

    // Stored where the ids say: the session row in session:g1:s<k>, the family in refresh:g1:s<k>.
    const one = logins[0] as (typeof logins)[number];
    const sessionId = one.browser.cookies.get("kw_session") as string;
    expect(
      await sql(
        stubForId("session", sessionId),
        "SELECT sid FROM sessions WHERE session_hash = ?",
        await sha256(sessionId),
      ),
    ).toHaveLength(1);
    const grantId = (one.tokens.refresh_token as string).split(".")[0] as string;
    expect(
      await sql(stubForId("refresh", grantId), "SELECT 1 FROM families WHERE family_hash = ?", await sha256(grantId)),
    ).toHaveLength(1);
    // And not in the generation-0 object of the same shard number.
    const { shard } = idParts(grantId);
    if (shard < 3) {
      expect(
        await sql(
          shardStub("refresh", 0, shard),
          "SELECT 1 FROM families WHERE family_hash = ?",
          await sha256(grantId),
        ),
      ).toEqual([]);
    }
  });

  it("reports the new generation at /admin/v1/shards", async () => {
    const e2 = raisedEnv();
    const res = await call("/admin/v1/shards", { headers: { Authorization: `Bearer ${env.ADMIN_TOKEN}` } }, e2);
    const { stores } = (await res.json()) as { stores: Record<string, { generation: number; shards: number }> };
    for (const s of STORES) expect(stores[s]).toMatchObject({ generation: 1, shards: NEW_COUNT });
  });
});

/** SHARDS with generation 1 appended to every store, issued into only from `from` (accept before issue). */
function pendingEnv(from: number) {
  const current = JSON.parse(env.SHARDS) as Record<string, unknown[]>;
  const next: Record<string, unknown[]> = { ...current };
  for (const s of STORES)
    next[s] = [...(current[s] as unknown[]), { shards: NEW_COUNT, from: new Date(from).toISOString() }];
  return withVars({ SHARDS: JSON.stringify(next) });
}

describe("a rollout never refuses a valid id (issue 15 item 3: accept before issue)", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("without a `from`, a Worker still on the old SHARDS refuses the new generation's ids: why `from` exists", async () => {
    const client = await registerClient();
    // op-auth already has the raised counts, op-token not yet: the code is issued in generation 1 ...
    const login = await loginForCode(client, uniqueEmail(), { env: raisedEnv() });
    expect(genOf(login.code)).toBe(1);
    // ... and op-token, on the old config, cannot route it.
    const res = await redeem(client, login.code, login.verifier);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe("invalid_grant");
  });

  it("with a `from`, every Worker routes the new generation at once and issues into it only from then", async () => {
    const at = pinClock();
    const t0 = Date.now();
    const from = t0 + 15 * 60_000;
    const rolledOut = pendingEnv(from);
    const client = await registerClient();

    // Mid-rollout, before `from`: op-auth on the new SHARDS, op-token on the old. Ids go to generation 0,
    // which both know, so nothing is refused in either direction.
    const login = await loginForCode(client, uniqueEmail(), { env: rolledOut });
    gen0(login.code);
    gen0(login.browser.cookies.get("kw_session") as string);
    const tokens = await json<Tokens>(await redeem(client, login.code, login.verifier));
    gen0(tokens.refresh_token as string);
    // op-token deployed too: the old one's refresh token and the new one's both rotate.
    const rotated = await json<Tokens>(await refreshGrant(client, tokens.refresh_token as string, {}, rolledOut));
    gen0(rotated.refresh_token as string);
    expect((await userinfo(rotated.access_token, rolledOut)).status).toBe(200);
    const admin = { headers: { Authorization: `Bearer ${env.ADMIN_TOKEN}` } };
    const pending = (await (await call("/admin/v1/shards", admin, rolledOut)).json()) as {
      stores: Record<string, { generation: number; issue_from: (string | null)[] }>;
    };
    expect(pending.stores.session).toMatchObject({ generation: 0, issue_from: [null, new Date(from).toISOString()] });

    // From `from` on, with every Worker rolled out: new ids go to generation 1 and still resolve.
    at(15 * 60_000 + 1);
    const later = await loginForCode(client, uniqueEmail(), { env: rolledOut });
    expect(genOf(later.code)).toBe(1);
    expect(genOf(later.browser.cookies.get("kw_session") as string)).toBe(1);
    const next = await json<Tokens>(await redeem(client, later.code, later.verifier, {}, rolledOut));
    expect(genOf(next.refresh_token as string)).toBe(1);
    expect(genOf((await verifyJwt(next.access_token)).payload.jti as string)).toBe(1);
    // And what was issued before `from` keeps its route.
    const again = await json<Tokens>(await refreshGrant(client, rotated.refresh_token as string, {}, rolledOut));
    gen0(again.refresh_token as string);
    const live = (await (await call("/admin/v1/shards", admin, rolledOut)).json()) as typeof pending;
    expect(live.stores.session?.generation).toBe(1);
  });

  it("refuses a `from` earlier than the generation before it, and one that is not a date", async () => {
    const current = JSON.parse(env.SHARDS) as Record<string, unknown[]>;
    for (const session of [
      [3, { shards: 8, from: "2030-01-02T00:00:00Z" }, { shards: 9, from: "2030-01-01T00:00:00Z" }],
      [3, { shards: 8, from: "tomorrow" }],
      [3, { shards: 8 }],
    ]) {
      const e = withVars({ SHARDS: JSON.stringify({ ...current, session }) });
      const res = await call("/.well-known/openid-configuration", {}, e);
      expect(res.status, JSON.stringify(session)).toBe(503);
    }
  });
});

describe("limits across a challenge-store shard count change (issue 27 item 9)", () => {
  afterEach(() => vi.useRealTimers());

  it("a source locked before the switch stays locked after it: one counted guess, then 429", async () => {
    const limits = { POLICY: policy({ otp_max_attempts: 10 }) };
    const before = withVars(limits);
    const after = withVars(limits, raisedEnv());
    const client = await registerClient();
    const email = uniqueEmail("carry");
    const ip = "198.51.100.77";
    const advance = pinClock();

    // Generation 0: the source spends its 10 wrong codes for the address and is locked.
    const old = new Browser({ env: before, ip });
    const { challenge } = await pkce();
    const tx = await old.startLogin(client, challenge);
    expect((await old.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    const real = (await mailbox(email, before))[0]?.code as string;
    const wrong = real === "000000" ? "111111" : "000000";
    for (let i = 0; i < 10; i++)
      expect((await old.postJson("/email-code/verify", { tx, email, code: wrong })).status).toBe(400);
    expect((await old.postJson("/email-code/verify", { tx, email, code: wrong })).status).toBe(429);

    // The count is raised: a new login from the same source lands on the address's generation-1 shard.
    advance(61_000);
    const fresh = new Browser({ env: after, ip });
    const { challenge: c2 } = await pkce();
    const tx2 = await fresh.startLogin(client, c2);
    expect(genOf(tx2)).toBe(1);
    expect((await fresh.postJson("/email-code/generate", { tx: tx2, email })).status).toBe(200);
    const real2 = (await mailbox(email, after))[0]?.code as string;
    const wrong2 = real2 === "000000" ? "111111" : "000000";
    let counted = 0;
    let locked = false;
    for (let i = 0; i < 10 && !locked; i++) {
      const res = await fresh.postJson("/email-code/verify", { tx: tx2, email, code: wrong2 });
      if (res.status === 400) counted++;
      else {
        expect(res.status, await res.clone().text()).toBe(429);
        locked = true;
      }
    }
    expect(locked).toBe(true);
    expect(counted).toBe(1);
    // The right code is refused too: the source is locked for the address, as it was before the switch.
    expect((await fresh.postJson("/email-code/verify", { tx: tx2, email, code: real2 })).status).toBe(429);
    // Carried once: after the person signs in (below), a typo of hers carries nothing again.
    const person = new Browser({ env: after });
    const { challenge: c3 } = await pkce();
    const tx3 = await person.startLogin(client, c3);
    advance(122_000);
    expect((await person.postJson("/email-code/generate", { tx: tx3, email })).status).toBe(200);
    const mine = (await mailbox(email, after))[0]?.code as string;
    expect((await person.postJson("/email-code/verify", { tx: tx3, email, code: mine })).status).toBe(200);
    const person2 = new Browser({ env: after });
    const tx4 = await person2.startLogin(client, (await pkce()).challenge);
    advance(183_000);
    expect((await person2.postJson("/email-code/generate", { tx: tx4, email })).status).toBe(200);
    const fresh4 = (await mailbox(email, after))[0]?.code as string;
    const typo = await person2.postJson("/email-code/verify", {
      tx: tx4,
      email,
      code: fresh4 === "000000" ? "111111" : "000000",
    });
    expect(typo.status).toBe(400);
    const key = await hmac(loadConfig(after).OTP_HMAC_SECRET, `email:${email}`);
    const shard = routeKey(loadConfig(after), "challenge", key, "global");
    const [row] = await sql<{ consecutive: number }>(
      shardStub("challenge", shard.gen, shard.shard),
      "SELECT consecutive FROM email_limits WHERE email_key = ?",
      key,
    );
    // One wrong code in a row after the sign-in, not the 10 of generation 0 carried again.
    expect(row?.consecutive).toBe(1);
  });
});
