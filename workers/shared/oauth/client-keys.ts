import { createLocalJWKSet, type JSONWebKeySet, type JWTVerifyOptions, type JWTVerifyResult, jwtVerify } from "jose";
import type { Config } from "../config/config";
import { fetchClientDocument, OutboundFetchError } from "./outbound-fetch";

/** What of a client its keys are found by (clients.ts's Client has these; named here so the two files do not import each other). */
type KeyedClient = { client_id: string; jwks: unknown; jwks_uri?: string | null };

/**
 * A client's public keys, for its private_key_jwt assertions (RFC 7523 §2.2, OIDC Core §9) and its
 * signed request objects (OIDC Core §6, RFC 9101): registered by value (`jwks`) or by reference
 * (`jwks_uri`, OIDC Registration §2 / RFC 7591 §2).
 *
 * A `jwks_uri` is fetched by outbound-fetch.ts's rules (5 s, 64 KB, no redirect, the webhook
 * sender's address rules) and kept per isolate for `JWKS_TTL_MS`. A JWT that no kept key verifies
 * (its `kid` is not in the set, or no key's signature matches) makes one refetch, so a client that
 * rotated its keys at its jwks_uri is served at once (the OpenID Foundation's
 * oidcc-refresh-token-rp-key-rotation); such refetches are at most one per `KID_MISS_REFETCH_MS`
 * per client and isolate, so JWTs with made-up kids cannot turn into fetches one for one. A failed
 * fetch is remembered for `FAILURE_HOLD_MS`, for the same reason. The caller maps a
 * ClientKeysUnavailable to its protocol's error (invalid_client, invalid_request_object), never a 500.
 */

export const JWKS_TTL_MS = 5 * 60_000;
export const KID_MISS_REFETCH_MS = 30_000;
export const FAILURE_HOLD_MS = 10_000;
/** How many keys a fetched set may hold (the admin API takes 10 by value). */
const MAX_KEYS = 20;
/** How many clients' sets an isolate keeps (each a few KB). */
const MAX_CACHED_SETS = 500;
/** The JWK members (RFC 7517 §4, RFC 7518 §6) a kept key needs to verify a signature. */
const KEPT_MEMBERS = ["kty", "kid", "alg", "use", "key_ops", "n", "e", "crv", "x", "y"];

/** The client's keys could not be had: no keys registered, or its jwks_uri failed. */
export class ClientKeysUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ClientKeysUnavailable";
  }
}

interface CachedKeys {
  /** The set, or why the last fetch failed. */
  keys: JSONWebKeySet | null;
  problem: string | null;
  fetchedAt: number;
  until: number;
}

/** Per isolate, by tenant, client and URI (a changed jwks_uri is another entry). */
const cache = new Map<string, CachedKeys>();
/** When a client's kept set was last refetched because a JWT's key was not in it. */
const missRefetchAt = new Map<string, number>();
/** Fetches under way, shared by the requests that wait for the same set. */
const inflight = new Map<string, Promise<CachedKeys>>();

const cacheKey = (config: Config, client: KeyedClient, uri: string) => `${config.TENANT}\n${client.client_id}\n${uri}`;

async function fetchKeys(config: Config, uri: string): Promise<CachedKeys> {
  const now = Date.now();
  const failed = (problem: string): CachedKeys => ({
    keys: null,
    problem,
    fetchedAt: now,
    until: now + FAILURE_HOLD_MS,
  });
  let text: string;
  try {
    text = await fetchClientDocument(
      uri,
      config.ENVIRONMENT === "production",
      "application/jwk-set+json, application/json",
    );
  } catch (err) {
    if (err instanceof OutboundFetchError) return failed(`jwks_uri ${err.message}`);
    throw err;
  }
  let set: unknown;
  try {
    set = JSON.parse(text);
  } catch {
    return failed("jwks_uri: the document is not JSON");
  }
  const keys = (set as { keys?: unknown })?.keys;
  if (
    !Array.isArray(keys) ||
    keys.length > MAX_KEYS ||
    !keys.every((k) => k && typeof k === "object" && !Array.isArray(k))
  )
    return failed(`jwks_uri: the document is not a JWK Set (RFC 7517 §5) of at most ${MAX_KEYS} keys`);
  // A private member in a published set is the client's mistake; the key is not used (RFC 7517 §9.1).
  // What is kept of the others is what verifying needs, so a kept set is a few KB whatever was served.
  const publicKeys = keys
    .filter((k) => !["d", "p", "q", "dp", "dq", "qi", "k"].some((m) => m in k))
    .map((k) => Object.fromEntries(KEPT_MEMBERS.filter((m) => m in k).map((m) => [m, k[m]])));
  return { keys: { keys: publicKeys }, problem: null, fetchedAt: now, until: now + JWKS_TTL_MS };
}

/** The kept set for `uri`, fetched when there is none or it expired; one fetch per key at a time. */
async function keysAt(config: Config, client: KeyedClient, uri: string, refetch: boolean): Promise<CachedKeys> {
  const key = cacheKey(config, client, uri);
  const hit = cache.get(key);
  if (hit && !refetch && hit.until > Date.now()) return hit;
  let pending = inflight.get(key);
  if (!pending) {
    pending = fetchKeys(config, uri).finally(() => inflight.delete(key));
    inflight.set(key, pending);
  }
  const fetched = await pending;
  if (cache.size > MAX_CACHED_SETS) cache.clear();
  cache.set(key, fetched);
  return fetched;
}

/** Whether a kid miss may refetch now (and, if so, counts it). */
function mayRefetch(config: Config, client: KeyedClient, uri: string): boolean {
  const now = Date.now();
  const key = cacheKey(config, client, uri);
  if (now - (missRefetchAt.get(key) ?? Number.NEGATIVE_INFINITY) < KID_MISS_REFETCH_MS) return false;
  if (missRefetchAt.size > 1_000) missRefetchAt.clear();
  missRefetchAt.set(key, now);
  return true;
}

/** jose's codes for "no key of the set verifies this JWT": the ones a rotated key explains. */
const KEY_MISS = new Set(["ERR_JWKS_NO_MATCHING_KEY", "ERR_JWS_SIGNATURE_VERIFICATION_FAILED"]);

/**
 * Verifies `jwt` with the client's keys (jose's jwtVerify and `options`). Throws jose's error for a
 * JWT that fails, and ClientKeysUnavailable when the client has no keys or its jwks_uri fails.
 */
export async function verifyWithClientKeys(
  config: Config,
  client: KeyedClient,
  jwt: string,
  options: JWTVerifyOptions,
): Promise<JWTVerifyResult> {
  if (client.jwks) return jwtVerify(jwt, createLocalJWKSet(client.jwks as JSONWebKeySet), options);
  const uri = client.jwks_uri;
  if (!uri) throw new ClientKeysUnavailable("the client has registered no keys (jwks or jwks_uri)");
  let entry = await keysAt(config, client, uri, false);
  if (!entry.keys) throw new ClientKeysUnavailable(entry.problem ?? "jwks_uri could not be fetched");
  try {
    return await jwtVerify(jwt, createLocalJWKSet(entry.keys), options);
  } catch (err) {
    const code = (err as { code?: string }).code ?? "";
    if (!KEY_MISS.has(code) || !mayRefetch(config, client, uri)) throw err;
  }
  // RFC 7517 / OIDC Core §10.1.1: a client rotates by publishing a new key at its jwks_uri; its
  // first JWT with that key finds it here.
  entry = await keysAt(config, client, uri, true);
  if (!entry.keys) throw new ClientKeysUnavailable(entry.problem ?? "jwks_uri could not be fetched");
  return jwtVerify(jwt, createLocalJWKSet(entry.keys), options);
}
