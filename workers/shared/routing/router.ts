import { createHmac } from "node:crypto";
import { base64url, randomToken, timingSafeEqualString } from "../../../durable-objects/contract/crypto";
import type { Jurisdiction, LocationHint } from "../../../durable-objects/contract/places";
import type { Config } from "../config/config";
import { GLOBAL_REGION, type RegionConfig } from "../config/regions";
import {
  type Generations,
  type LiveStoreName,
  type ShardConfig,
  type ShardedName,
  type StoreName,
  shardConfig,
} from "../config/shards";

/** Every sharded object: the five login stores, the mail outbox and the audit buffer. */
export type ShardedStore = Exclude<keyof ShardConfig, "issueFrom" | "regions">;

/**
 * The router: the one module that knows where anything Keyway issues lives. It owns the tenant a
 * request is for (by host or `/t/<tenant>` path), the region a login is placed in (REGIONS), each
 * region's generations and shard counts (SHARDS and the live generations), the shard of a key, and
 * the id codec. config.ts only parses; everything that routes is here.
 *
 * A store's shard for a key is `fnv1a(key) mod count`, where count is the store's shard count in a
 * region's current generation (the last entry of its list, `shardsIn`). Every id a store issues
 * carries the tenant (unless `default`), region, generation and shard it was placed in:
 * `<prefix>_[<tenant>~]<region>_<gen>_<shard>_<secret>`. An existing id is routed by what it carries,
 * never by today's count or today's region table, so raising a count (appending a generation) or
 * moving a country to another region leaves live state where it is while new ids go to the new place.
 * An id naming a region the config no longer has, or another tenant, is refused like a made-up one,
 * never re-routed. Ids from before regions (`<prefix>_<gen>_<shard>_<secret>`) are ids of the
 * `global` region.
 *
 * The secret is 128 random bits and a 128-bit MAC over the whole id (HMAC-SHA-256 under
 * OTP_HMAC_SECRET, `id:` domain): an id no Keyway issued is refused where it is parsed, before any
 * storage call, so made-up ids cannot be aimed at a chosen shard (issue 17), nor an id moved to
 * another tenant (issue 23).
 */

export interface ShardRef {
  store: ShardedStore;
  /** The region and how its objects are placed (location hint, jurisdiction). */
  place: Placement;
  gen: number;
  shard: number;
}

/** What routing reads of the config. */
export type Routing = Pick<Config, "SHARDS" | "REGIONS">;

/** A region's shard counts (its own lists, or the default ones); null for a region the config lacks. */
export function regionShards(routing: Routing, region: string): ShardConfig | null {
  if (!(region in routing.REGIONS.regions)) return null;
  return shardsIn(routing.SHARDS, region);
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
  entity: "ent",
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
  const counts = shards[store];
  // A hole is a retired generation whose row was deleted (retireDrainedGenerations): never current.
  for (let gen = counts.length - 1; gen > 0; gen--)
    if (counts[gen] !== undefined && (from[gen] ?? 0) <= now) return gen;
  return 0;
}

const DAY = 86_400_000;

/**
 * How long after a generation stopped being issued into (its successor began) it can still hold live
 * state, by store: the longest any policy (a tenant's included) lets that state live, and a day more.
 * Past it the generation is drained and retired (issue 27 item 13): its ids are refused like made-up
 * ones (they would be expired), and fan-outs, stats and plans no longer wake its shards.
 */
export const DRAIN_MS: Record<ShardedStore, number> = {
  // A login transaction (at most an hour) and an address's counts (a day, carried to the next generation).
  challenge: 2 * DAY,
  // Codes (at most 10 minutes), spent-code marks (at most an access token's life, a day), device requests.
  code: 2 * DAY,
  // Sessions (at most 30 days) and login transactions.
  session: 31 * DAY,
  // sids and jtis: a sid is made with its session (up to 30 days), and a refresh family begun late in
  // that session names it for 365 days more.
  revocation: (30 + 365 + 2) * DAY,
  refresh: 366 * DAY,
  // Mail retries and audit events waiting for D1: hours.
  mail: 2 * DAY,
  audit: 2 * DAY,
  // An endpoint's queue stays where it was created: never retired.
  webhook: Number.POSITIVE_INFINITY,
  // Entities live until deleted: never retired.
  entity: Number.POSITIVE_INFINITY,
};

/**
 * The oldest generation of a store that may still hold live state: every one before it is drained.
 * A generation whose successor has no known start (a static SHARDS list without `from`) is never
 * retired.
 */
export function firstLiveGeneration(shards: ShardConfig, store: ShardedStore, now = Date.now()): number {
  const from = shards.issueFrom[store] ?? [];
  for (let gen = shards[store].length - 1; gen > 0; gen--) {
    const began = from[gen] ?? 0;
    if (began > 0 && began <= now - DRAIN_MS[store]) return gen;
  }
  return 0;
}

/**
 * The addresses of a key's shards in the generations before `ref`'s in its region that were current
 * at some time in the last `windowMs` (newest first): where state a limit counts may still be, after
 * a shard count change moved the key (issue 27 item 9). A generation whose successor has no known
 * start (a static SHARDS list without `from`) counts as recent: nothing says its counts are gone.
 */
export function recentEarlierShards(
  routing: Routing,
  ref: ShardRef,
  key: string,
  windowMs: number,
  now = Date.now(),
): string[] {
  const from = shardsIn(routing.SHARDS, ref.place.region).issueFrom[ref.store] ?? [];
  const out: string[] = [];
  const first = firstLiveGeneration(shardsIn(routing.SHARDS, ref.place.region), ref.store, now);
  for (let gen = ref.gen - 1; gen >= first; gen--) {
    // Generation `gen` was current until generation `gen + 1` began.
    const began = from[gen + 1] ?? 0;
    if (began > 0 && began <= now - windowMs) break;
    const earlier = routeKeyIn(routing, ref.store, key, gen, ref.place.region);
    if (earlier) out.push(shardAddress(earlier));
  }
  return out;
}

/**
 * The shard a key belongs to in a region's current generation (for keys, like an email, that are
 * not issued ids). Throws for a region the config lacks: callers pass a region placement chose.
 */
export function routeKey(routing: Routing, store: ShardedStore, key: string, region: string): ShardRef {
  const shards = regionShards(routing, region);
  if (!shards) throw new Error(`region ${region} is not configured`);
  return routeKeyIn(routing, store, key, currentGeneration(shards, store), region) as ShardRef;
}

/**
 * The shard of a key in generation `gen` of a region, for a login that pinned the generation it
 * began in (its later steps find the same shard after a count changed). Null for a region or
 * generation the config lacks.
 */
export function routeKeyIn(
  routing: Routing,
  store: ShardedStore,
  key: string,
  gen: number,
  region: string,
): ShardRef | null {
  const place = placementOf(routing.REGIONS, region);
  const count = place ? shardsIn(routing.SHARDS, region)[store][gen] : undefined;
  if (!place || count === undefined) return null;
  return { store, place, gen, shard: fnv1a(key) % count };
}

/** A shard's object name: `session:apac:g0:s3`; the global region keeps the names from before regions. */
export function objectName(ref: ShardRef): string {
  const region = ref.place.region === GLOBAL_REGION ? "" : `${ref.place.region}:`;
  return `${ref.store}:${region}g${ref.gen}:s${ref.shard}`;
}

/**
 * A shard's full address, for write-behind items that name the shard their events go to:
 * `[<jurisdiction>/]<object name>[@<hint>]` (stores.ts shardNamed reads it back).
 */
export function shardAddress(ref: ShardRef): string {
  const j = ref.place.jurisdiction ? `${ref.place.jurisdiction}/` : "";
  const hint = ref.place.hint ? `@${ref.place.hint}` : "";
  return `${j}${objectName(ref)}${hint}`;
}

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
    if (!macHolds(codec, value, value.slice(0, value.length - HALF), secret.slice(HALF))) return null;
  } else {
    const until = codec.POLICY?.legacy_ids_until;
    if (!until || Date.parse(until) <= Date.now()) return null;
  }
  return { kind, ref: { store, place, gen, shard }, id: value };
}

/** Every shard of a store: each configured region's, in each of its generations (admin fan-outs, stats). */
export function allShards(routing: Routing, store: ShardedStore): ShardRef[] {
  return Object.keys(routing.REGIONS.regions).flatMap((region) => {
    const place = placementOf(routing.REGIONS, region) as Placement;
    const shards = shardsIn(routing.SHARDS, region);
    const first = firstLiveGeneration(shards, store);
    return shards[store].flatMap((count, gen) =>
      gen < first ? [] : Array.from({ length: count }, (_, shard) => ({ store, place, gen, shard })),
    );
  });
}

/** A key's shard in every generation of every configured region (fan-outs that must reach all of a key's copies). */
export function keyShardsEverywhere(routing: Routing, store: ShardedStore, key: string): ShardRef[] {
  return Object.keys(routing.REGIONS.regions).flatMap((region) => {
    const shards = shardsIn(routing.SHARDS, region);
    const first = firstLiveGeneration(shards, store);
    return shards[store].flatMap((_, gen) =>
      gen < first ? [] : [routeKeyIn(routing, store, key, gen, region) as ShardRef],
    );
  });
}

// ---- Regions: where a login's objects are placed (the REGIONS table is parsed by regions.ts).

/** What routing needs to know of a region: where its objects are created. */
export interface Placement {
  region: string;
  hint?: LocationHint;
  jurisdiction?: Jurisdiction;
}

export function placementOf(regions: RegionConfig, region: string): Placement | null {
  const r = regions.regions[region];
  if (!r) return null;
  return { region, ...(r.hint ? { hint: r.hint } : {}), ...(r.jurisdiction ? { jurisdiction: r.jurisdiction } : {}) };
}

/** The part of `request.cf` placement reads. */
export interface RequestGeo {
  country?: string | null;
  continent?: string | null;
}

/**
 * The region a new login (or device request, or machine token) is placed in: residency, then the
 * country table, then the continent table, then the default. Cloudflare sets `cf.country` to `T1`
 * for Tor and `XX` when unknown; neither is in a table, so both take the continent or the default.
 */
export function regionFor(regions: RegionConfig, geo: RequestGeo | undefined): string {
  const country = typeof geo?.country === "string" ? geo.country.toUpperCase() : undefined;
  if (country && regions.residency && regions.resident.has(country)) return regions.residency.region;
  if (country && regions.countries[country]) return regions.countries[country];
  const continent = typeof geo?.continent === "string" ? geo.continent.toUpperCase() : undefined;
  const byContinent = continent ? regions.continents[continent as keyof RegionConfig["continents"]] : undefined;
  return byContinent ?? regions.default;
}

/** The geography Cloudflare put on a request (absent locally, where the dev gateway may set it). */
export function requestGeo(req: Request): RequestGeo | undefined {
  const cf = (req as { cf?: { country?: unknown; continent?: unknown } }).cf;
  if (!cf) return undefined;
  return {
    country: typeof cf.country === "string" ? cf.country : null,
    continent: typeof cf.continent === "string" ? cf.continent : null,
  };
}

// ---- Generations: each region's shard counts, and the live ones appended through the admin API.

const inRegion = new WeakMap<ShardConfig, Map<string, ShardConfig>>();

/**
 * The counts a region's shards follow: its own list for a store SHARDS.regions gives it, the default
 * list (live generations included) for every other store.
 */
export function shardsIn(shards: ShardConfig, region: string): ShardConfig {
  const own = shards.regions[region];
  if (!own) return shards;
  let byRegion = inRegion.get(shards);
  if (!byRegion) {
    byRegion = new Map();
    inRegion.set(shards, byRegion);
  }
  const hit = byRegion.get(region);
  if (hit) return hit;
  const names = Object.keys(shards) as ShardedName[];
  const lists = Object.fromEntries(
    names.map((n) => [n, own[n] ?? { counts: shards[n], from: [...shards.issueFrom[n]] }]),
  ) as Record<ShardedName, Generations>;
  const out = shardConfig(lists, {});
  byRegion.set(region, out);
  return out;
}

/**
 * SHARDS with generations appended (live ones, from D1): counts and issue times at their generation's
 * number, after each store's own. Generations between SHARDS' last and the first row were retired and
 * their rows deleted: they stay holes, routed by nothing. The result is a ShardConfig like the parsed one.
 */
export function withGenerations(
  base: ShardConfig,
  extra: { store: LiveStoreName; gen: number; shards: number; issue_from: number }[],
): ShardConfig {
  const names = Object.keys(base) as ShardedName[];
  const counts = Object.fromEntries(names.map((n) => [n, [...base[n]]])) as Record<string, number[]>;
  const from = Object.fromEntries(names.map((n) => [n, [...base.issueFrom[n]]])) as Record<string, number[]>;
  for (const g of extra) {
    (counts[g.store] as number[])[g.gen] = g.shards;
    (from[g.store] as number[])[g.gen] = g.issue_from;
  }
  const lists = Object.fromEntries(
    names.map((n) => [n, { counts: counts[n] as number[], from: from[n] as number[] }]),
  ) as Record<ShardedName, Generations>;
  return shardConfig(lists, base.regions as Record<string, Partial<Record<ShardedName, Generations>>>);
}

// ---- Tenants: which tenant a request is for, and the keys that are per tenant (docs/tenants.md).

export const DEFAULT_TENANT = "default";
export const TENANT_ID = /^[a-z0-9-]{2,40}$/;

/** Where a request's tenant came from: the origin's own paths, a `/t/<id>` prefix, or a custom host. */
export interface TenantRoute {
  tenant: string;
  via: "origin" | "path" | "host";
  /** The path with any `/t/<id>` prefix removed: what the Worker routes on. */
  path: string;
}

const TENANT_PATH = /^\/t\/([^/]*)(\/.*)?$/;
const WELL_KNOWN_TENANT_PATH = /^\/\.well-known\/(openid-configuration)\/t\/([^/]+)$/;

/** The path part of a URL string, without parsing the whole URL (routing runs on every request). */
function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("://") + 3);
  if (start < 0) return "/";
  const q = url.indexOf("?", start);
  const h = url.indexOf("#", start);
  const end = Math.min(q < 0 ? url.length : q, h < 0 ? url.length : h);
  return url.slice(start, end);
}

function hostOf(url: string): string {
  const start = url.indexOf("://") + 3;
  const end = url.indexOf("/", start);
  return url.slice(start, end < 0 ? undefined : end).toLowerCase();
}

/**
 * A request's tenant by its URL: a host TENANT_HOSTS maps, else `/t/<id>/...`, else the origin's own
 * (`default`). A `/t/` segment that is not a tenant id routes as an unknown tenant (404 later), never
 * as the default's path.
 */
export function tenantRouteOf(url: string, hosts: Readonly<Record<string, string>>): TenantRoute {
  const path = pathOf(url);
  const host = hostOf(url);
  // Own properties only: a Host of `constructor` is no tenant's.
  if (Object.hasOwn(hosts, host)) return { tenant: hosts[host] as string, via: "host", path };
  // RFC 8414 §3.1's form for an issuer with a path: the well-known segment first, then the issuer's path.
  const wellKnown = WELL_KNOWN_TENANT_PATH.exec(path);
  if (wellKnown) return { tenant: wellKnown[2] as string, via: "path", path: `/.well-known/${wellKnown[1]}` };
  const m = TENANT_PATH.exec(path);
  if (!m) return { tenant: DEFAULT_TENANT, via: "origin", path };
  return { tenant: m[1] as string, via: "path", path: m[2] ?? "/" };
}

/**
 * The admin API's tenant: `/admin/v1/tenants/<id>/<resource...>` is the resource route of that
 * tenant (`/admin/v1/<resource...>` for the Worker's router); every other admin path is the
 * platform's own, and its resource routes are the `default` tenant's.
 */
const ADMIN_TENANT_PATH = /^\/admin\/v1\/tenants\/([^/]+)(\/.+)$/;
export function adminTenantRouteOf(url: string): TenantRoute {
  const path = pathOf(url);
  const m = ADMIN_TENANT_PATH.exec(path);
  if (!m) return { tenant: DEFAULT_TENANT, via: "origin", path };
  return { tenant: m[1] as string, via: "path", path: `/admin/v1${m[2]}` };
}

/** The issuer of a tenant: the deployment's for `default`, its custom host, or `<origin>/t/<id>`. */
export function issuerOf(config: Pick<Config, "ISSUER" | "TENANT_HOSTS">, tenant: string): string {
  if (tenant === DEFAULT_TENANT) return config.ISSUER;
  const host = hostedAt(config, tenant);
  if (host) return `${new URL(config.ISSUER).protocol}//${host}`;
  return `${config.ISSUER}/t/${tenant}`;
}

/** The custom host a tenant is served at, if TENANT_HOSTS maps one to it. */
export function hostedAt(config: Pick<Config, "TENANT_HOSTS">, tenant: string): string | undefined {
  for (const [host, t] of Object.entries(config.TENANT_HOSTS)) if (t === tenant) return host;
  return undefined;
}

/**
 * Keys that hold per address or per user code, per tenant: the default tenant's are what they were
 * before tenants (state written then keeps its meaning), another tenant's are prefixed by its id.
 */
export function tenantScoped(config: Pick<Config, "TENANT">, key: string): string {
  return config.TENANT === DEFAULT_TENANT ? key : `${config.TENANT}:${key}`;
}
