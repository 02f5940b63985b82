import type { ShardConfig, StoreName } from "./config";

/** Every sharded object: the five login stores, the mail outbox and the audit buffer. */
export type ShardedStore = Exclude<keyof ShardConfig, "issueFrom">;

import { randomToken } from "./crypto";

/**
 * The one shard router for every store.
 *
 * A store's shard for a key is `fnv1a(key) mod count`, where count is the store's shard count in its
 * current generation (the last entry of `SHARDS[store]`). Every id a store issues carries the
 * generation and shard it was placed in: `<prefix>_<gen>_<shard>_<secret>`. An existing id is routed by
 * what it carries, never by today's count, so raising a count (appending a generation) leaves live
 * state where it is while new ids spread over the new shards.
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

const ID_RE = /^([a-z]+)_([0-9a-z]{1,2})_([0-9a-z]{1,3})_([A-Za-z0-9_-]{22,86})$/;

export interface ParsedId {
  kind: IdKind;
  ref: ShardRef;
  /** The whole id; stores key their rows by its SHA-256, never by the id itself. */
  id: string;
}

/** Issues a new id of `kind`, placed by hashing its random part (or on `onto`, to colocate it). */
export function issueId(
  shards: ShardConfig,
  kind: IdKind,
  onto?: ShardRef,
  secret = randomToken(32),
): { id: string; ref: ShardRef } {
  const ref = onto ?? routeKey(shards, ID_STORE[kind], secret);
  if (ref.store !== ID_STORE[kind]) throw new Error(`cannot place a ${kind} id in the ${ref.store} store`);
  return { id: `${ID_PREFIX[kind]}_${ref.gen.toString(36)}_${ref.shard.toString(36)}_${secret}`, ref };
}

/**
 * Parses an id and checks that its generation and shard exist in config. Returns null for anything
 * malformed, of another kind, or pointing at a shard that never existed.
 */
export function parseId(shards: ShardConfig, kind: IdKind, value: unknown): ParsedId | null {
  if (typeof value !== "string" || value.length > 120) return null;
  const m = ID_RE.exec(value);
  if (!m || m[1] !== ID_PREFIX[kind]) return null;
  const store = ID_STORE[kind];
  const gen = Number.parseInt(m[2] as string, 36);
  const shard = Number.parseInt(m[3] as string, 36);
  const count = shards[store][gen];
  if (count === undefined || shard >= count) return null;
  return { kind, ref: { store, gen, shard }, id: value };
}
