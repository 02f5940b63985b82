import { env, runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { AuthRequest, SessionInfo } from "../../durable-objects/session-store";
import { sql } from "../support/harness";

const T0 = 1_900_000_000_000;
const TX_EXP = T0 + 900_000;

let n = 0;
const fresh = () => env.SESSIONS.get(env.SESSIONS.idFromName(`test-session-${++n}-${Math.random()}`));
const REQ: AuthRequest = {
  client_id: "client-a",
  redirect_uri: "https://rp.example.com/cb",
  scope: "openid email",
  state: "st",
  nonce: "nn",
  code_challenge: "cc",
};
const session = (over: Partial<SessionInfo> = {}): SessionInfo => ({
  sub: "usr_1",
  email: "a@example.com",
  sid: `sid-${++n}`,
  auth_time: Math.floor(T0 / 1000),
  expires_at: T0 + 86_400_000,
  ...over,
});

async function begun() {
  const s = fresh();
  const tx = `txh-${++n}`;
  await s.beginLogin(tx, REQ, TX_EXP);
  return { s, tx };
}

describe("SessionStore", () => {
  it("binds an email to a live transaction and reports it pending", async () => {
    const { s, tx } = await begun();
    expect(await s.pendingLogin(tx, T0)).toBeNull(); // no email yet
    expect(await s.bindEmail(tx, "email-key", "challenge:0:1", T0)).toBe(true);
    expect(await s.pendingLogin(tx, T0)).toEqual({ email: "email-key", challenge_route: "challenge:0:1" });
    // Rebinding (a resend to another address) replaces it.
    expect(await s.bindEmail(tx, "email-key-2", "challenge:0:2", T0 + 1)).toBe(true);
    expect(await s.pendingLogin(tx, T0 + 1)).toEqual({ email: "email-key-2", challenge_route: "challenge:0:2" });
    expect(await s.bindEmail("unknown", "k", "challenge:0:0", T0)).toBe(false);
  });

  it("expires a transaction", async () => {
    const { s, tx } = await begun();
    expect(await s.bindEmail(tx, "k", "challenge:0:0", TX_EXP)).toBe(false);
    expect(await s.completeLogin(tx, "sh", session(), TX_EXP)).toBe(false);
    expect(await s.resumeLogin(tx, "sh", TX_EXP)).toEqual({ ok: false, reason: "unknown_tx" });
  });

  it("completes a login once, atomically, even under concurrency (A7)", async () => {
    const { s, tx } = await begun();
    await s.bindEmail(tx, "k", "challenge:0:0", T0);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => s.completeLogin(tx, `sh-${i}`, session({ sid: `sid-c-${i}` }), T0 + 1)),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    const sessions = await sql(s, "SELECT session_hash FROM sessions WHERE sid LIKE 'sid-c-%'");
    expect(sessions).toHaveLength(1);
    // Finished: no more binding, no longer pending.
    expect(await s.bindEmail(tx, "k", "challenge:0:0", T0 + 2)).toBe(false);
    expect(await s.pendingLogin(tx, T0 + 2)).toBeNull();
  });

  it("resumes a finished login once, for the session that finished it", async () => {
    const { s, tx } = await begun();
    const info = session();
    expect(await s.resumeLogin(tx, "sh", T0)).toEqual({ ok: false, reason: "not_logged_in" });
    expect(await s.completeLogin(tx, "sh", info, T0)).toBe(true);
    expect(await s.resumeLogin(tx, "other", T0)).toEqual({ ok: false, reason: "session_mismatch" });
    expect(await s.resumeLogin(tx, null, T0)).toEqual({ ok: false, reason: "session_mismatch" });
    expect(await s.resumeLogin(tx, "sh", T0 + 1)).toEqual({ ok: true, request: REQ, session: info });
    // Single use: the transaction is gone, the session stays.
    expect(await s.resumeLogin(tx, "sh", T0 + 2)).toEqual({ ok: false, reason: "unknown_tx" });
    expect(await sql(s, "SELECT * FROM login_tx WHERE tx_hash = ?", tx)).toEqual([]);
    expect(await s.session("sh", T0 + 3)).toEqual(info);
  });

  it("does not resume for a session that has ended", async () => {
    const { s, tx } = await begun();
    await s.completeLogin(tx, "sh", session(), T0);
    await s.endSession("sh");
    expect(await s.resumeLogin(tx, "sh", T0)).toEqual({ ok: false, reason: "not_logged_in" });
  });

  it("serves a session until its absolute expiry", async () => {
    const { s, tx } = await begun();
    const info = session({ expires_at: T0 + 1000 });
    await s.completeLogin(tx, "sh", info, T0);
    expect(await s.session("sh", T0 + 999)).toEqual(info);
    expect(await s.session("sh", T0 + 1000)).toBeNull();
    expect(await s.session("nope", T0)).toBeNull();
  });

  it("ends a session and returns its sid once", async () => {
    const { s, tx } = await begun();
    const info = session();
    await s.completeLogin(tx, "sh", info, T0);
    expect(await s.endSession("sh")).toBe(info.sid);
    expect(await s.endSession("sh")).toBeNull();
    expect(await s.session("sh", T0)).toBeNull();
  });

  it("lets the alarm delete expired transactions and sessions", async () => {
    const s = fresh();
    const now = Date.now();
    await s.beginLogin("tx-dead", REQ, now - 1000);
    await s.beginLogin("tx-live", REQ, now + 900_000);
    await s.completeLogin("tx-live", "sh-live", session({ expires_at: now + 86_400_000 }), now);
    await s.beginLogin("tx-2", REQ, now + 900_000);
    await s.completeLogin("tx-2", "sh-dead", session({ expires_at: now - 1 }), now);
    expect(await runDurableObjectAlarm(s)).toBe(true);
    expect(
      (await sql<{ tx_hash: string }>(s, "SELECT tx_hash FROM login_tx ORDER BY tx_hash")).map((r) => r.tx_hash),
    ).toEqual(["tx-2", "tx-live"]);
    expect(await sql(s, "SELECT session_hash FROM sessions")).toEqual([{ session_hash: "sh-live" }]);
  });
});
