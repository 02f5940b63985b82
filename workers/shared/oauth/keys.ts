import { calculateJwkThumbprint, exportJWK, importJWK, type JWK } from "jose";
import { seal, unseal } from "../../../durable-objects/contract/crypto";
import { log } from "../../../durable-objects/contract/log";
import type { Config } from "../config/config";
import type { Env } from "../platform/env";
import { unavailable } from "../platform/errors";

/**
 * Signing keys. The bootstrap keys come from the SIGNING_KEY_* secrets; rotated keys live in D1's
 * `signing_keys` with their private half sealed under KEY_ENCRYPTION_SECRET. A new key is published in
 * JWKS `key_publish_lead_seconds` before it signs, and the key it replaces stays published until every
 * token it signed has expired.
 */

export type SigningAlg = "RS256" | "ES256";
export const SIGNING_ALGS: readonly SigningAlg[] = ["RS256", "ES256"];

export interface SigningKey {
  kid: string;
  alg: SigningAlg;
  key: CryptoKey;
}

export interface KeyRing {
  /** The key new tokens are signed with, per algorithm. */
  signing: Record<SigningAlg, SigningKey>;
  /** Every key a token may be signed with, by kid (published in JWKS). */
  verification: Map<string, { alg: SigningAlg; key: CryptoKey; jwk: JWK }>;
  jwks: { keys: JWK[] };
}

interface KeyRow {
  kid: string;
  alg: SigningAlg;
  public_jwk: string;
  private_jwk_sealed: string | null;
  created_at: number;
  activates_at: number;
  retires_at: number | null;
}

const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

export function publicJwk(jwk: JWK): JWK {
  return Object.fromEntries(Object.entries(jwk).filter(([k]) => !PRIVATE_MEMBERS.includes(k))) as JWK;
}

async function kidOf(jwk: JWK): Promise<string> {
  return jwk.kid ?? calculateJwkThumbprint(publicJwk(jwk));
}

/** How often an isolate re-reads `signing_keys`; the publish lead must be longer. */
const RING_TTL_MS = 60_000;
/** Rings of the tenants this isolate served, least recently built first. */
const rings = new Map<string, { source: object; until: number; value: Promise<KeyRing> }>();
const MAX_RINGS = 2_000;

type KeyConfig = Pick<Config, "TENANT" | "SIGNING_KEY_RS256" | "SIGNING_KEY_ES256" | "KEY_ENCRYPTION_SECRET">;

/**
 * A tenant's key ring, built once per isolate and refreshed each minute: importing a key costs far
 * more than signing. The `default` tenant's bootstrap keys come from the SIGNING_KEY_* secrets; every
 * tenant's rotated keys (and all of another tenant's) are its rows of `signing_keys` (issue 23).
 */
export function keyRing(env: Env, config: KeyConfig): Promise<KeyRing> {
  const now = Date.now();
  const hit = rings.get(config.TENANT);
  // The source is the deployment's key material: a new deployment config (new secrets) rebuilds.
  if (hit?.source === config.SIGNING_KEY_RS256 && hit.until > now) return hit.value;
  const value = buildRing(env, config, now);
  const entry = { source: config.SIGNING_KEY_RS256 as object, until: now + RING_TTL_MS, value };
  value.catch(() => {
    if (rings.get(config.TENANT) === entry) rings.delete(config.TENANT);
  });
  rings.delete(config.TENANT);
  if (rings.size >= MAX_RINGS) rings.delete(rings.keys().next().value as string);
  rings.set(config.TENANT, entry);
  return value;
}

/** Forces the next `keyRing` call to re-read D1 (after a rotation in this isolate); every tenant's without one. */
export function forgetKeyRing(tenant?: string): void {
  if (tenant === undefined) rings.clear();
  else rings.delete(tenant);
}

const isDefault = (config: Pick<Config, "TENANT">) => config.TENANT === "default";

async function buildRing(env: Env, config: KeyConfig, now: number): Promise<KeyRing> {
  const { results: rows } = await env.DB.prepare("SELECT * FROM signing_keys WHERE tenant = ?")
    .bind(config.TENANT)
    .all<KeyRow>();
  const byKid = new Map(rows.map((r) => [r.kid, r]));
  const candidates: {
    kid: string;
    alg: SigningAlg;
    activatesAt: number;
    retiresAt: number | null;
    privateJwk: JWK | null;
    publicJwk: JWK;
  }[] = [];

  for (const alg of isDefault(config) ? SIGNING_ALGS : []) {
    const jwk = (alg === "RS256" ? config.SIGNING_KEY_RS256 : config.SIGNING_KEY_ES256) as JWK;
    const kid = await kidOf(jwk);
    candidates.push({
      kid,
      alg,
      activatesAt: 0,
      retiresAt: byKid.get(kid)?.retires_at ?? null,
      privateJwk: jwk,
      publicJwk: publicJwk(jwk),
    });
  }
  for (const row of rows) {
    if (!row.private_jwk_sealed) continue; // a bootstrap key's retirement record, handled above
    const opened = await unseal(config.KEY_ENCRYPTION_SECRET, row.private_jwk_sealed);
    if (!opened) throw new Error(`signing key ${row.kid} cannot be unsealed with KEY_ENCRYPTION_SECRET`);
    candidates.push({
      kid: row.kid,
      alg: row.alg,
      activatesAt: row.activates_at,
      retiresAt: row.retires_at,
      privateJwk: JSON.parse(opened) as JWK,
      publicJwk: JSON.parse(row.public_jwk) as JWK,
    });
  }

  const published = candidates.filter((k) => k.retiresAt === null || k.retiresAt > now);
  const verification = new Map<string, { alg: SigningAlg; key: CryptoKey; jwk: JWK }>();
  await Promise.all(
    published.map(async (k) => {
      const key = (await importJWK({ ...k.publicJwk, alg: k.alg }, k.alg)) as CryptoKey;
      verification.set(k.kid, { alg: k.alg, key, jwk: { ...k.publicJwk, kid: k.kid, alg: k.alg, use: "sig" } });
    }),
  );
  const signing = {} as Record<SigningAlg, SigningKey>;
  for (const alg of SIGNING_ALGS) {
    const active = published
      .filter((k) => k.alg === alg && k.activatesAt <= now && k.privateJwk)
      .sort((a, b) => b.activatesAt - a.activatesAt)[0];
    // A tenant deleted a moment ago (its record still cached here) has no keys: retry, never 500.
    if (!active?.privateJwk) {
      log("error", "no active signing key", { tenant: config.TENANT, alg });
      throw unavailable(30);
    }
    signing[alg] = { kid: active.kid, alg, key: (await importJWK({ ...active.privateJwk, alg }, alg)) as CryptoKey };
  }
  return { signing, verification, jwks: { keys: [...verification.values()].map((v) => v.jwk) } };
}

const GENERATE: Record<SigningAlg, SubtleCryptoGenerateKeyAlgorithm> = {
  RS256: { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
  ES256: { name: "ECDSA", namedCurve: "P-256" },
};

export interface RotationResult {
  published: { kid: string; alg: SigningAlg; activates_at: string }[];
  retiring: { kid: string; alg: SigningAlg; retires_at: string }[];
}

/**
 * Publishes a new key per algorithm, signing from `now + lead`, and schedules the retirement of the
 * keys it replaces for when the last token they can sign has expired. With `onlyIfOlderThanMs`
 * (the cron), an algorithm whose newest key is younger is left alone; a pending key is never replaced.
 */
export async function rotateSigningKeys(
  env: Env,
  config: Config,
  now: number,
  onlyIfOlderThanMs?: number,
): Promise<RotationResult> {
  const ringNow = await buildRing(env, config, now);
  const { results: rows } = await env.DB.prepare("SELECT * FROM signing_keys WHERE tenant = ?")
    .bind(config.TENANT)
    .all<KeyRow>();
  const p = config.POLICY;
  const activatesAt = now + p.key_publish_lead_seconds * 1000;
  const retiresAt = activatesAt + Math.max(p.id_token_ttl_seconds, p.access_token_ttl_seconds) * 1000 + 60_000;
  const result: RotationResult = { published: [], retiring: [] };
  const statements: D1PreparedStatement[] = [];

  for (const alg of SIGNING_ALGS) {
    const newest = rows
      .filter((r) => r.alg === alg && r.private_jwk_sealed)
      .sort((a, b) => b.activates_at - a.activates_at)[0];
    if (newest && newest.activates_at > now) continue; // a key is already waiting to take over
    let newestCreated = newest?.created_at ?? 0;
    if (onlyIfOlderThanMs !== undefined && !newest) {
      // Only the bootstrap key (a SIGNING_KEY_* secret): its age counts from the first run that saw
      // it, recorded in a row without a private half (issue 27 item 19: a first start rotated at once).
      const current = ringNow.signing[alg];
      const seen = rows.find((r) => r.kid === current.kid);
      if (!seen) {
        const jwk = ringNow.verification.get(current.kid)?.jwk;
        if (jwk)
          statements.push(
            env.DB.prepare(
              `INSERT INTO signing_keys (kid, tenant, alg, public_jwk, private_jwk_sealed, created_at, activates_at)
               VALUES (?, ?, ?, ?, NULL, ?, 0) ON CONFLICT(kid) DO NOTHING`,
            ).bind(current.kid, config.TENANT, alg, JSON.stringify(jwk), now),
          );
        continue;
      }
      newestCreated = seen.created_at;
    }
    if (onlyIfOlderThanMs !== undefined && now - newestCreated < onlyIfOlderThanMs) continue;

    const pair = (await crypto.subtle.generateKey(GENERATE[alg], true, ["sign", "verify"])) as CryptoKeyPair;
    const privateJwk = await exportJWK(pair.privateKey);
    const pub = publicJwk(privateJwk);
    const kid = await calculateJwkThumbprint(pub);
    statements.push(
      env.DB.prepare(
        "INSERT INTO signing_keys (kid, tenant, alg, public_jwk, private_jwk_sealed, created_at, activates_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      ).bind(
        kid,
        config.TENANT,
        alg,
        JSON.stringify(pub),
        await seal(config.KEY_ENCRYPTION_SECRET, JSON.stringify(privateJwk)),
        now,
        activatesAt,
      ),
    );
    result.published.push({ kid, alg, activates_at: new Date(activatesAt).toISOString() });

    const current = ringNow.signing[alg];
    const currentJwk = ringNow.verification.get(current.kid)?.jwk;
    if (currentJwk) {
      // The replaced key's row (a bootstrap key gets one here) carries its retirement.
      statements.push(
        env.DB.prepare(
          `INSERT INTO signing_keys (kid, tenant, alg, public_jwk, private_jwk_sealed, created_at, activates_at, retires_at)
           VALUES (?, ?, ?, ?, NULL, ?, 0, ?) ON CONFLICT(kid) DO UPDATE SET retires_at = excluded.retires_at`,
        ).bind(current.kid, config.TENANT, alg, JSON.stringify(currentJwk), now, retiresAt),
      );
      result.retiring.push({ kid: current.kid, alg, retires_at: new Date(retiresAt).toISOString() });
    }
  }
  if (statements.length) await env.DB.batch(statements);
  forgetKeyRing(config.TENANT);
  return result;
}

/**
 * A new tenant's first keys, one per algorithm, signing at once (no JWKS has cached the tenant yet):
 * the statements that insert them, for the batch that creates the tenant, so a tenant never exists
 * without keys.
 */
export async function firstKeyStatements(
  env: Env,
  config: Pick<Config, "KEY_ENCRYPTION_SECRET">,
  tenant: string,
  now: number,
): Promise<D1PreparedStatement[]> {
  return Promise.all(
    SIGNING_ALGS.map(async (alg) => {
      const pair = (await crypto.subtle.generateKey(GENERATE[alg], true, ["sign", "verify"])) as CryptoKeyPair;
      const privateJwk = await exportJWK(pair.privateKey);
      const pub = publicJwk(privateJwk);
      return env.DB.prepare(
        "INSERT INTO signing_keys (kid, tenant, alg, public_jwk, private_jwk_sealed, created_at, activates_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      ).bind(
        await calculateJwkThumbprint(pub),
        tenant,
        alg,
        JSON.stringify(pub),
        await seal(config.KEY_ENCRYPTION_SECRET, JSON.stringify(privateJwk)),
        now,
        now,
      );
    }),
  );
}
