import type { Config } from "../config/config";
import { currentGeneration, shardsIn } from "../routing/generations";
import { fnv1a, type Routing, routeKey, routeKeyIn, type ShardRef } from "../routing/shard-refs";

/** RFC 8628 §3.4: the grant type a device polls the token endpoint with. */
export const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";

/**
 * User codes (RFC 8628 §6.1): 8 letters from 20 consonants (no vowels, so no words; no I or O to
 * mistake for 1 or 0), about 34.6 bits; shown as XXXX-XXXX and read back case-insensitively with or
 * without the hyphen. Guessing is bounded per address (the Rate Limiting binding) and per shard and
 * minute (the AuthCodeStore), docs/security.md.
 */
const ALPHABET = "BCDFGHJKLMNPQRSTVWXZ";
const USER_CODE = /^[BCDFGHJKLMNPQRSTVWXZ]{8}$/;

/**
 * With more than one region, a user code's first letter names the region its request lives in (a
 * letter per region, by hash: two regions may share one, and then both are tried), so the person
 * can type it anywhere and it is found in one place; the other 7 letters (about 30.3 bits) are random.
 * With one region every letter is random.
 */
export function regionLetter(region: string): string {
  return ALPHABET[fnv1a(`device-region:${region}`) % ALPHABET.length] as string;
}

const placedByLetter = (config: Routing) => Object.keys(config.REGIONS.regions).length > 1;

export function newUserCode(config: Routing, region: string): string {
  let code = placedByLetter(config) ? regionLetter(region) : "";
  while (code.length < 8) {
    for (const byte of crypto.getRandomValues(new Uint8Array(16))) {
      // 240 is the largest multiple of 20 under 256: rejecting above it keeps every letter equally likely.
      if (byte < 240 && code.length < 8) code += ALPHABET[byte % 20];
    }
  }
  return code;
}

/** The normalized code a person typed, or null when it cannot be one. */
export function normalizeUserCode(input: unknown): string | null {
  if (typeof input !== "string" || input.length > 32) return null;
  const code = input.toUpperCase().replace(/[\s-]/g, "");
  return USER_CODE.test(code) ? code : null;
}

export const formatUserCode = (code: string) => `${code.slice(0, 4)}-${code.slice(4)}`;

/**
 * Where a user code's request lives: the AuthCodeStore shard its code hashes to in the region and
 * generation it was issued in. The device_code is placed on the same shard, so both find the same row.
 */
export function deviceShard(config: Config, userCode: string, region: string): ShardRef {
  return routeKey(config, "code", userCode, region);
}

/**
 * The shards a typed user code may live on: in each region its first letter may name, the generation
 * codes are issued into now, then each one before it that was still issued into within a request's
 * lifetime (`device_code_ttl_seconds`).
 */
export function deviceShardsToTry(config: Config, userCode: string, now = Date.now()): ShardRef[] {
  const refs: ShardRef[] = [];
  const ttl = config.POLICY.device_code_ttl_seconds * 1000;
  const byLetter = placedByLetter(config);
  for (const region of Object.keys(config.REGIONS.regions)) {
    if (byLetter && regionLetter(region) !== userCode[0]) continue;
    const shards = shardsIn(config.SHARDS, region);
    const from = shards.issueFrom.code;
    for (let gen = currentGeneration(shards, "code", now); gen >= 0; gen--) {
      const ref = routeKeyIn(config, "code", userCode, gen, region);
      if (ref) refs.push(ref);
      // Generation gen - 1 stopped taking new requests when gen began; older than a lifetime, none is live.
      if (now - (from[gen] ?? 0) > ttl) break;
    }
  }
  return refs;
}
