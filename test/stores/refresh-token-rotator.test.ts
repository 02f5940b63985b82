import { env, runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { FamilyGrant } from "../../durable-objects/contract/verbs";
import { sql } from "../support/harness";

const T0 = 1_900_000_000_000;
const EXPIRES = T0 + 30 * 86_400_000;
const GRACE = 5_000;

let n = 0;
const fresh = () => env.REFRESH_TOKENS.get(env.REFRESH_TOKENS.idFromName(`test-refresh-${++n}-${Math.random()}`));
const G: FamilyGrant = {
  client_id: "client-a",
  sub: "usr_1",
  email: "a@example.com",
  sid: "sid_0_0_x",
  scope: "openid email offline_access",
  auth_time: Math.floor(T0 / 1000),
};

/** rotateRefresh with its arguments in order, the hourly cap generous unless given. */
const rotate = (
  s: ReturnType<typeof fresh>,
  familyHash: string,
  presentedHash: string,
  clientId: string,
  nextHash: string,
  sealedNext: string,
  now: number,
  graceMs: number,
  requestedScope: string[] | null,
  maxRotationsPerHour = 1000,
) =>
  s.rotateRefresh({
    familyHash,
    presentedHash,
    clientId,
    nextHash,
    sealedNext,
    now,
    graceMs,
    requestedScope,
    maxRotationsPerHour,
  });

async function family() {
  const s = fresh();
  const fam = `fam-${++n}`;
  await s.createFamily(fam, "t0", G, T0, EXPIRES);
  return { s, fam };
}

describe("RefreshTokenRotator", () => {
  it("rotates the current token; the old one is then spent", async () => {
    const { s, fam } = await family();
    expect(await rotate(s, fam, "t0", "client-a", "t1", "sealed-1", T0 + 1000, GRACE, null)).toEqual({
      status: "rotated",
      grant: G,
      created_at: T0,
    });
    const [row] = await sql(
      s,
      "SELECT current_hash, previous_hash, previous_sealed FROM families WHERE family_hash = ?",
      fam,
    );
    expect(row).toEqual({ current_hash: "t1", previous_hash: "t0", previous_sealed: "sealed-1" });
    expect((await rotate(s, fam, "t1", "client-a", "t2", "sealed-2", T0 + 2000, GRACE, null)).status).toBe("rotated");
  });

  it("answers a retry of the replaced token within the grace window with the sealed copy (D2)", async () => {
    const { s, fam } = await family();
    await rotate(s, fam, "t0", "client-a", "t1", "sealed-1", T0, GRACE, null);
    expect(await rotate(s, fam, "t0", "client-a", "t1-other", "sealed-x", T0 + GRACE, GRACE, null)).toEqual({
      status: "retry",
      sealed: "sealed-1",
      grant: G,
    });
    // The retry changed nothing: t1 is still current.
    const [row] = await sql<{ current_hash: string }>(
      s,
      "SELECT current_hash FROM families WHERE family_hash = ?",
      fam,
    );
    expect(row?.current_hash).toBe("t1");
    expect((await rotate(s, fam, "t1", "client-a", "t2", "sealed-2", T0 + GRACE + 1, GRACE, null)).status).toBe(
      "rotated",
    );
  });

  it("revokes the whole family when a spent token comes back after the grace window (D1)", async () => {
    const { s, fam } = await family();
    await rotate(s, fam, "t0", "client-a", "t1", "sealed-1", T0, GRACE, null);
    expect(await rotate(s, fam, "t0", "client-a", "tx", "sx", T0 + GRACE + 1, GRACE, null)).toEqual({
      status: "reuse_detected",
      grant: G,
    });
    const [row] = await sql(s, "SELECT revoked, previous_sealed FROM families WHERE family_hash = ?", fam);
    expect(row).toEqual({ revoked: 1, previous_sealed: null });
    // Even the newest token is dead now, and so is a retry of the spent one.
    expect(await rotate(s, fam, "t1", "client-a", "t2", "s2", T0 + GRACE + 2, GRACE, null)).toEqual({
      status: "invalid",
    });
    expect(await rotate(s, fam, "t0", "client-a", "t2", "s2", T0 + GRACE + 3, GRACE, null)).toEqual({
      status: "invalid",
    });
    expect(await s.familyOf(fam, "t1", T0 + GRACE + 4)).toBeNull();
  });

  it("keeps every rotated-out token as spent until the family expires", async () => {
    const { s, fam } = await family();
    await rotate(s, fam, "t0", "client-a", "t1", "s1", T0, GRACE, null);
    await rotate(s, fam, "t1", "client-a", "t2", "s2", T0 + 1, GRACE, null);
    expect(await sql(s, "SELECT token_hash, family_hash, expires_at FROM spent_tokens ORDER BY token_hash")).toEqual([
      { token_hash: "t0", family_hash: fam, expires_at: EXPIRES },
      { token_hash: "t1", family_hash: fam, expires_at: EXPIRES },
    ]);
  });

  it("still takes the previous token for reuse when spent_tokens has no row for it (a family rotated before the table)", async () => {
    const { s, fam } = await family();
    await rotate(s, fam, "t0", "client-a", "t1", "s1", T0, GRACE, null);
    await sql(s, "DELETE FROM spent_tokens");
    expect((await rotate(s, fam, "t0", "client-a", "tx", "sx", T0 + GRACE + 1, GRACE, null)).status).toBe(
      "reuse_detected",
    );
  });

  it("answers a token the family never issued with invalid, and leaves the family alone", async () => {
    const { s, fam } = await family();
    await rotate(s, fam, "t0", "client-a", "t1", "s1", T0, GRACE, null);
    // The family id is known to anyone holding one of its access tokens (grant_id); the secret is not.
    expect(await rotate(s, fam, "made-up", "client-a", "tx", "sx", T0 + 1, GRACE, null)).toEqual({
      status: "invalid",
    });
    const [row] = await sql(s, "SELECT revoked, current_hash FROM families WHERE family_hash = ?", fam);
    expect(row).toEqual({ revoked: 0, current_hash: "t1" });
    expect((await rotate(s, fam, "t1", "client-a", "t2", "s2", T0 + 2, GRACE, null)).status).toBe("rotated");
  });

  it("treats a token two rotations old as reuse even within the grace window", async () => {
    const { s, fam } = await family();
    await rotate(s, fam, "t0", "client-a", "t1", "s1", T0, GRACE, null);
    await rotate(s, fam, "t1", "client-a", "t2", "s2", T0 + 1, GRACE, null);
    expect((await rotate(s, fam, "t0", "client-a", "t3", "s3", T0 + 2, GRACE, null)).status).toBe("reuse_detected");
    expect((await rotate(s, fam, "t2", "client-a", "t3", "s3", T0 + 3, GRACE, null)).status).toBe("invalid");
  });

  it("refuses another client without rotating or revoking (D3)", async () => {
    const { s, fam } = await family();
    expect(await rotate(s, fam, "t0", "client-b", "t1", "s1", T0, GRACE, null)).toEqual({ status: "invalid" });
    // A spent token from another client does not trigger reuse detection either.
    expect((await rotate(s, fam, "t0", "client-a", "t1", "s1", T0 + 1, GRACE, null)).status).toBe("rotated");
    expect(await rotate(s, fam, "t0", "client-b", "t9", "s9", T0 + GRACE + 10, GRACE, null)).toEqual({
      status: "invalid",
    });
    const [row] = await sql(s, "SELECT revoked, current_hash FROM families WHERE family_hash = ?", fam);
    expect(row).toEqual({ revoked: 0, current_hash: "t1" });
  });

  it("refuses a wider scope without rotating, and allows a narrower one (D4)", async () => {
    const { s, fam } = await family();
    expect(await rotate(s, fam, "t0", "client-a", "t1", "s1", T0, GRACE, ["openid", "email", "profile"])).toEqual({
      status: "invalid_scope",
    });
    const [row] = await sql(s, "SELECT current_hash, previous_hash FROM families WHERE family_hash = ?", fam);
    expect(row).toEqual({ current_hash: "t0", previous_hash: null });
    expect((await rotate(s, fam, "t0", "client-a", "t1", "s1", T0 + 1, GRACE, ["openid"])).status).toBe("rotated");
  });

  it("revokeFamily ends a live family once", async () => {
    const { s, fam } = await family();
    expect(await s.familyOf(fam, "t0", T0)).toMatchObject({ ...G, expires_at: EXPIRES });
    expect(await s.familyOf(fam, "not-current", T0)).toBeNull();
    expect(await s.revokeFamily(fam)).toBe(true);
    expect(await s.revokeFamily(fam)).toBe(false);
    expect(await rotate(s, fam, "t0", "client-a", "t1", "s1", T0, GRACE, null)).toEqual({ status: "invalid" });
    expect(await s.familyOf(fam, "t0", T0)).toBeNull();
  });

  it("stops working at the absolute lifetime, and the alarm drops it with its expiry bucket (D5)", async () => {
    const { s, fam } = await family();
    expect(await rotate(s, fam, "t0", "client-a", "t1", "s1", EXPIRES, GRACE, null)).toEqual({
      status: "invalid",
    });
    expect(await s.familyOf(fam, "t0", EXPIRES)).toBeNull();

    const now = Date.now();
    // Expired long enough ago that its bucket's end has passed too (buckets are dropped whole).
    await s.createFamily("dead", "d0", G, now - 1_200_000, now - 600_000);
    await s.createFamily("alive", "a0", G, now, now + 3_600_000);
    expect(await runDurableObjectAlarm(s)).toBe(true);
    const left = await sql<{ family_hash: string }>(s, "SELECT family_hash FROM families ORDER BY family_hash");
    expect(left.map((r) => r.family_hash)).toEqual(["alive", fam].sort());
  });

  it("rotates a family at most the hourly cap, then refuses until the window ends, rotating nothing", async () => {
    const { s, fam } = await family();
    let token = "t0";
    for (let i = 1; i <= 3; i++) {
      expect((await rotate(s, fam, token, "client-a", `t${i}`, `s${i}`, T0 + i, GRACE, null, 3)).status).toBe(
        "rotated",
      );
      token = `t${i}`;
    }
    expect(await rotate(s, fam, token, "client-a", "t4", "s4", T0 + 10, GRACE, null, 3)).toEqual({
      status: "too_many_rotations",
      retry_after: Math.ceil((T0 + 1 + 3_600_000 - (T0 + 10)) / 1000),
    });
    // Refused, not revoked: the current token still works once the hour is over.
    const spent = await sql(s, "SELECT COUNT(*) AS n FROM spent_tokens WHERE family_hash = ?", fam);
    expect(spent).toEqual([{ n: 3 }]);
    expect((await rotate(s, fam, token, "client-a", "t4", "s4", T0 + 1 + 3_600_000, GRACE, null, 3)).status).toBe(
      "rotated",
    );
  });
});
