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
});
