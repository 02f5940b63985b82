import { env, runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { RedeemCode } from "../../durable-objects/contract/verbs";
import { sql } from "../support/harness";

const T0 = 1_900_000_000_000;
const KEEP = T0 + 600_000;

let n = 0;
const fresh = () => env.AUTH_CODES.get(env.AUTH_CODES.idFromName(`test-code-${++n}-${Math.random()}`));
const redemption = (over: Partial<RedeemCode> = {}): RedeemCode => ({
  codeHash: `code-hash-${++n}`,
  grantId: "gr-1",
  sid: "sid_0_0_x",
  keepUntil: KEEP,
  ...over,
});

describe("AuthCodeStore", () => {
  it("spends a code once and records what it issued", async () => {
    const s = fresh();
    const r = redemption();
    expect(await s.redeemCode(r)).toEqual({ status: "ok" });
    expect(await sql(s, "SELECT grant_id, sid, expires_at FROM spent_codes WHERE code_hash = ?", r.codeHash)).toEqual([
      { grant_id: "gr-1", sid: "sid_0_0_x", expires_at: KEEP },
    ]);
  });

  it("tells a second redemption the first one's grant id, so its tokens can be revoked (C1)", async () => {
    const s = fresh();
    const first = redemption({ grantId: "gr-first" });
    expect(await s.redeemCode(first)).toEqual({ status: "ok" });
    expect(await s.redeemCode({ ...first, grantId: "gr-second" })).toEqual({
      status: "reused",
      grant_id: "gr-first",
      sid: "sid_0_0_x",
    });
    // A refused presentation (null grant) of a redeemed code still learns what to revoke.
    expect(await s.redeemCode({ ...first, grantId: null })).toMatchObject({ status: "reused", grant_id: "gr-first" });
  });

  it("spends a code on a refused presentation: a later right one gets nothing and revokes nothing", async () => {
    const s = fresh();
    const r = redemption({ grantId: null });
    expect(await s.redeemCode(r)).toEqual({ status: "ok" });
    expect(await s.redeemCode({ ...r, grantId: "gr-late" })).toEqual({ status: "spent" });
  });

  it("redeems exactly once under concurrency (C1)", async () => {
    const s = fresh();
    const r = redemption();
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => s.redeemCode({ ...r, grantId: `gr-${i}` })));
    expect(results.filter((x) => x.status === "ok")).toHaveLength(1);
    expect(results.filter((x) => x.status === "reused")).toHaveLength(7);
    const [row] = await sql<{ grant_id: string }>(
      s,
      "SELECT grant_id FROM spent_codes WHERE code_hash = ?",
      r.codeHash,
    );
    for (const x of results) if (x.status === "reused") expect(x.grant_id).toBe(row?.grant_id);
  });

  it("writes the token_issued event only for a redemption that issues", async () => {
    const s = fresh();
    const event = {
      id: "ev-1",
      at: T0,
      kind: "token_issued",
      user_id: "usr_1",
      email_key: null,
      client_id: "c",
      ip: null,
      detail: null,
    };
    await s.redeemCode(redemption({ grantId: null, issued: event as never }));
    expect(await s.auditBacklog()).toBe(0);
    await s.redeemCode(redemption({ issued: event as never }));
    expect(await s.auditBacklog()).toBe(1);
  });

  it("lets the alarm delete spent marks once their tokens cannot live any more", async () => {
    const s = fresh();
    const now = Date.now();
    await s.redeemCode(redemption({ codeHash: "dead", keepUntil: now - 1 }));
    await s.redeemCode(redemption({ codeHash: "live", keepUntil: now + 600_000 }));
    expect(await runDurableObjectAlarm(s)).toBe(true);
    expect(await sql(s, "SELECT code_hash FROM spent_codes")).toEqual([{ code_hash: "live" }]);
  });
});

describe("AuthCodeStore: device grants (RFC 8628)", () => {
  const start = (s: ReturnType<typeof fresh>, userCode: string, deviceHash = `dh-${++n}`) =>
    s.startDevice({
      deviceHash,
      userCode,
      clientId: "kwc_tv",
      scope: "openid",
      intervalMs: 5_000,
      expiresAt: T0 + 600_000,
    });

  it("refuses a user code already pending, and finds a pending one until it expires", async () => {
    const s = fresh();
    expect(await start(s, "BCDFGHJK")).toBe(true);
    expect(await start(s, "BCDFGHJK")).toBe(false);
    expect(await s.findDevice("BCDFGHJK", "src-a", T0)).toMatchObject({
      status: "pending",
      client_id: "kwc_tv",
      scope: "openid",
    });
    expect(await s.findDevice("BCDFGHJK", "src-a", T0 + 600_000)).toEqual({ status: "unknown" });
  });

  it("bounds guessing per source (20 a minute) and, as a breaker, per shard (600), never one guesser for all", async () => {
    const s = fresh();
    await start(s, "BCDFGHJK");
    const minute = Math.floor(T0 / 60_000) * 60_000;
    const wrong = (i: number) => `ZZZZZZ${String.fromCharCode(66 + (i % 20))}B`;
    for (let i = 0; i < 20; i++) expect((await s.findDevice(wrong(i), "guesser", minute + i)).status).toBe("unknown");
    // The guesser's lookups wait for the next minute, even of a right code...
    expect(await s.findDevice("BCDFGHJK", "guesser", minute + 100)).toEqual({ status: "throttled", retry_after: 60 });
    // ...and everyone else's go on.
    expect((await s.findDevice("BCDFGHJK", "person", minute + 100)).status).toBe("pending");
    // Many sources together trip the shard's breaker, for everyone, until the minute ends.
    for (let i = 0; i < 580; i++) await s.findDevice(wrong(i), `bot-${Math.floor(i / 19)}`, minute + 200);
    expect((await s.findDevice("BCDFGHJK", "person", minute + 300)).status).toBe("throttled");
    expect((await s.findDevice("BCDFGHJK", "person", minute + 60_000)).status).toBe("pending");
  });

  it("decides once, answers approved once, then nothing", async () => {
    const s = fresh();
    await start(s, "CDFGHJKL", "dh-approve");
    const login = { sub: "usr_1", email: "a@example.com", sid: "sid_0_0_x", auth_time: T0 / 1000 };
    expect(await s.pollDevice({ deviceHash: "dh-approve", clientId: "kwc_tv", now: T0 })).toEqual({
      status: "pending",
    });
    expect(await s.decideDevice({ userCode: "CDFGHJKL", approvedBy: login, now: T0 })).toBe(true);
    expect(await s.decideDevice({ userCode: "CDFGHJKL", approvedBy: null, now: T0 })).toBe(false);
    expect(await s.pollDevice({ deviceHash: "dh-approve", clientId: "kwc_other", now: T0 + 10_000 })).toEqual({
      status: "invalid",
    });
    expect(await s.pollDevice({ deviceHash: "dh-approve", clientId: "kwc_tv", now: T0 + 10_000 })).toEqual({
      status: "approved",
      login,
      scope: "openid",
    });
    expect(await s.pollDevice({ deviceHash: "dh-approve", clientId: "kwc_tv", now: T0 + 20_000 })).toEqual({
      status: "invalid",
    });
    // The login is not kept once the tokens are issued.
    expect(await sql(s, "SELECT status, login FROM device_grants WHERE device_hash = ?", "dh-approve")).toEqual([
      { status: "issued", login: null },
    ]);
  });
});
