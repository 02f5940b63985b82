import { env } from "cloudflare:test";
import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../workers/shared/config/config";
import { currentGeneration } from "../../workers/shared/routing/generations";
import { ID_PREFIX, ID_STORE, type IdKind, issueId, parseId } from "../../workers/shared/routing/ids";
import type { Placement } from "../../workers/shared/routing/placement";
import { fnv1a, objectName, routeKey, type ShardRef, shardAddress } from "../../workers/shared/routing/shard-refs";
import { idParts } from "../support/harness";

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
const REGIONS = {
  regions: { global: {}, apac: { hint: "apac" }, eu: { jurisdiction: "eu" } },
  default: "global",
};
const codec = (over: Partial<Record<string, number[]>> = {}, secret = SECRET, regions: object = REGIONS) =>
  loadConfig({
    ...env,
    OTP_HMAC_SECRET: secret,
    SHARDS: JSON.stringify({ session: [3], challenge: [3], code: [3], revocation: [3], refresh: [3], ...over }),
    REGIONS: JSON.stringify(regions),
  });
const G = { region: "global" } as const;
const at = (gen: number, shard: number, store: ShardRef["store"] = "session", place: Placement = G): ShardRef => ({
  store,
  place,
  gen,
  shard,
});

describe("issueId / parseId", () => {
  it("issues <prefix>_<region>_<gen36>_<shard36>_<random><mac> in the region's current generation, and parses it back", () => {
    const config = codec({ session: [3, 8], code: [2, 4, 40] });
    for (const kind of Object.keys(ID_PREFIX) as IdKind[]) {
      for (const region of ["global", "apac", "eu"]) {
        const { id, ref } = issueId(config, kind, { region });
        const parts = idParts(id);
        expect(parts.prefix).toBe(ID_PREFIX[kind]);
        expect(parts.region).toBe(region);
        expect(parts.gen).toBe(currentGeneration(config.SHARDS, ID_STORE[kind]));
        expect(parts.shard).toBe(ref.shard);
        expect(parts.secret).toMatch(/^[A-Za-z0-9_-]{44}$/);
        expect(parseId(config, kind, id)).toEqual({ kind, ref, id });
      }
    }
    // A seed makes the id reproducible; its first 22 characters are the random part that places it.
    const code = issueId(config, "code", G, "s".repeat(43));
    expect(code.ref.gen).toBe(2);
    expect(code.ref.shard).toBe(fnv1a("s".repeat(22)) % 40);
    expect(code.id.startsWith(`ac_global_2_${code.ref.shard.toString(36)}_${"s".repeat(22)}`)).toBe(true);
    expect(issueId(config, "code", G, "s".repeat(43)).id).toBe(code.id);
  });

  it("handles the largest generation and shard numbers config allows", () => {
    const counts = Array.from({ length: 36 }, () => 1024);
    const config = codec({ refresh: counts });
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const { id, ref } = issueId(config, "grant", G);
      expect(idParts(id).gen).toBe(35);
      expect(id.split("_")[2]).toBe("z");
      expect(parseId(config, "grant", id)?.ref).toEqual(ref);
      seen.add(ref.shard);
    }
    expect(seen.size).toBeGreaterThan(150);
    const last = issueId(config, "grant", { onto: at(35, 1023, "refresh") }).id;
    expect(last.startsWith(`gr_global_z_${(1023).toString(36)}_`)).toBe(true);
    expect(parseId(config, "grant", last)?.ref).toEqual(at(35, 1023, "refresh"));
  });

  it("places an id on a given shard to colocate it, within the same store only", () => {
    const config = codec({ revocation: [3, 8] });
    const sid = issueId(config, "sid", { region: "apac" });
    const jti = issueId(config, "jti", { onto: sid.ref });
    expect(jti.ref).toEqual(sid.ref);
    expect(() => issueId(config, "session", { onto: sid.ref })).toThrow();
  });

  it("keeps routing ids of an older generation by what they carry", () => {
    const before = codec();
    const after = codec({ session: [3, 8] });
    const old = issueId(before, "session", G);
    expect(parseId(after, "session", old.id)?.ref).toEqual(at(0, old.ref.shard));
    const fresh = issueId(after, "session", G);
    expect(fresh.ref.gen).toBe(1);
    // A gen-1 id means nothing to a config that never had generation 1.
    expect(parseId(before, "session", fresh.id)).toBeNull();
  });

  it("refuses a made-up id before any storage call: a route, kind or random part it did not MAC (issue 17)", () => {
    const config = codec({ session: [3, 8] });
    const { id } = issueId(config, "session", { onto: at(1, 7) });
    expect(parseId(config, "session", id)).not.toBeNull();
    const head = "ses_global_1_7_".length;
    const random = id.slice(head, head + 22);
    const mac = id.slice(head + 22);
    const forged = [
      `ses_global_1_0_${random}${mac}`, // the same MAC moved to shard 0
      `ses_global_0_0_${random}${mac}`,
      `ses_apac_1_7_${random}${mac}`, // moved to another region
      `ses_1_7_${random}${mac}`, // the same route in the format before regions
      `ses_global_1_7_${"A".repeat(22)}${mac}`, // another random part
      `ses_global_1_7_${random}${"A".repeat(22)}`, // a made-up MAC
      `ses_global_1_7_${random}${mac.slice(0, 21)}${mac.endsWith("A") ? "B" : "A"}`,
      `sid_global_1_7_${random}${mac}`, // another kind (and store)
    ];
    for (const value of forged) expect(parseId(config, "session", value), value).toBeNull();
    // Another deployment's secret: its ids are not ours.
    expect(parseId(codec({ session: [3, 8] }, "another-secret-0123456789abcdefghij"), "session", id)).toBeNull();
  });

  it("routes ids issued before regions (no region part) to the global region's shards, as before", () => {
    const config = codec({ session: [3, 8] });
    // What the router issued before regions: MAC over `ses_1_7_<random>`.
    const random = "r".repeat(22);
    const body = `ses_1_7_${random}`;
    const mac = Buffer.from(createHmac("sha256", SECRET).update(`id:${body}`).digest().subarray(0, 16)).toString(
      "base64url",
    );
    const parsed = parseId(config, "session", `${body}${mac}`);
    expect(parsed?.ref).toEqual(at(1, 7));
    expect(objectName(parsed?.ref as ShardRef)).toBe("session:g1:s7");
    // Without a global region, they have nowhere to go: refused, never re-routed.
    const noGlobal = codec({ session: [3, 8] }, SECRET, { regions: { apac: { hint: "apac" } }, default: "apac" });
    expect(parseId(noGlobal, "session", `${body}${mac}`)).toBeNull();
  });

  it("refuses an id of a region the config no longer has, and keeps routing the others", () => {
    const config = codec();
    const apac = issueId(config, "session", { region: "apac" });
    const eu = issueId(config, "session", { region: "eu" });
    const shrunk = codec({}, SECRET, { regions: { global: {}, eu: { jurisdiction: "eu" } }, default: "global" });
    expect(parseId(shrunk, "session", apac.id)).toBeNull();
    expect(parseId(shrunk, "session", eu.id)?.ref).toEqual(eu.ref);
  });

  it("accepts ids of the format before the MAC only until legacy_ids_until", () => {
    const legacy = `ses_0_1_${"L".repeat(43)}`;
    expect(parseId(codec(), "session", legacy)).toBeNull();
    const until = (ms: number) => ({
      ...codec(),
      POLICY: { legacy_ids_until: new Date(Date.now() + ms).toISOString() },
    });
    expect(parseId(until(60_000), "session", legacy)?.ref).toEqual(at(0, 1));
    expect(parseId(until(-1), "session", legacy)).toBeNull();
  });

  it("rejects unknown regions, generations and shards, other kinds and malformed values", () => {
    const config = codec({ session: [3, 8] });
    const ok = issueId(config, "session", { onto: at(1, 7) }).id;
    const secret = ok.slice("ses_global_1_7_".length);
    expect(parseId(config, "session", ok)).not.toBeNull();
    const bad: unknown[] = [
      `ses_global_2_0_${secret}`, // no generation 2
      `ses_global_0_3_${secret}`, // generation 0 had 3 shards
      `ses_global_1_8_${secret}`, // generation 1 has 8
      `ses_wnam_1_7_${secret}`, // no such region
      `ses_global_1_-1_${secret}`,
      `ses_global_1_7_${"A".repeat(21)}`, // secret too short
      `ses_global_1_7_${secret}!`,
      `ses_global_1_7_${secret}.x`,
      `SES_global_1_7_${secret}`,
      ` ses_global_1_7_${secret}`,
      `tx_global_1_7_${secret}`, // another kind
      `ses_global_01_7_${secret}x${"A".repeat(80)}`, // too long
      `ses_global_1_7`,
      "",
      null,
      undefined,
      42,
      { id: ok },
    ];
    for (const value of bad) expect(parseId(config, "session", value), String(value)).toBeNull();
    expect(parseId(config, "tx", ok)).toBeNull();
  });

  it("routes a key by hash in a region's current generation and names objects <store>[:<region>]:g<gen>:s<shard>", () => {
    const config = codec({ challenge: [3, 16] });
    const ref = routeKey(config, "challenge", "some-email-key", "global");
    expect(ref).toEqual(at(1, fnv1a("some-email-key") % 16, "challenge"));
    expect(routeKey(config, "challenge", "some-email-key", "global")).toEqual(ref);
    expect(objectName(ref)).toBe(`challenge:g1:s${ref.shard}`);
    const apac = routeKey(config, "challenge", "some-email-key", "apac");
    expect(apac.place).toEqual({ region: "apac", hint: "apac" });
    expect(objectName(apac)).toBe(`challenge:apac:g1:s${ref.shard}`);
    expect(shardAddress(apac)).toBe(`challenge:apac:g1:s${ref.shard}@apac`);
    const eu = routeKey(config, "challenge", "some-email-key", "eu");
    expect(shardAddress(eu)).toBe(`eu/challenge:eu:g1:s${ref.shard}`);
    expect(() => routeKey(config, "challenge", "k", "wnam")).toThrow();
  });

  it("gives a region its own counts for the stores SHARDS.regions lists, the default for the rest", () => {
    const config = loadConfig({
      ...env,
      SHARDS: JSON.stringify({
        session: [3, 8],
        challenge: [3],
        code: [3],
        revocation: [3],
        refresh: [3],
        regions: { apac: { session: [2] } },
      }),
      REGIONS: JSON.stringify(REGIONS),
    });
    expect(issueId(config, "session", { region: "apac" }).ref).toMatchObject({ gen: 0 });
    expect(routeKey(config, "session", "k", "apac").shard).toBe(fnv1a("k") % 2);
    expect(routeKey(config, "session", "k", "global")).toMatchObject({ gen: 1, shard: fnv1a("k") % 8 });
    expect(routeKey(config, "challenge", "k", "apac")).toMatchObject({ gen: 0, shard: fnv1a("k") % 3 });
    // An apac session id of shard 2 does not exist (apac's generation 0 has 2); a global one does.
    const [global] = [issueId(config, "session", { onto: at(0, 2) })];
    expect(parseId(config, "session", global.id)).not.toBeNull();
    expect(parseId(config, "session", global.id.replace("ses_global_", "ses_apac_"))).toBeNull();
  });
});
