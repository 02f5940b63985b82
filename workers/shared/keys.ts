import { calculateJwkThumbprint, exportJWK, importJWK, type JWK } from "jose";
import type { Config } from "./config";
import { seal, unseal } from "./crypto";
import type { Env } from "./env";

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
let ring: { source: Config; until: number; value: Promise<KeyRing> } | undefined;

/** The key ring, built once per isolate and refreshed each minute: importing a key costs far more than signing. */
export function keyRing(env: Env, config: Config): Promise<KeyRing> {
  const now = Date.now();
  if (ring?.source === config && ring.until > now) return ring.value;
  const value = buildRing(env, config, now);
  const entry = { source: config, until: now + RING_TTL_MS, value };
  value.catch(() => {
    if (ring === entry) ring = undefined;
  });
  ring = entry;
  return value;
}

/** Forces the next `keyRing` call to re-read D1 (after a rotation in this isolate). */
export function forgetKeyRing(): void {
  ring = undefined;
}

async function buildRing(env: Env, config: Config, now: number): Promise<KeyRing> {
  const { results: rows } = await env.DB.prepare("SELECT * FROM signing_keys").all<KeyRow>();
  const byKid = new Map(rows.map((r) => [r.kid, r]));
  const candidates: {
    kid: string;
    alg: SigningAlg;
    activatesAt: number;
    retiresAt: number | null;
    privateJwk: JWK | null;
    publicJwk: JWK;
  }[] = [];

  for (const alg of SIGNING_ALGS) {
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
    if (!active?.privateJwk) throw new Error(`no active ${alg} signing key`);
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
  const { results: rows } = await env.DB.prepare("SELECT * FROM signing_keys").all<KeyRow>();
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
    const newestCreated = newest?.created_at ?? 0;
    if (onlyIfOlderThanMs !== undefined && newest && now - newestCreated < onlyIfOlderThanMs) continue;

    const pair = (await crypto.subtle.generateKey(GENERATE[alg], true, ["sign", "verify"])) as CryptoKeyPair;
    const privateJwk = await exportJWK(pair.privateKey);
    const pub = publicJwk(privateJwk);
    const kid = await calculateJwkThumbprint(pub);
    statements.push(
      env.DB.prepare(
        "INSERT INTO signing_keys (kid, alg, public_jwk, private_jwk_sealed, created_at, activates_at) VALUES (?, ?, ?, ?, ?, ?)",
      ).bind(
        kid,
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
          `INSERT INTO signing_keys (kid, alg, public_jwk, private_jwk_sealed, created_at, activates_at, retires_at)
           VALUES (?, ?, ?, NULL, ?, 0, ?) ON CONFLICT(kid) DO UPDATE SET retires_at = excluded.retires_at`,
        ).bind(current.kid, alg, JSON.stringify(currentJwk), now, retiresAt),
      );
      result.retiring.push({ kid: current.kid, alg, retires_at: new Date(retiresAt).toISOString() });
    }
  }
  if (statements.length) await env.DB.batch(statements);
  forgetKeyRing();
  return result;
}
