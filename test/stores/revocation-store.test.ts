import { env, runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { sql } from "../support/harness";

let n = 0;
const fresh = () => env.REVOCATIONS.get(env.REVOCATIONS.idFromName(`test-revocation-${++n}-${Math.random()}`));

describe("RevocationStore", () => {
  it("reports a key revoked once it is marked, and only that key", async () => {
    const s = fresh();
    const later = Date.now() + 3_600_000;
    expect(await s.anyRevoked(["sid:a", "grant:b", "jti:c"])).toBe(false);
    expect(await s.anyRevoked([])).toBe(false);
    await s.revoke(["grant:b"], later);
    expect(await s.anyRevoked(["sid:a", "grant:b", "jti:c"])).toBe(true);
    expect(await s.anyRevoked(["grant:b"])).toBe(true);
    expect(await s.anyRevoked(["sid:a", "jti:c", "grant:bb"])).toBe(false);
  });

  it("marks many keys in one call and keeps the longest expiry", async () => {
    const s = fresh();
    const now = Date.now();
    await s.revoke(["sid:x", "jti:y"], now + 1_000_000);
    await s.revoke(["sid:x"], now + 500_000);
    await s.revoke(["jti:y"], now + 2_000_000);
    const rows = await sql<{ key: string; expires_at: number }>(s, "SELECT key, expires_at FROM revoked ORDER BY key");
    expect(rows).toEqual([
      { key: "jti:y", expires_at: now + 2_000_000 },
      { key: "sid:x", expires_at: now + 1_000_000 },
    ]);
  });

  it("lets the alarm drop marks that outlived every token they could affect", async () => {
    const s = fresh();
    const now = Date.now();
    await s.revoke(["jti:old"], now - 1);
    await s.revoke(["jti:new"], now + 600_000);
    expect(await runDurableObjectAlarm(s)).toBe(true);
    expect(await sql(s, "SELECT key FROM revoked")).toEqual([{ key: "jti:new" }]);
    expect(await s.anyRevoked(["jti:new"])).toBe(true);
  });

  describe("redeemCodeForLogin (issue 28: the login's check and the code's spend in one call)", () => {
    const login = { sid: "sid-r", sub: "usr_r", authTime: Math.floor(Date.now() / 1000) - 10 };
    const redeem = (s: ReturnType<typeof fresh>, codeHash: string, grantId: string | null) =>
      s.redeemCodeForLogin({ login, codeHash, grantId, sid: login.sid, keepUntil: Date.now() + 600_000 });

    it("spends a code once, even under concurrency; a reuse names the grant to revoke", async () => {
      const s = fresh();
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => redeem(s, "c1", `gr_${i}`)));
      const ok = results.filter((r) => r.status === "ok");
      expect(ok).toHaveLength(1);
      const first = await sql<{ grant_id: string }>(s, "SELECT grant_id FROM spent_codes WHERE code_hash = 'c1'");
      expect(results.filter((r) => r.status === "reused")).toEqual(
        Array.from({ length: 7 }, () => ({
          status: "reused",
          grant_id: first[0]?.grant_id,
          sid: "sid-r",
          ended: false,
        })),
      );
    });

    it("a code whose login has ended is spent issuing nothing, in the same call", async () => {
      const s = fresh();
      await s.revoke([`sid:${login.sid}`], Date.now() + 600_000);
      expect(await redeem(s, "c2", "gr_x")).toEqual({ status: "ok", ended: true });
      expect(await sql(s, "SELECT grant_id FROM spent_codes WHERE code_hash = 'c2'")).toEqual([{ grant_id: null }]);
      // Spent, with nothing to revoke.
      expect(await redeem(s, "c2", "gr_y")).toEqual({ status: "spent", ended: true });
    });

    it("a refused presentation (grant null) spends the code too", async () => {
      const s = fresh();
      expect(await redeem(s, "c3", null)).toEqual({ status: "ok", ended: false });
      expect(await redeem(s, "c3", "gr_z")).toEqual({ status: "spent", ended: false });
    });

    it("spends a code presented after its keep-until once: its bucket's end may have passed already", async () => {
      const s = fresh();
      const late = (grantId: string | null) =>
        s.redeemCodeForLogin({ login, codeHash: "c4", grantId, sid: login.sid, keepUntil: Date.now() - 1_200_000 });
      expect(await late(null)).toEqual({ status: "ok", ended: false });
      expect(await late("gr_w")).toEqual({ status: "spent", ended: false });
    });
  });
});
