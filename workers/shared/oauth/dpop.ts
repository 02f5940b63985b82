import { calculateJwkThumbprint, decodeProtectedHeader, importJWK, type JWK, type JWTPayload, jwtVerify } from "jose";
import { base64url, hmac, timingSafeEqualString } from "../../../durable-objects/contract/crypto";
import type { Config } from "../config/config";
import type { Env } from "../platform/env";
import { OAuthError, type OAuthErrorCode } from "../platform/errors";
import { spendOnceAtHome } from "./single-use";

/**
 * DPoP (RFC 9449): proofs of possession of a client's key at the token endpoint and at userinfo, and
 * the server nonces of §8. A request without a `DPoP` header runs none of this.
 */

/**
 * RFC 9449 §5.1 `dpop_signing_alg_values_supported`: asymmetric algorithms only (§4.2), and of those
 * the ones FAPI 2.0 Security Profile §5.4.1 allows: no RSASSA-PKCS1-v1_5 (RS256).
 */
export const DPOP_ALGS = ["ES256", "PS256", "EdDSA"] as const;

/** How far ahead of this server's clock a proof's `iat` may be (RFC 9449 §11.1: clock skew). */
const FUTURE_SKEW_SECONDS = 10;
/** RFC 9449 §11.1: a jti is a unique identifier; bounded so it cannot bloat the single-use store. */
const MAX_JTI_LENGTH = 256;
const MAX_PROOF_LENGTH = 8192;
/** A nonce is good for its step and the next one (RFC 9449 §8: the server decides how long). */
const NONCE_STEP_SECONDS = 300;
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];
/** RFC 7518 §3.3: an RSA key of at least 2048 bits (its modulus, base64url, at least 342 characters). */
const MIN_RSA_MODULUS_CHARS = 342;

export interface DpopProof {
  /** RFC 7638 SHA-256 thumbprint of the proof's key: what a bound token's `cnf.jkt` is (RFC 9449 §6.1). */
  jkt: string;
}

export interface ProofCheck {
  /** The endpoint's path under the issuer, e.g. `/token`: `htu` is the issuer's URL of it. */
  path: string;
  /** A protected resource (userinfo): errors are 401 with a DPoP challenge (RFC 9449 §7.1), `ath` is required. */
  accessToken?: string;
}

/** RFC 9449 §7.1: the challenge a resource answers a DPoP request with. */
export function dpopChallenge(error?: string, description?: string): string {
  const params = [
    ...(error ? [`error="${error}"`] : []),
    ...(description ? [`error_description="${description.replace(/["\\]/g, "")}"`] : []),
    `algs="${DPOP_ALGS.join(" ")}"`,
  ];
  return `DPoP ${params.join(", ")}`;
}

function refusal(
  code: Extract<OAuthErrorCode, "invalid_dpop_proof" | "use_dpop_nonce">,
  description: string,
  check: ProofCheck,
  nonce?: string,
): OAuthError {
  const headers = nonce ? { "DPoP-Nonce": nonce } : undefined;
  // RFC 9449 §7.1, §9: a resource server answers 401 with the error in its DPoP challenge.
  if (check.accessToken !== undefined)
    return new OAuthError(code, description, {
      status: 401,
      wwwAuthenticate: dpopChallenge(code, description),
      ...(headers ? { headers } : {}),
    });
  return new OAuthError(code, description, headers ? { headers } : {});
}

/** RFC 9449 §4.3 item 9: the URI compared without query and fragment, scheme and host as URL parsing normalizes them. */
export function normalizeHtu(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.username || url.password) return null;
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/** RFC 9449 §8: a nonce bound to the issuer and a time step, a MAC under the deployment's HMAC secret; nothing stored. */
export async function issueDpopNonce(config: Config, now = Date.now()): Promise<string> {
  const step = Math.floor(now / 1000 / NONCE_STEP_SECONDS);
  return nonceFor(config, step);
}

async function nonceFor(config: Config, step: number): Promise<string> {
  const mac = await hmac(config.OTP_HMAC_SECRET, `dpop-nonce\n${config.ISSUER}\n${step}`);
  return `${step.toString(36)}.${mac}`;
}

async function nonceValid(config: Config, nonce: unknown, now: number): Promise<boolean> {
  if (typeof nonce !== "string" || nonce.length > 80) return false;
  const dot = nonce.indexOf(".");
  const step = Number.parseInt(nonce.slice(0, dot), 36);
  const current = Math.floor(now / 1000 / NONCE_STEP_SECONDS);
  if (dot < 1 || (step !== current && step !== current - 1)) return false;
  return timingSafeEqualString(nonce, await nonceFor(config, step));
}

/** The headers a response to a DPoP request carries: a fresh nonce where the tenant requires them. */
export async function dpopResponseHeaders(config: Config): Promise<Record<string, string>> {
  return config.POLICY.dpop_require_nonce ? { "DPoP-Nonce": await issueDpopNonce(config) } : {};
}

function publicJwkOf(header: Record<string, unknown>): JWK | null {
  const jwk = header.jwk;
  if (typeof jwk !== "object" || jwk === null || Array.isArray(jwk)) return null;
  const key = jwk as JWK;
  if (PRIVATE_MEMBERS.some((m) => m in key)) return null;
  if (key.kty === "RSA") return typeof key.n === "string" && key.n.length >= MIN_RSA_MODULUS_CHARS ? key : null;
  if (key.kty === "EC" || key.kty === "OKP") return key;
  return null;
}

/**
 * The request's DPoP proof, checked as RFC 9449 §4.3 says, or null when it has no `DPoP` header:
 * one header, a JWS of `typ: dpop+jwt` and an algorithm of DPOP_ALGS, signed by the public key of its
 * `jwk` header; `jti`, `htm` (the request's method), `htu` (the issuer's URL of `check.path`), `iat`
 * within `dpop_proof_max_age_seconds` (and a few seconds ahead), `ath` where an access token is
 * presented (§7), and a nonce of this server's where the policy requires one or the proof carries
 * one (§8). The jti is then spent: single use in its window (§11.1).
 */
export async function dpopProof(env: Env, config: Config, req: Request, check: ProofCheck): Promise<DpopProof | null> {
  const value = req.headers.get("dpop");
  if (value === null) return null;
  const invalid = (description: string) => refusal("invalid_dpop_proof", description, check);
  // RFC 9449 §4.3 item 1: one header, one JWT (several headers arrive joined by commas).
  if (value.includes(",")) throw invalid("send exactly one DPoP header");
  const proof = value.trim();
  if (proof.length === 0 || proof.length > MAX_PROOF_LENGTH || proof.split(".").length !== 3)
    throw invalid("the DPoP proof is not a JWT");
  let header: Record<string, unknown>;
  try {
    header = decodeProtectedHeader(proof) as Record<string, unknown>;
  } catch {
    throw invalid("the DPoP proof is not a JWT");
  }
  if (typeof header.typ !== "string" || header.typ.toLowerCase() !== "dpop+jwt")
    throw invalid('the DPoP proof\'s typ must be "dpop+jwt"');
  const alg = header.alg;
  if (typeof alg !== "string" || !(DPOP_ALGS as readonly string[]).includes(alg))
    throw invalid(`the DPoP proof's alg must be one of ${DPOP_ALGS.join(", ")}`);
  const jwk = publicJwkOf(header);
  if (!jwk) throw invalid("the DPoP proof's jwk must be a public key (RSA of 2048 bits or more, EC or OKP)");

  let payload: JWTPayload;
  try {
    const key = await importJWK(jwk, alg);
    ({ payload } = await jwtVerify(proof, key, { algorithms: [alg], typ: "dpop+jwt" }));
  } catch {
    throw invalid("the DPoP proof's signature does not verify with its jwk");
  }

  const { jti, htm, htu, iat } = payload as { jti?: unknown; htm?: unknown; htu?: unknown; iat?: unknown };
  if (typeof jti !== "string" || jti.length === 0 || jti.length > MAX_JTI_LENGTH)
    throw invalid(`the DPoP proof needs a jti of 1 to ${MAX_JTI_LENGTH} characters`);
  if (htm !== req.method) throw invalid(`the DPoP proof's htm must be ${req.method}`);
  const expected = normalizeHtu(`${config.ISSUER}${check.path}`);
  if (typeof htu !== "string" || normalizeHtu(htu) !== expected)
    throw invalid(`the DPoP proof's htu must be ${expected}`);
  const now = Date.now();
  const maxAge = config.POLICY.dpop_proof_max_age_seconds;
  const nowSeconds = Math.floor(now / 1000);
  if (typeof iat !== "number" || !Number.isFinite(iat)) throw invalid("the DPoP proof needs an iat");
  if (iat < nowSeconds - maxAge || iat > nowSeconds + FUTURE_SKEW_SECONDS)
    throw invalid(`the DPoP proof's iat must be within the last ${maxAge} s`);
  if (check.accessToken !== undefined) {
    // RFC 9449 §4.2, §7: the base64url SHA-256 of the access token presented with it.
    const ath = base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(check.accessToken)));
    if (typeof payload.ath !== "string" || !timingSafeEqualString(payload.ath, ath))
      throw invalid("the DPoP proof's ath must be the hash of the access token");
  }
  // RFC 9449 §8: a nonce sent is always checked; none sent is refused only where the policy requires one.
  if (payload.nonce !== undefined || config.POLICY.dpop_require_nonce) {
    if (!(await nonceValid(config, payload.nonce, now)))
      throw refusal(
        "use_dpop_nonce",
        payload.nonce === undefined ? "a DPoP nonce is required" : "the DPoP nonce is invalid or expired",
        check,
        await issueDpopNonce(config, now),
      );
  }

  const jkt = await calculateJwkThumbprint(jwk, "sha256");
  // RFC 9449 §11.1: a proof is used once; kept as long as its iat would be accepted.
  const fresh = await spendOnceAtHome(
    env,
    config,
    "dpop",
    `${jkt}\n${jti}`,
    (iat + maxAge + 1) * 1000,
    maxAge + FUTURE_SKEW_SECONDS,
  );
  if (!fresh) throw invalid("the DPoP proof was used before");
  return { jkt };
}
