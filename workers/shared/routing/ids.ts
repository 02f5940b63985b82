import { createHmac } from "node:crypto";
import { base64url, randomToken, timingSafeEqualString } from "../../../durable-objects/contract/crypto";
import type { Config } from "../config/config";
import { GLOBAL_REGION } from "../config/regions";
import type { StoreName } from "../config/shards";
import { firstLiveGeneration, shardsIn } from "./generations";
import { placementOf } from "./placement";
import { routeKey, type ShardRef } from "./shard-refs";
import { DEFAULT_TENANT } from "./tenant-route";

/**
 * The id codec. Every id a store issues carries the tenant (unless `default`), region, generation and
 * shard it was placed in: `<prefix>_[<tenant>~]<region>_<gen>_<shard>_<secret>`. An existing id is
 * routed by what it carries, never by today's count or today's region table, so raising a count
 * (appending a generation) or moving a country to another region leaves live state where it is while
 * new ids go to the new place. An id naming a region the config no longer has, or another tenant, is
 * refused like a made-up one, never re-routed. Ids from before regions
 * (`<prefix>_<gen>_<shard>_<secret>`) are ids of the `global` region.
 *
 * The secret is 128 random bits and a 128-bit MAC over the whole id (HMAC-SHA-256 under
 * OTP_HMAC_SECRET, `id:` domain): an id no Keyway issued is refused where it is parsed, before any
 * storage call, so made-up ids cannot be aimed at a chosen shard (issue 17), nor an id moved to
 * another tenant (issue 23).
 */

export const ID_PREFIX = {
  session: "ses",
  tx: "tx",
  code: "ac",
  refresh: "rt",
  grant: "gr",
  sid: "sid",
  jti: "at",
  device: "dc",
  entity: "ent",
  /** RFC 9126: a pushed authorization request, spent once in its revocation shard. */
  par: "par",
} as const;
export type IdKind = keyof typeof ID_PREFIX;

/** Which store an id of a given kind lives in. */
export const ID_STORE: Record<IdKind, StoreName | "entity"> = {
  session: "session",
  tx: "session",
  code: "code",
  refresh: "refresh",
  grant: "refresh",
  sid: "revocation",
  jti: "revocation",
  device: "code",
  entity: "entity",
  par: "revocation",
};

/**
 * `<prefix>_[<tenant>~]<region>_<gen>_<shard>_<random><MAC>`: a tenant other than `default` is named
 * in the id (issue 23), under the MAC; the default tenant's ids are as they were before tenants.
 */
const ID_RE =
  /^([a-z]+)_(?:([a-z0-9-]{2,40})~)?([a-z][a-z0-9]{1,7})_([0-9a-z]{1,2})_([0-9a-z]{1,3})_([A-Za-z0-9_-]{44})$/;
/** Ids from before regions: no region part (the global region); 43 characters of secret before the MAC. */
const UNPLACED_ID_RE = /^([a-z]+)_()()([0-9a-z]{1,2})_([0-9a-z]{1,3})_([A-Za-z0-9_-]{43,44})$/;
/** base64url of 16 bytes. */
const HALF = 22;

/**
 * How many generations an id can tell apart: it names its generation in two base-36 digits, the
 * generation's number modulo this. Generation numbers themselves never wrap (object names and
 * `shard_generations` rows carry the whole number), so an id is routed to the newest generation of its
 * store whose number has its digits, and the admin API keeps fewer than this many generations live
 * at once (issue 38 item 14): a drained generation is retired, so the count can grow for ever.
 */
export const ID_GENERATIONS = 36 * 36;

/** The whole number of the generation an id names by `named` (its number modulo ID_GENERATIONS). */
function generationNamed(counts: readonly number[], named: number): number {
  const last = counts.length - 1;
  return last - ((((last - named) % ID_GENERATIONS) + ID_GENERATIONS) % ID_GENERATIONS);
}

/** What issuing and parsing ids needs: the shard counts and the secret the MAC is keyed with. */
export type IdCodec = Pick<Config, "SHARDS" | "REGIONS" | "OTP_HMAC_SECRET"> & {
  POLICY?: Pick<Config["POLICY"], "legacy_ids_until">;
  /** The tenant ids are issued for and accepted from; `default` when absent. */
  TENANT?: string;
};

const tenantPart = (codec: IdCodec) =>
  codec.TENANT === undefined || codec.TENANT === DEFAULT_TENANT ? "" : `${codec.TENANT}~`;

function idMac(codec: IdCodec, body: string): string {
  return base64url(createHmac("sha256", codec.OTP_HMAC_SECRET).update(`id:${body}`).digest().subarray(0, 16));
}

/**
 * Ids whose MAC this isolate made or checked, per secret: a login's later steps present the ids its
 * earlier ones made (the transaction, the code), and each check is an HMAC. A made-up id is never in
 * here, so it still meets the HMAC and the constant-time comparison. Cleared whole when full.
 */
const macChecked = new Map<string, Set<string>>();
const MAC_CHECKED_MAX = 4096;

function rememberMac(codec: IdCodec, id: string): void {
  let ids = macChecked.get(codec.OTP_HMAC_SECRET);
  if (!ids) {
    ids = new Set();
    macChecked.set(codec.OTP_HMAC_SECRET, ids);
  }
  if (ids.size >= MAC_CHECKED_MAX) ids.clear();
  ids.add(id);
}

function macHolds(codec: IdCodec, id: string, body: string, mac: string): boolean {
  if (macChecked.get(codec.OTP_HMAC_SECRET)?.has(id)) return true;
  if (!timingSafeEqualString(idMac(codec, body), mac)) return false;
  rememberMac(codec, id);
  return true;
}

export interface ParsedId {
  kind: IdKind;
  ref: ShardRef;
  /** The whole id; stores key their rows by its SHA-256, never by the id itself. */
  id: string;
}

/**
 * Issues a new id of `kind`, placed by hashing its random part in a region, or on the shard `onto`
 * names (to colocate it). `seed` (at least 22 base64url characters) makes the id reproducible: its
 * first 22 are the random part.
 */
export function issueId(
  codec: IdCodec,
  kind: IdKind,
  where: { region: string } | { onto: ShardRef },
  seed = randomToken(16),
): { id: string; ref: ShardRef } {
  const random = seed.slice(0, HALF);
  if (!/^[A-Za-z0-9_-]{22}$/.test(random)) throw new Error("an id seed is 22 base64url characters or more");
  const ref = "onto" in where ? where.onto : routeKey(codec, ID_STORE[kind], random, where.region);
  if (ref.store !== ID_STORE[kind]) throw new Error(`cannot place a ${kind} id in the ${ref.store} store`);
  const body = `${ID_PREFIX[kind]}_${tenantPart(codec)}${ref.place.region}_${(ref.gen % ID_GENERATIONS).toString(36)}_${ref.shard.toString(36)}_${random}`;
  const id = `${body}${idMac(codec, body)}`;
  rememberMac(codec, id);
  return { id, ref };
}

/**
 * Parses an id and checks its MAC, and that its region, generation and shard exist in config.
 * Returns null for anything malformed, of another kind, not issued by Keyway, or pointing at a shard
 * that never existed or a region the config no longer has. An id of the format before the MAC (a
 * 43-character secret) is accepted only while the policy's `legacy_ids_until` has not passed: set it
 * when upgrading a running deployment, so sessions and refresh tokens issued before the upgrade live
 * out their time.
 */
export function parseId(codec: IdCodec, kind: IdKind, value: unknown): ParsedId | null {
  return parseIdChecking(codec, kind, value, true);
}

/**
 * `parseId` for an id whose MAC something else vouches for: an id that is the additional data of an
 * AES-GCM seal under a key derived from the same secret (sealed-id.ts), whose caller refuses the id
 * unless the seal opens, so a made-up id is still refused before any storage call. Everything else
 * (format, kind, tenant, region, generation, shard, legacy ids) is checked as `parseId` checks it.
 * Once the seal has opened, `vouchedFor` remembers the id as one whose MAC holds.
 */
export function parseIdSealed(codec: IdCodec, kind: IdKind, value: unknown): ParsedId | null {
  return parseIdChecking(codec, kind, value, false);
}

/**
 * An id whose MAC holds because a seal of Keyway's vouches for it: one `parseIdSealed` parsed whose
 * seal then opened (only Keyway seals onto its ids), or an id Keyway issued and carried inside a sealed
 * state that just opened (a code's or a verified login's sid). A later `parseId` of it skips the HMAC.
 */
export function vouchedFor(codec: IdCodec, id: string): void {
  rememberMac(codec, id);
}

function parseIdChecking(codec: IdCodec, kind: IdKind, value: unknown, checkMac: boolean): ParsedId | null {
  if (typeof value !== "string" || value.length > 170) return null;
  const m = ID_RE.exec(value) ?? UNPLACED_ID_RE.exec(value);
  if (!m || m[1] !== ID_PREFIX[kind]) return null;
  // Another tenant's id is refused here, like a made-up one, before any storage call (issue 23).
  if ((m[2] ? `${m[2]}~` : "") !== tenantPart(codec)) return null;
  const store = ID_STORE[kind];
  const region = m[3] || GLOBAL_REGION;
  const shard = Number.parseInt(m[5] as string, 36);
  const place = placementOf(codec.REGIONS, region);
  const shards = place ? shardsIn(codec.SHARDS, region) : undefined;
  if (!place || !shards) return null;
  const gen = generationNamed(shards[store], Number.parseInt(m[4] as string, 36));
  const count = shards[store][gen];
  if (count === undefined || shard >= count) return null;
  // A drained generation's ids have all expired: refused before any storage call.
  if (gen < firstLiveGeneration(shards, store)) return null;
  const secret = m[6] as string;
  if (secret.length === 2 * HALF) {
    if (checkMac && !macHolds(codec, value, value.slice(0, value.length - HALF), secret.slice(HALF))) return null;
  } else {
    const until = codec.POLICY?.legacy_ids_until;
    if (!until || Date.parse(until) <= Date.now()) return null;
  }
  return { kind, ref: { store, place, gen, shard }, id: value };
}
