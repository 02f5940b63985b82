import { calculateJwkThumbprint, importJWK, type JWK } from "jose";
import type { Config } from "./config";
import type { Env } from "./env";

export type SigningAlg = "RS256" | "ES256";

export interface SigningKey {
  kid: string;
  alg: SigningAlg;
  key: CryptoKey;
}

export interface KeyRing {
  /** The key new tokens are signed with, per algorithm. */
  signing: Record<SigningAlg, SigningKey>;
  /** Every key a token may still be signed with, by kid (published in JWKS). */
  verification: Map<string, { alg: SigningAlg; key: CryptoKey; jwk: JWK }>;
  jwks: { keys: JWK[] };
}

const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

export function publicJwk(jwk: JWK): JWK {
  return Object.fromEntries(Object.entries(jwk).filter(([k]) => !PRIVATE_MEMBERS.includes(k))) as JWK;
}

async function loadKey(jwk: JWK, alg: SigningAlg) {
  const pub = publicJwk(jwk);
  const kid = jwk.kid ?? (await calculateJwkThumbprint(pub));
  const [key, verifyKey] = await Promise.all([
    importJWK({ ...jwk, alg }, alg) as Promise<CryptoKey>,
    importJWK({ ...pub, alg }, alg) as Promise<CryptoKey>,
  ]);
  return { kid, alg, key, verifyKey, jwk: { ...pub, kid, alg, use: "sig" } as JWK };
}

/** Keys are imported once per isolate: importing an RSA key costs far more than signing with it. */
let ring: { source: Config; value: Promise<KeyRing> } | undefined;

export function keyRing(_env: Env, config: Config): Promise<KeyRing> {
  if (ring?.source === config) return ring.value;
  const value = (async (): Promise<KeyRing> => {
    const [rs, es] = await Promise.all([
      loadKey(config.SIGNING_KEY_RS256 as JWK, "RS256"),
      loadKey(config.SIGNING_KEY_ES256 as JWK, "ES256"),
    ]);
    const verification = new Map<string, { alg: SigningAlg; key: CryptoKey; jwk: JWK }>();
    for (const k of [rs, es]) verification.set(k.kid, { alg: k.alg, key: k.verifyKey, jwk: k.jwk });
    return {
      signing: { RS256: { kid: rs.kid, alg: "RS256", key: rs.key }, ES256: { kid: es.kid, alg: "ES256", key: es.key } },
      verification,
      jwks: { keys: [...verification.values()].map((v) => v.jwk) },
    };
  })();
  value.catch(() => {
    if (ring?.value === value) ring = undefined;
  });
  ring = { source: config, value };
  return value;
}
