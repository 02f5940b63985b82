import { env } from "cloudflare:test";
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { admin, call, fullLogin, ISSUER, registerClient } from "../support/harness";

async function jwks() {
  const res = await call("/jwks.json");
  expect(res.headers.get("access-control-allow-origin")).toBe("*");
  return (await res.json()) as { keys: { kid: string; alg: string }[] };
}

const kidOf = (jwt: string) => decodeProtectedHeader(jwt).kid as string;

describe("signing-key rotation (checklist H5)", () => {
  afterEach(() => vi.useRealTimers());

  it("publishes the next key before use, signs with it after the lead, and verifies old tokens until they expire", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t0 = Date.now();
    const lead = 900; // the default key_publish_lead_seconds
    const client = await registerClient();
    const before = await fullLogin(client);
    const oldKid = kidOf(before.tokens.access_token);

    const rotated = await admin("/keys/rotate", { method: "POST" });
    expect(rotated.status).toBe(200);
    const result = (await rotated.json()) as { published: { kid: string; alg: string }[]; retiring: { kid: string }[] };
    expect(result.published.map((k) => k.alg).sort()).toEqual(["ES256", "RS256"]);
    const newKid = result.published.find((k) => k.alg === "RS256")?.kid as string;
    expect(result.retiring.map((k) => k.kid)).toContain(oldKid);

    // Published at once, not yet used: tokens are still signed with the old key, up to activation.
    expect((await jwks()).keys.map((k) => k.kid)).toEqual(expect.arrayContaining([oldKid, newKid]));
    expect(kidOf((await fullLogin(client)).tokens.access_token)).toBe(oldKid);
    vi.setSystemTime(t0 + (lead - 30) * 1000);
    const during = await fullLogin(client);
    expect(kidOf(during.tokens.access_token)).toBe(oldKid);

    // A second rotation while a key is pending publishes nothing new.
    const again = (await (await admin("/keys/rotate", { method: "POST" })).json()) as { published: unknown[] };
    expect(again.published).toEqual([]);

    // After the lead, new tokens carry the new kid; an old token still verifies (userinfo 200).
    vi.setSystemTime(t0 + (lead + 61) * 1000);
    const after = await fullLogin(client);
    expect(kidOf(after.tokens.access_token)).toBe(newKid);
    const set = createLocalJWKSet(await jwks());
    await expect(
      jwtVerify(after.tokens.id_token, set, { issuer: ISSUER, audience: client.client_id }),
    ).resolves.toBeTruthy();
    const oldStillGood = await call("/userinfo", {
      headers: { Authorization: `Bearer ${during.tokens.access_token}` },
    });
    expect(oldStillGood.status).toBe(200);

    // Once every token the old key signed has expired, it leaves JWKS.
    vi.setSystemTime(t0 + (lead + 600 + 60 + 61) * 1000);
    const kids = (await jwks()).keys.map((k) => k.kid);
    expect(kids).toContain(newKid);
    expect(kids).not.toContain(oldKid);
    const expired = await call("/userinfo", { headers: { Authorization: `Bearer ${during.tokens.access_token}` } });
    expect(expired.status).toBe(401);

    // The private half is sealed in D1, never stored in the clear.
    const row = await env.DB.prepare("SELECT private_jwk_sealed FROM signing_keys WHERE kid = ?")
      .bind(newKid)
      .first<{ private_jwk_sealed: string }>();
    expect(row?.private_jwk_sealed).toBeTruthy();
    expect(row?.private_jwk_sealed).not.toContain('"d"');
  });
});
