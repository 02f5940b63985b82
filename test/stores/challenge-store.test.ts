import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { OtpPolicy } from "../../durable-objects/contract/verbs";
import { Browser, dumpShard, mailbox, pkce, registerClient, shardStub, sql, uniqueEmail } from "../support/harness";

const P: OtpPolicy = {
  otp_ttl_seconds: 300,
  otp_max_attempts: 5,
  email_failures_per_hour: 10,
  email_failures_per_hour_all_sources: 30,
  email_consecutive_failures: 100,
  resend_interval_seconds: 60,
  sends_per_email_per_hour: 10,
};
const HOUR = 3_600_000;
const T0 = 1_900_000_000_000; // a pinned clock, passed to every verb

let n = 0;
const fresh = () => {
  const name = `test-challenge-${++n}-${Math.random()}`;
  return env.CHALLENGES.get(env.CHALLENGES.idFromName(name));
};
const key = (tag = "e") => `ek-${tag}-${++n}`;
type Shard = ReturnType<typeof fresh>;
const issue = (
  s: Shard,
  emailKey: string,
  txHash: string,
  codeMac: string,
  now: number,
  policy: OtpPolicy,
  sourceKey = "src-a",
) => s.issueChallenge({ emailKey, sourceKey, txHash, codeMac, now, policy });
const verify = (
  s: Shard,
  emailKey: string,
  txHash: string,
  codeMac: string,
  now: number,
  policy: OtpPolicy,
  sourceKey = "src-a",
) => s.verifyChallenge({ emailKey, sourceKey, txHash, codeMac, now, policy });

describe("ChallengeStore", () => {
  it("issues a code and verifies it once", async () => {
    const s = fresh();
    const ek = key();
    expect(await issue(s, ek, "tx1", "mac-right", T0, P)).toEqual({
      ok: true,
      expires_in: 300,
      resend_after: 60,
    });
    expect(await verify(s, ek, "tx1", "mac-right", T0 + 1000, P)).toMatchObject({ status: "ok", user: null });
    // Success consumes the challenge: the same code never works twice.
    expect(await verify(s, ek, "tx1", "mac-right", T0 + 2000, P)).toMatchObject({ status: "invalid" });
    expect(await sql(s, "SELECT * FROM otp_codes WHERE email_key = ?", ek)).toEqual([]);
  });

  it("puts back a spent code as it was, for its login only, while it would be live (issue 38 item 12d)", async () => {
    const s = fresh();
    const ek = key();
    await issue(s, ek, "tx1", "mac-right", T0, P);
    expect((await verify(s, ek, "tx1", "mac-wrong", T0 + 10, P)).status).toBe("invalid");
    const ok = await verify(s, ek, "tx1", "mac-right", T0 + 20, P);
    if (ok.status !== "ok") throw new Error("not verified");
    expect(ok.spent).toEqual({ attempts: 1, expires_at: T0 + 300_000 });
    const restore = (now: number, txHash = "tx1") =>
      s.restoreCode({ emailKey: ek, txHash, codeMac: "mac-right", spent: ok.spent, now });
    expect(await restore(T0 + 30)).toBe(true);
    // As it was: its one wrong attempt still counts (4 more wrong ones end it), its expiry unchanged.
    expect(await sql(s, "SELECT attempts, expires_at FROM otp_codes WHERE email_key = ?", ek)).toEqual([
      { attempts: 1, expires_at: T0 + 300_000 },
    ]);
    expect((await verify(s, ek, "tx1", "mac-right", T0 + 40, P)).status).toBe("ok");
    // Never past its expiry, and never over a newer code of the same login.
    expect(await restore(T0 + 300_000)).toBe(false);
    await issue(s, ek, "tx1", "mac-newer", T0 + 61_000, P);
    expect(await restore(T0 + 61_010)).toBe(false);
    expect((await verify(s, ek, "tx1", "mac-right", T0 + 61_020, P)).status).toBe("invalid");
    expect((await verify(s, ek, "tx1", "mac-newer", T0 + 61_030, P)).status).toBe("ok");
  });

  it("counts a wrong code as an attempt without burning the code (1-4 wrong, then right)", async () => {
    for (const wrong of [1, 2, 3, 4]) {
      const s = fresh();
      const ek = key();
      await issue(s, ek, "tx", "mac-right", T0, P);
      for (let i = 0; i < wrong; i++)
        expect(await verify(s, ek, "tx", `mac-wrong-${i}`, T0 + i, P)).toMatchObject({ status: "invalid" });
      const [row] = await sql<{ attempts: number }>(s, "SELECT attempts FROM otp_codes WHERE email_key = ?", ek);
      expect(row?.attempts).toBe(wrong);
      expect(await verify(s, ek, "tx", "mac-right", T0 + 10, P)).toMatchObject({ status: "ok", user: null });
    }
  });

  it("kills the challenge after 5 wrong codes: the right code then fails (A1)", async () => {
    const s = fresh();
    const ek = key();
    await issue(s, ek, "tx", "mac-right", T0, P);
    for (let i = 0; i < 5; i++) expect((await verify(s, ek, "tx", "nope", T0 + i, P)).status).toBe("invalid");
    expect(await verify(s, ek, "tx", "mac-right", T0 + 10, P)).toMatchObject({ status: "invalid" });
  });

  it("honours otp_max_attempts from the policy", async () => {
    const s = fresh();
    const ek = key();
    const p2 = { ...P, otp_max_attempts: 2 };
    await issue(s, ek, "tx", "mac-right", T0, p2);
    await verify(s, ek, "tx", "nope", T0, p2);
    await verify(s, ek, "tx", "nope", T0, p2);
    expect(await verify(s, ek, "tx", "mac-right", T0, p2)).toMatchObject({ status: "invalid" });
  });

  it("does not accept the right code from another login transaction (A8)", async () => {
    const s = fresh();
    const ek = key();
    await issue(s, ek, "tx-a", "mac-right", T0, P);
    expect(await verify(s, ek, "tx-b", "mac-right", T0 + 1, P)).toMatchObject({ status: "invalid" });
    // The foreign attempt does not count against the owner's challenge.
    const [row] = await sql<{ attempts: number }>(s, "SELECT attempts FROM otp_codes WHERE email_key = ?", ek);
    expect(row?.attempts).toBe(0);
    expect(await verify(s, ek, "tx-a", "mac-right", T0 + 2, P)).toMatchObject({ status: "ok", user: null });
  });

  it("locks out the source that spent an address's failures, not the person; every source together has a bound (issue 15)", async () => {
    const s = fresh();
    const ek = key();
    // The attacker (source A) starts logins for the address and spends ten wrong codes.
    for (const [i, tx] of ["atk-1", "atk-2"].entries()) {
      const t = T0 + i * 60_000;
      expect((await issue(s, ek, tx, `mac-${tx}`, t, P, "src-a")).ok).toBe(true);
      for (let j = 0; j < 5; j++) expect((await verify(s, ek, tx, "bad", t + 1, P, "src-a")).status).toBe("invalid");
    }
    // Locked until the address's hour (begun at the first code) ends.
    expect(await verify(s, ek, "atk-2", "mac-atk-2", T0 + 60_002, P, "src-a")).toEqual({
      status: "locked",
      retry_after: 3540,
    });
    expect(await issue(s, ek, "atk-3", "mac", T0 + 120_000, P, "src-a")).toMatchObject({
      ok: false,
      error: "too_many_requests",
    });
    // The person (source B) still gets a code and signs in with it.
    expect((await issue(s, ek, "own", "mac-own", T0 + 120_000, P, "src-b")).ok).toBe(true);
    expect(await verify(s, ek, "own", "mac-own", T0 + 120_001, P, "src-b")).toMatchObject({ status: "ok", user: null });
    // Her success clears the address's count and her own; the attacker's source stays locked for its hour.
    expect((await verify(s, ek, "atk-2", "mac-atk-2", T0 + 120_002, P, "src-a")).status).toBe("locked");
    const rows = await sql<{ source_key: string; failures: number }>(
      s,
      "SELECT source_key, failures FROM source_failures WHERE email_key = ?",
      ek,
    );
    expect(rows).toEqual([{ source_key: "src-a", failures: 10 }]);
    const [limits] = await sql<{ failures: number }>(s, "SELECT failures FROM email_limits WHERE email_key = ?", ek);
    expect(limits?.failures).toBe(0);

    // Three sources spending ten each lock the address for everyone until the hour ends.
    const p = { ...P, otp_max_attempts: 10, resend_interval_seconds: 10 };
    const s2 = fresh();
    let t = T0;
    for (const src of ["s1", "s2", "s3"]) {
      t += 10_000;
      expect((await issue(s2, ek, `tx-${src}`, "m", t, p, src)).ok).toBe(true);
      for (let i = 0; i < 10; i++) expect((await verify(s2, ek, `tx-${src}`, "bad", t, p, src)).status).toBe("invalid");
    }
    expect((await issue(s2, ek, "tx-victim", "m", t + 10_000, p, "s4")).ok).toBe(false);
    expect((await verify(s2, ek, "tx-s1", "m", t + 10_000, p, "s4")).status).toBe("locked");
    // The hour of the address's count began at the first failure.
    expect((await issue(s2, ek, "tx-victim", "m", T0 + 10_000 + HOUR, p, "s4")).ok).toBe(true);
  });

  it("locks an email for a day after 100 wrong codes in a row across hours; a success resets the run", async () => {
    const s = fresh();
    const ek = key();
    const p = { ...P, otp_max_attempts: 10, email_failures_per_hour: 10, email_consecutive_failures: 30 };
    // Ten wrong codes an hour, the most the hourly limit allows, for three hours.
    let t = T0;
    for (let hour = 0; hour < 3; hour++) {
      t = T0 + hour * HOUR + 1;
      expect((await issue(s, ek, `tx-${hour}`, `mac-${hour}`, t, p)).ok).toBe(true);
      for (let i = 0; i < 10; i++)
        expect((await verify(s, ek, `tx-${hour}`, "bad", t + 1 + i, p)).status).toBe("invalid");
    }
    const last = t + 10;
    // The fourth hour is no fresh start: the run of 30 locks the address until a day after the last failure.
    const t4 = T0 + 3 * HOUR + 1;
    expect(await issue(s, ek, "tx-3", "mac-3", t4, p)).toEqual({
      ok: false,
      error: "too_many_requests",
      retry_after: Math.ceil((last + 24 * HOUR - t4) / 1000),
    });
    expect((await verify(s, ek, "tx-2", "mac-2", t4, p)).status).toBe("locked");
    const after = last + 24 * HOUR;
    expect((await issue(s, ek, "tx-4", "mac-4", after, p)).ok).toBe(true);
    expect(await verify(s, ek, "tx-4", "mac-4", after + 1, p)).toMatchObject({ status: "ok", user: null });

    // A success ends a run: 29 wrong, then the right code, then 29 wrong again, and no lock.
    const s2 = fresh();
    let u = T0;
    const run = async (tag: string, n: number) => {
      for (let i = 0; i < n; i++) {
        if (i % 10 === 0) {
          u += HOUR;
          expect((await issue(s2, ek, `${tag}-${i}`, `mac-${tag}-${i}`, u, p)).ok).toBe(true);
        }
        u += 1;
        expect((await verify(s2, ek, `${tag}-${i - (i % 10)}`, "bad", u, p)).status).toBe("invalid");
      }
    };
    await run("a", 29);
    u += HOUR;
    expect((await issue(s2, ek, "ok", "mac-ok", u, p)).ok).toBe(true);
    expect((await verify(s2, ek, "ok", "mac-ok", u + 1, p)).status).toBe("ok");
    await run("b", 29);
    const [limits] = await sql<{ consecutive: number }>(
      s2,
      "SELECT consecutive FROM email_limits WHERE email_key = ?",
      ek,
    );
    expect(limits?.consecutive).toBe(29);
  });

  it("locks an email after 10 failures across challenges; a new code does not reset it; the hour does (A2)", async () => {
    const s = fresh();
    const ek = key();
    await issue(s, ek, "tx1", "mac-1", T0, P);
    for (let i = 0; i < 5; i++) await verify(s, ek, "tx1", "bad", T0 + 1000 + i, P);
    const t1 = T0 + 61_000;
    expect((await issue(s, ek, "tx2", "mac-2", t1, P)).ok).toBe(true);
    for (let i = 0; i < 4; i++) expect((await verify(s, ek, "tx2", "bad", t1 + i, P)).status).toBe("invalid");
    // The 10th failure is still an ordinary wrong code ...
    expect(await verify(s, ek, "tx2", "bad", t1 + 10, P)).toMatchObject({ status: "invalid" });
    // ... and from then on the email is locked until the hour that began at T0 is over, right code or not.
    const t2 = t1 + 20_000;
    const locked = await verify(s, ek, "tx2", "mac-2", t2, P);
    expect(locked).toEqual({ status: "locked", retry_after: Math.ceil((T0 + HOUR - t2) / 1000) });
    const [limits] = await sql<{ failures: number }>(s, "SELECT failures FROM email_limits WHERE email_key = ?", ek);
    expect(limits?.failures).toBe(10);

    // Asking for a new code is refused, and stores nothing.
    const t3 = t2 + 120_000;
    const refused = await issue(s, ek, "tx3", "mac-3", t3, P);
    expect(refused).toEqual({ ok: false, error: "too_many_requests", retry_after: Math.ceil((T0 + HOUR - t3) / 1000) });
    // (tx1's dead code and tx2's stay, each login's own; nothing for tx3.)
    const codes = await sql<{ tx_hash: string }>(
      s,
      "SELECT tx_hash FROM otp_codes WHERE email_key = ? ORDER BY tx_hash",
      ek,
    );
    expect(codes.map((c) => c.tx_hash)).toEqual(["tx1", "tx2"]);
    expect((await verify(s, ek, "tx3", "mac-3", t3 + 1, P)).status).toBe("locked");

    // After the hour: a new code and a success.
    const t4 = T0 + HOUR + 1;
    expect((await issue(s, ek, "tx4", "mac-4", t4, P)).ok).toBe(true);
    expect(await verify(s, ek, "tx4", "mac-4", t4 + 1, P)).toMatchObject({ status: "ok", user: null });
  });

  it("resets the failure count on success", async () => {
    const s = fresh();
    const ek = key();
    await issue(s, ek, "tx1", "mac-1", T0, P);
    for (let i = 0; i < 4; i++) await verify(s, ek, "tx1", "bad", T0 + i, P);
    await issue(s, ek, "tx2", "mac-2", T0 + 60_000, P);
    for (let i = 0; i < 4; i++) await verify(s, ek, "tx2", "bad", T0 + 60_000 + i, P);
    expect(
      (await sql<{ failures: number }>(s, "SELECT failures FROM email_limits WHERE email_key = ?", ek))[0],
    ).toEqual({ failures: 8 });
    expect(await verify(s, ek, "tx2", "mac-2", T0 + 61_000, P)).toMatchObject({ status: "ok", user: null });
    expect(
      (await sql<{ failures: number }>(s, "SELECT failures FROM email_limits WHERE email_key = ?", ek))[0],
    ).toEqual({ failures: 0 });
    // Without the reset, 2 more failures would lock; with it, 9 more are still plain failures.
    await issue(s, ek, "tx3", "mac-3", T0 + 121_000, P);
    for (let i = 0; i < 5; i++) await verify(s, ek, "tx3", "bad", T0 + 121_000 + i, P);
    await issue(s, ek, "tx4", "mac-4", T0 + 181_000, P);
    for (let i = 0; i < 4; i++) expect((await verify(s, ek, "tx4", "bad", T0 + 181_000 + i, P)).status).toBe("invalid");
  });

  it("refuses a second code within the resend interval with slow_down (A3)", async () => {
    const s = fresh();
    const ek = key();
    await issue(s, ek, "tx1", "mac-1", T0, P);
    expect(await issue(s, ek, "tx2", "mac-2", T0 + 1_000, P)).toEqual({
      ok: false,
      error: "slow_down",
      retry_after: 59,
    });
    expect(await issue(s, ek, "tx2", "mac-2", T0 + 59_500, P)).toEqual({
      ok: false,
      error: "slow_down",
      retry_after: 1,
    });
    // Refused: the first code is still the live one.
    expect(await verify(s, ek, "tx2", "mac-2", T0 + 59_600, P)).toMatchObject({ status: "invalid" });
    const other = key();
    await issue(s, other, "txo", "mac-o", T0, P);
    expect((await issue(s, other, "txo2", "mac-o2", T0 + 60_000, P)).ok).toBe(true);
  });

  it("allows at most 10 codes per email per hour (A4)", async () => {
    const s = fresh();
    const ek = key();
    for (let i = 0; i < 10; i++) expect((await issue(s, ek, `tx${i}`, `mac${i}`, T0 + i * 60_000, P)).ok).toBe(true);
    const t = T0 + 10 * 60_000;
    expect(await issue(s, ek, "tx10", "mac10", t, P)).toEqual({
      ok: false,
      error: "too_many_requests",
      retry_after: Math.ceil((T0 + HOUR - t) / 1000),
    });
    expect((await issue(s, ek, "tx11", "mac11", T0 + HOUR, P)).ok).toBe(true);
  });

  it("voids the older code when a new one is sent (A13)", async () => {
    const s = fresh();
    const ek = key();
    await issue(s, ek, "tx", "mac-old", T0, P);
    await issue(s, ek, "tx", "mac-new", T0 + 60_000, P);
    expect(await verify(s, ek, "tx", "mac-old", T0 + 61_000, P)).toMatchObject({ status: "invalid" });
    expect(await verify(s, ek, "tx", "mac-new", T0 + 62_000, P)).toMatchObject({ status: "ok", user: null });
  });

  it("expires a code after otp_ttl_seconds (A6)", async () => {
    const s = fresh();
    const a = key();
    const b = key();
    await issue(s, a, "tx", "mac", T0, P);
    await issue(s, b, "tx", "mac", T0, P);
    expect(await verify(s, a, "tx", "mac", T0 + 299_999, P)).toMatchObject({ status: "ok", user: null });
    expect(await verify(s, b, "tx", "mac", T0 + 300_000, P)).toMatchObject({ status: "invalid" });
  });

  it("gives exactly one success to concurrent verifies of the right code (A7)", async () => {
    const s = fresh();
    const ek = key();
    await issue(s, ek, "tx", "mac", T0, P);
    const results = await Promise.all(Array.from({ length: 8 }, () => verify(s, ek, "tx", "mac", T0 + 1, P)));
    expect(results.filter((r) => r.status === "ok")).toHaveLength(1);
  });

  it("lets the alarm delete expired challenges, keep an address's limits until 90 days past them, and re-arm", async () => {
    const s = fresh();
    const now = Date.now();
    const DAY = 24 * HOUR;
    const ancient = key("ancient");
    const stale = key("stale");
    const expired = key("expired");
    const live = key("live");
    await issue(s, ancient, "tx", "mac", now - 91 * DAY, P); // limits 90 days past their windows
    await issue(s, stale, "tx", "mac", now - 2 * HOUR, P); // code and limits' windows both long gone
    await issue(s, expired, "tx", "mac", now - 600_000, P); // code gone, limits still in their hour
    await issue(s, live, "tx", "mac", now, P);
    expect(await runDurableObjectAlarm(s)).toBe(true);
    const challenges = await sql<{ email_key: string }>(s, "SELECT email_key FROM otp_codes ORDER BY email_key");
    expect(challenges.map((r) => r.email_key)).toEqual([live]);
    // Limits have no expiry index and are kept 90 days past their windows (issue 28): the address's
    // next sign-in overwrites its row (1 billed row) instead of inserting one the sweep deleted (2).
    // Reads ignore them meanwhile: their windows have ended.
    const limits = await sql<{ email_key: string }>(s, "SELECT email_key FROM email_limits ORDER BY email_key");
    expect(limits.map((r) => r.email_key).sort()).toEqual([expired, live, stale].sort());
    expect(await sql(s, "SELECT name FROM sqlite_master WHERE name = 'email_limits_exp'")).toEqual([]);
    // The sweep re-arms for what is left.
    expect(await runInDurableObject(s, (_i, state) => state.storage.getAlarm())).not.toBeNull();

    // The limits scan runs at most hourly: an ancient row written now waits for the next one.
    const later = key("later");
    await issue(s, later, "tx", "mac", now - 91 * DAY, P);
    expect(await runDurableObjectAlarm(s)).toBe(true);
    const kept = await sql<{ email_key: string }>(s, "SELECT email_key FROM email_limits ORDER BY email_key");
    expect(kept.map((r) => r.email_key)).toContain(later);
    const alarm = await runInDurableObject(s, (_i, state) => state.storage.getAlarm());
    expect(alarm as number).toBeLessThanOrEqual(Date.now() + HOUR);
  });
});

describe("ChallengeStore: what else an address keeps in its shard", () => {
  it("keeps captured mail and the code_sent event with the code, in the same write, and only when the code is issued", async () => {
    const s = fresh();
    const ek = key();
    const sent = {
      id: `ev-${++n}`,
      at: T0,
      kind: "code_sent",
      user_id: null,
      email_key: ek,
      client_id: null,
      ip: null,
      detail: null,
    };
    const captured = { sealed: "sealed-1" };
    expect(
      (
        await s.issueChallenge({
          emailKey: ek,
          sourceKey: "src",
          txHash: "tx",
          codeMac: "m",
          now: T0,
          policy: P,
          captured,
          sent: sent as never,
        })
      ).ok,
    ).toBe(true);
    expect(await s.capturedMail(ek, T0)).toEqual([{ sealed: "sealed-1", sent_at: T0 }]);
    expect(await s.auditBacklog()).toBe(1);
    // Refused (resend interval): neither the mail nor its event is kept.
    const again = { sealed: "sealed-2" };
    expect(
      (
        await s.issueChallenge({
          emailKey: ek,
          sourceKey: "src",
          txHash: "tx",
          codeMac: "m2",
          now: T0 + 1000,
          policy: P,
          captured: again,
          sent: { ...sent, id: `ev-${++n}` } as never,
        })
      ).ok,
    ).toBe(false);
    expect(await s.capturedMail(ek, T0 + 1000)).toHaveLength(1);
    expect(await s.auditBacklog()).toBe(1);
    // Kept an hour.
    expect(await s.capturedMail(ek, T0 + HOUR)).toEqual([]);
  });

  it("returns the user it knows for the address on success, and forgets it when told", async () => {
    const s = fresh();
    const ek = key();
    await issue(s, ek, "tx1", "mac-1", T0, P);
    expect(await verify(s, ek, "tx1", "mac-1", T0 + 1, P)).toMatchObject({ status: "ok", user: null });
    await s.rememberUser(ek, { id: "usr_known" }, T0 + 2);
    await issue(s, ek, "tx2", "mac-2", T0 + 61_000, P);
    expect(await verify(s, ek, "tx2", "mac-2", T0 + 61_001, P)).toMatchObject({
      status: "ok",
      user: { id: "usr_known" },
    });
    await s.forgetUser(ek);
    await issue(s, ek, "tx3", "mac-3", T0 + 122_000, P);
    expect(await verify(s, ek, "tx3", "mac-3", T0 + 122_001, P)).toMatchObject({ status: "ok", user: null });
  });

  it("counts nothing for a transaction with no live code here: no one spends another login's failures", async () => {
    const s = fresh();
    const ek = key();
    await issue(s, ek, "tx-owner", "mac", T0, P);
    for (let i = 0; i < 20; i++)
      expect(await verify(s, ek, `tx-other-${i}`, "guess", T0 + i, P)).toMatchObject({ status: "invalid" });
    expect(await sql(s, "SELECT failures FROM email_limits WHERE email_key = ?", ek)).toEqual([{ failures: 0 }]);
    expect(await verify(s, ek, "tx-owner", "mac", T0 + 100, P)).toMatchObject({ status: "ok", user: null });
  });
});

describe("ChallengeStore storage holds no plaintext (A9)", () => {
  it("keeps neither the email nor the code in any shard", async () => {
    const client = await registerClient();
    const browser = new Browser();
    const email = uniqueEmail("plain");
    const { challenge } = await pkce();
    const tx = await browser.startLogin(client, challenge);
    const res = await browser.postJson("/email-code/generate", { tx, email });
    expect(res.status).toBe(200);
    const [message] = await mailbox(email);
    const code = message?.code as string;
    expect(code).toMatch(/^[0-9]{6}$/);

    const shards = JSON.parse(env.SHARDS) as Record<string, number[]>;
    const dumps: string[] = [];
    for (let g = 0; g < (shards.challenge as number[]).length; g++)
      for (let i = 0; i < (shards.challenge as number[])[g]!; i++)
        dumps.push(await dumpShard(shardStub("challenge", g, i)));
    for (let g = 0; g < (shards.session as number[]).length; g++)
      for (let i = 0; i < (shards.session as number[])[g]!; i++)
        dumps.push(await dumpShard(shardStub("session", g, i)));
    const all = dumps.join("\n");
    // The challenge is there (so the scan looked at the right place) ...
    expect(all).toContain('"code_mac"');
    // ... but neither the address (in any case) nor the code nor the tx id in the clear.
    expect(all.toLowerCase()).not.toContain(email.toLowerCase());
    expect(all).not.toContain(email.split("@")[0] as string);
    expect(all).not.toContain(code);
    expect(all).not.toContain(tx);
  });

  it("owes a wrong code tried outside the address's home to the home shard, keeps it owed when the home cannot be reached, and reports it from the alarm (issue 12)", async () => {
    // Two shards named as the router names them (shardNamed checks the form of a home's address).
    const regionalName = `challenge:g0:s${9000 + ++n}`;
    const homeName = `challenge:g0:s${9000 + ++n}`;
    const regional = env.CHALLENGES.get(env.CHALLENGES.idFromName(regionalName));
    const home = env.CHALLENGES.get(env.CHALLENGES.idFromName(homeName));
    const ek = key("owed");
    const now = Date.now();
    expect(
      (
        await regional.issueChallenge({
          emailKey: ek,
          sourceKey: "src-a",
          txHash: "tx1",
          codeMac: "right",
          now,
          policy: P,
        })
      ).ok,
    ).toBe(true);
    // The home named is not a challenge shard: the report fails, the failure stays owed.
    const args = { emailKey: ek, sourceKey: "src-a", txHash: "tx1", now, policy: P };
    expect(await regional.verifyChallenge({ ...args, codeMac: "wrong", home: "mail:g0:s1" })).toMatchObject({
      status: "invalid",
      counted: true,
    });
    expect(await sql(regional, "SELECT unreported FROM home_reports WHERE email_key = ?", ek)).toEqual([
      { unreported: 1 },
    ]);
    // While it is owed, no code of the address is tried here, the right one included.
    expect(await regional.verifyChallenge({ ...args, codeMac: "right", home: homeName })).toEqual({
      status: "locked",
      retry_after: 1,
    });
    // The alarm reports it (to the home it was owed to; here pointed at a real one).
    await runInDurableObject(regional, (_i, state) => {
      state.storage.sql.exec("UPDATE home_reports SET home = ? WHERE email_key = ?", homeName, ek);
    });
    expect(await runDurableObjectAlarm(regional)).toBe(true);
    expect(await sql(home, "SELECT failures, consecutive FROM email_limits WHERE email_key = ?", ek)).toEqual([
      { failures: 1, consecutive: 1 },
    ]);
    expect(await sql(regional, "SELECT unreported, home_failures FROM home_reports WHERE email_key = ?", ek)).toEqual([
      { unreported: 0, home_failures: 1 },
    ]);
    // Settled: the right code signs in, and tells the home to clear its counts.
    expect(await regional.verifyChallenge({ ...args, codeMac: "right", home: homeName })).toMatchObject({
      status: "ok",
    });
    expect(await sql(home, "SELECT failures, consecutive FROM email_limits WHERE email_key = ?", ek)).toEqual([
      { failures: 0, consecutive: 0 },
    ]);
  });
});
