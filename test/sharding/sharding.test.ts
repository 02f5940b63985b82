import { describe, expect, it } from "vitest";
import type { ShardConfig } from "../../workers/shared/config";
import {
  currentGeneration,
  fnv1a,
  ID_PREFIX,
  ID_STORE,
  type IdKind,
  issueId,
  objectName,
  parseId,
  routeKey,
} from "../../workers/shared/sharding";
import { idParts } from "../support/harness";

const shards = (over: Partial<Record<string, number[]>> = {}) =>
  ({ session: [3], challenge: [3], code: [3], revocation: [3], refresh: [3], ...over }) as unknown as ShardConfig;

const randomKey = () => {
  const b = crypto.getRandomValues(new Uint8Array(24));
  return btoa(String.fromCharCode(...b));
};

describe("fnv1a", () => {
  it("matches the FNV-1a 32-bit reference values", () => {
    expect(fnv1a("")).toBe(0x811c9dc5);
    expect(fnv1a("a")).toBe(0xe40c292c);
    expect(fnv1a("foobar")).toBe(0xbf9cf968);
  });

  it("spreads random keys roughly evenly over 3, 7 and 8 shards", () => {
    for (const count of [3, 7, 8]) {
      const n = 1000 * count;
      const buckets = new Array<number>(count).fill(0);
      for (let i = 0; i < n; i++) buckets[fnv1a(randomKey()) % count]!++;
      // Expected 1000 per shard, standard deviation about 30: ±15% is five of them.
      for (const b of buckets) {
        expect(b).toBeGreaterThan(850);
        expect(b).toBeLessThan(1150);
      }
    }
  });
});

const SECRET = "test-only-id-mac-secret-0123456789abcdef";
const codec = (over: Partial<Record<string, number[]>> = {}, secret = SECRET) => ({
  SHARDS: shards(over),
  OTP_HMAC_SECRET: secret,
});

describe("issueId / parseId", () => {
  it("issues <prefix>_<gen36>_<shard36>_<random><mac> in the current generation, and parses it back", () => {
    const config = codec({ session: [3, 8], code: [2, 4, 40] });
    for (const kind of Object.keys(ID_PREFIX) as IdKind[]) {
      const { id, ref } = issueId(config, kind);
      const parts = idParts(id);
      expect(parts.prefix).toBe(ID_PREFIX[kind]);
      expect(parts.gen).toBe(currentGeneration(config.SHARDS, ID_STORE[kind]));
      expect(parts.shard).toBe(ref.shard);
      expect(parts.secret).toMatch(/^[A-Za-z0-9_-]{44}$/);
      expect(parseId(config, kind, id)).toEqual({ kind, ref, id });
    }
    // A seed makes the id reproducible; its first 22 characters are the random part that places it.
    const code = issueId(config, "code", undefined, "s".repeat(43));
    expect(code.ref.gen).toBe(2);
    expect(code.ref.shard).toBe(fnv1a("s".repeat(22)) % 40);
    expect(code.id.startsWith(`ac_2_${code.ref.shard.toString(36)}_${"s".repeat(22)}`)).toBe(true);
    expect(issueId(config, "code", undefined, "s".repeat(43)).id).toBe(code.id);
  });

  it("handles the largest generation and shard numbers config allows", () => {
    const counts = Array.from({ length: 36 }, () => 1024);
    const config = codec({ refresh: counts });
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const { id, ref } = issueId(config, "grant");
      expect(idParts(id).gen).toBe(35);
      expect(id.split("_")[1]).toBe("z");
      expect(parseId(config, "grant", id)?.ref).toEqual(ref);
      seen.add(ref.shard);
    }
    expect(seen.size).toBeGreaterThan(150);
    const last = issueId(config, "grant", { store: "refresh", gen: 35, shard: 1023 }).id;
    expect(last.startsWith(`gr_z_${(1023).toString(36)}_`)).toBe(true);
    expect(parseId(config, "grant", last)?.ref).toEqual({ store: "refresh", gen: 35, shard: 1023 });
  });

  it("places an id on a given shard to colocate it, within the same store only", () => {
    const config = codec({ revocation: [3, 8] });
    const sid = issueId(config, "sid");
    const jti = issueId(config, "jti", sid.ref);
    expect(jti.ref).toEqual(sid.ref);
    expect(() => issueId(config, "session", sid.ref)).toThrow();
  });

  it("keeps routing ids of an older generation by what they carry", () => {
    const before = codec();
    const after = codec({ session: [3, 8] });
    const old = issueId(before, "session");
    expect(parseId(after, "session", old.id)?.ref).toEqual({ store: "session", gen: 0, shard: old.ref.shard });
    const fresh = issueId(after, "session");
    expect(fresh.ref.gen).toBe(1);
    // A gen-1 id means nothing to a config that never had generation 1.
    expect(parseId(before, "session", fresh.id)).toBeNull();
  });

  it("refuses a made-up id before any storage call: a route, kind or random part it did not MAC (issue 17)", () => {
    const config = codec({ session: [3, 8] });
    const { id } = issueId(config, "session", { store: "session", gen: 1, shard: 7 });
    expect(parseId(config, "session", id)).not.toBeNull();
    const random = id.slice(8, 30);
    const mac = id.slice(30);
    const forged = [
      `ses_1_0_${random}${mac}`, // the same MAC moved to shard 0
      `ses_0_0_${random}${mac}`,
      `ses_1_7_${"A".repeat(22)}${mac}`, // another random part
      `ses_1_7_${random}${"A".repeat(22)}`, // a made-up MAC
      `ses_1_7_${random}${mac.slice(0, 21)}${mac.endsWith("A") ? "B" : "A"}`,
      `sid_1_7_${random}${mac}`, // another kind (and store)
    ];
    for (const value of forged) expect(parseId(config, "session", value), value).toBeNull();
    // Another deployment's secret: its ids are not ours.
    expect(parseId(codec({ session: [3, 8] }, "another-secret-0123456789abcdefghij"), "session", id)).toBeNull();
  });

  it("accepts ids of the format before the MAC only until legacy_ids_until", () => {
    const legacy = `ses_0_1_${"L".repeat(43)}`;
    expect(parseId(codec(), "session", legacy)).toBeNull();
    const until = (ms: number) => ({
      ...codec(),
      POLICY: { legacy_ids_until: new Date(Date.now() + ms).toISOString() },
    });
    expect(parseId(until(60_000), "session", legacy)?.ref).toEqual({ store: "session", gen: 0, shard: 1 });
    expect(parseId(until(-1), "session", legacy)).toBeNull();
  });

  it("rejects unknown generations and shards, other kinds and malformed values", () => {
    const config = codec({ session: [3, 8] });
    const ok = issueId(config, "session", { store: "session", gen: 1, shard: 7 }).id;
    const secret = ok.slice(8);
    expect(parseId(config, "session", ok)).not.toBeNull();
    const bad: unknown[] = [
      `ses_2_0_${secret}`, // no generation 2
      `ses_0_3_${secret}`, // generation 0 had 3 shards
      `ses_1_8_${secret}`, // generation 1 has 8
      `ses_1_-1_${secret}`,
      `ses_1_7_${"A".repeat(21)}`, // secret too short
      `ses_1_7_${secret}!`,
      `ses_1_7_${secret}.x`,
      `SES_1_7_${secret}`,
      ` ses_1_7_${secret}`,
      `tx_1_7_${secret}`, // another kind
      `ses_01_7_${secret}x${"A".repeat(80)}`, // too long
      `ses_1_7`,
      "",
      null,
      undefined,
      42,
      { id: ok },
    ];
    for (const value of bad) expect(parseId(config, "session", value), String(value)).toBeNull();
    expect(parseId(config, "tx", ok)).toBeNull();
  });

  it("routes a key by hash in the current generation and names objects <store>:g<gen>:s<shard>", () => {
    const config = shards({ challenge: [3, 16] });
    const ref = routeKey(config, "challenge", "some-email-key");
    expect(ref).toEqual({ store: "challenge", gen: 1, shard: fnv1a("some-email-key") % 16 });
    expect(routeKey(config, "challenge", "some-email-key")).toEqual(ref);
    expect(objectName(ref)).toBe(`challenge:g1:s${ref.shard}`);
  });
});
