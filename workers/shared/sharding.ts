import { createHmac } from "node:crypto";
import type { Config, ShardConfig, StoreName } from "./config";

/** Every sharded object: the five login stores, the mail outbox and the audit buffer. */
export type ShardedStore = Exclude<keyof ShardConfig, "issueFrom">;

import { base64url, randomToken, timingSafeEqualString } from "./crypto";

/**
 * The one shard router for every store.
 *
 * A store's shard for a key is `fnv1a(key) mod count`, where count is the store's shard count in its
 * current generation (the last entry of `SHARDS[store]`). Every id a store issues carries the
 * generation and shard it was placed in: `<prefix>_<gen>_<shard>_<secret>`. An existing id is routed by
 * what it carries, never by today's count, so raising a count (appending a generation) leaves live
 * state where it is while new ids spread over the new shards.
 *
 * The secret is 128 random bits and a 128-bit MAC over the whole id (HMAC-SHA-256 under
 * OTP_HMAC_SECRET, `id:` domain): an id no Keyway issued is refused where it is parsed, before any
 * storage call, so made-up ids cannot be aimed at a chosen shard (issue 17).
 */

export interface ShardRef {
  store: ShardedStore;
  gen: number;
  shard: number;
}

export const ID_PREFIX = {
  session: "ses",
  tx: "tx",
  code: "ac",
  refresh: "rt",
  grant: "gr",
  sid: "sid",
  jti: "at",
  device: "dc",
} as const;
export type IdKind = keyof typeof ID_PREFIX;

/** Which store an id of a given kind lives in. */
export const ID_STORE: Record<IdKind, StoreName> = {
  session: "session",
  tx: "session",
  code: "code",
  refresh: "refresh",
  grant: "refresh",
  sid: "revocation",
  jti: "revocation",
  device: "code",
};

export function fnv1a(input: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < input.length; i++) {
    h ^= input.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The generation new ids and keys go to: the newest one whose `from` has come. A generation appended
 * with a later `from` is routed (parseId, routeKeyIn) but not yet issued into.
 */
export function currentGeneration(shards: ShardConfig, store: ShardedStore, now = Date.now()): number {
  const from = shards.issueFrom?.[store] ?? [];
  for (let gen = shards[store].length - 1; gen > 0; gen--) if ((from[gen] ?? 0) <= now) return gen;
  return 0;
}

/** The shard a key belongs to in the current generation (used for keys, like an email, that are not issued ids). */
export function routeKey(shards: ShardConfig, store: ShardedStore, key: string): ShardRef {
  return routeKeyIn(shards, store, key, currentGeneration(shards, store)) as ShardRef;
}

/**
 * The shard of a key in generation `gen`, for a login that pinned the generation it began in (its
 * later steps find the same shard after a count changed). Null for a generation the config lacks.
 */
export function routeKeyIn(shards: ShardConfig, store: ShardedStore, key: string, gen: number): ShardRef | null {
  const count = shards[store][gen];
  if (count === undefined) return null;
  return { store, gen, shard: fnv1a(key) % count };
}

export function objectName(ref: ShardRef): string {
  return `${ref.store}:g${ref.gen}:s${ref.shard}`;
}

const ID_RE = /^([a-z]+)_([0-9a-z]{1,2})_([0-9a-z]{1,3})_([A-Za-z0-9_-]{43,44})$/;
/** base64url of 16 bytes. */
const HALF = 22;

/** What issuing and parsing ids needs: the shard counts and the secret the MAC is keyed with. */
export type IdCodec = Pick<Config, "SHARDS" | "OTP_HMAC_SECRET"> & {
  POLICY?: Pick<Config["POLICY"], "legacy_ids_until">;
};

function idMac(codec: IdCodec, body: string): string {
  return base64url(createHmac("sha256", codec.OTP_HMAC_SECRET).update(`id:${body}`).digest().subarray(0, 16));
}

export interface ParsedId {
  kind: IdKind;
  ref: ShardRef;
  /** The whole id; stores key their rows by its SHA-256, never by the id itself. */
  id: string;
}

/**
 * Issues a new id of `kind`, placed by hashing its random part (or on `onto`, to colocate it). `seed`
 * (at least 22 base64url characters) makes the id reproducible: its first 22 are the random part.
 */
export function issueId(
  codec: IdCodec,
  kind: IdKind,
  onto?: ShardRef,
  seed = randomToken(16),
): { id: string; ref: ShardRef } {
  const random = seed.slice(0, HALF);
  if (!/^[A-Za-z0-9_-]{22}$/.test(random)) throw new Error("an id seed is 22 base64url characters or more");
  const ref = onto ?? routeKey(codec.SHARDS, ID_STORE[kind], random);
  if (ref.store !== ID_STORE[kind]) throw new Error(`cannot place a ${kind} id in the ${ref.store} store`);
  const body = `${ID_PREFIX[kind]}_${ref.gen.toString(36)}_${ref.shard.toString(36)}_${random}`;
  return { id: `${body}${idMac(codec, body)}`, ref };
}

/**
 * Parses an id and checks its MAC, and that its generation and shard exist in config. Returns null for
 * anything malformed, of another kind, not issued by Keyway, or pointing at a shard that never existed.
 * An id of the format before the MAC (a 43-character secret) is accepted only while the policy's
 * `legacy_ids_until` has not passed: set it when upgrading a running deployment, so sessions and
 * refresh tokens issued before the upgrade live out their time.
 */
export function parseId(codec: IdCodec, kind: IdKind, value: unknown): ParsedId | null {
  if (typeof value !== "string" || value.length > 120) return null;
  const m = ID_RE.exec(value);
  if (!m || m[1] !== ID_PREFIX[kind]) return null;
  const store = ID_STORE[kind];
  const gen = Number.parseInt(m[2] as string, 36);
  const shard = Number.parseInt(m[3] as string, 36);
  const count = codec.SHARDS[store][gen];
  if (count === undefined || shard >= count) return null;
  const secret = m[4] as string;
  if (secret.length === 2 * HALF) {
    const body = value.slice(0, value.length - HALF);
    if (!timingSafeEqualString(idMac(codec, body), secret.slice(HALF))) return null;
  } else {
    const until = codec.POLICY?.legacy_ids_until;
    if (!until || Date.parse(until) <= Date.now()) return null;
  }
  return { kind, ref: { store, gen, shard }, id: value };
}
