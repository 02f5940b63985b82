import { env, runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { CodeGrant, PresentedCode } from "../../durable-objects/auth-code-store";
import { sql } from "../support/harness";

const T0 = 1_900_000_000_000;
const EXP = T0 + 60_000;
const KEEP = T0 + 600_000;

let n = 0;
const fresh = () => env.AUTH_CODES.get(env.AUTH_CODES.idFromName(`test-code-${++n}-${Math.random()}`));

const grant = (over: Partial<CodeGrant> = {}): CodeGrant => ({
  client_id: "client-a",
  redirect_uri: "https://rp.example.com/cb",
  code_challenge: "challenge-a",
  scope: "openid email",
  nonce: "n-1",
  sub: "usr_1",
  email: "a@example.com",
  sid: "sid_0_0_x",
  auth_time: Math.floor(T0 / 1000),
  ...over,
});
const right: PresentedCode = {
  client_id: "client-a",
  redirect_uri: "https://rp.example.com/cb",
  code_challenge: "challenge-a",
};

async function issued() {
  const s = fresh();
  const hash = `code-hash-${++n}`;
  await s.issueCode(hash, grant(), EXP, KEEP);
  return { s, hash };
}

describe("AuthCodeStore", () => {
  it("consumes a code once and returns its grant", async () => {
    const { s, hash } = await issued();
    const r = await s.consumeCode(hash, "gr-1", T0 + 1, right);
    expect(r).toEqual({ status: "ok", grant: grant() });
    const [row] = await sql<{ redeemed_grant_id: string }>(
      s,
      "SELECT redeemed_grant_id FROM codes WHERE code_hash = ?",
      hash,
    );
    expect(row?.redeemed_grant_id).toBe("gr-1");
  });

  it("tells a second redemption the first one's grant id, so its tokens can be revoked (C1)", async () => {
    const { s, hash } = await issued();
    expect((await s.consumeCode(hash, "gr-first", T0 + 1, right)).status).toBe("ok");
    expect(await s.consumeCode(hash, "gr-second", T0 + 2, right)).toEqual({
      status: "reused",
      grant_id: "gr-first",
      sid: "sid_0_0_x",
    });
    // A replay after the code's lifetime, while the row is kept, still learns what to revoke.
    expect(await s.consumeCode(hash, "gr-third", EXP + 10_000, right)).toMatchObject({
      status: "reused",
      grant_id: "gr-first",
    });
  });

  it("gives exactly one ok to concurrent redemptions (C2)", async () => {
    const { s, hash } = await issued();
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => s.consumeCode(hash, `gr-${i}`, T0 + 1, right)),
    );
    const ok = results.filter((r) => r.status === "ok");
    expect(ok).toHaveLength(1);
    const reused = results.filter((r) => r.status === "reused") as { grant_id: string }[];
    expect(reused).toHaveLength(9);
    // Every loser learns the one winner's grant id.
    const [row] = await sql<{ redeemed_grant_id: string }>(
      s,
      "SELECT redeemed_grant_id FROM codes WHERE code_hash = ?",
      hash,
    );
    for (const r of reused) expect(r.grant_id).toBe(row?.redeemed_grant_id);
  });

  it("refuses another client without spending the code (C6)", async () => {
    const { s, hash } = await issued();
    expect(await s.consumeCode(hash, "gr-x", T0 + 1, { ...right, client_id: "client-b" })).toEqual({
      status: "invalid",
    });
    // Nor does another client learn anything once the code is spent.
    expect((await s.consumeCode(hash, "gr-a", T0 + 2, right)).status).toBe("ok");
    expect(await s.consumeCode(hash, "gr-y", T0 + 3, { ...right, client_id: "client-b" })).toEqual({
      status: "invalid",
    });
  });

  it("spends the code on a wrong redirect_uri (C5)", async () => {
    const { s, hash } = await issued();
    expect(await s.consumeCode(hash, "gr-1", T0 + 1, { ...right, redirect_uri: "https://rp.example.com/cb/" })).toEqual(
      { status: "invalid" },
    );
    expect(await s.consumeCode(hash, "gr-2", T0 + 2, right)).toMatchObject({ status: "reused", grant_id: "gr-1" });
  });

  it("spends the code on a wrong PKCE verifier (C4)", async () => {
    const { s, hash } = await issued();
    expect(await s.consumeCode(hash, "gr-1", T0 + 1, { ...right, code_challenge: "other" })).toEqual({
      status: "invalid",
    });
    expect((await s.consumeCode(hash, "gr-2", T0 + 2, right)).status).toBe("reused");
  });

  it("refuses an expired code (C3) and an unknown one", async () => {
    const { s, hash } = await issued();
    expect(await s.consumeCode(hash, "gr-1", EXP, right)).toEqual({ status: "invalid" });
    expect(await s.consumeCode(hash, "gr-1", EXP + 1, right)).toEqual({ status: "invalid" });
    expect(await s.consumeCode("no-such-code", "gr-1", T0, right)).toEqual({ status: "invalid" });
    const other = await issued();
    expect((await other.s.consumeCode(other.hash, "gr-1", EXP - 1, right)).status).toBe("ok");
    // Past `keepUntil` even a redeemed code is forgotten.
    expect(await other.s.consumeCode(other.hash, "gr-2", KEEP, right)).toEqual({ status: "invalid" });
  });

  it("lets the alarm delete rows past keepUntil", async () => {
    const s = fresh();
    const now = Date.now();
    await s.issueCode("old", grant(), now - 120_000, now - 60_000);
    await s.issueCode("live", grant(), now + 60_000, now + 600_000);
    expect(await runDurableObjectAlarm(s)).toBe(true);
    expect(await sql(s, "SELECT code_hash FROM codes")).toEqual([{ code_hash: "live" }]);
  });
});
