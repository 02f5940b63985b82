import { decodeJwt, decodeProtectedHeader, type JWTPayload, jwtVerify, SignJWT } from "jose";
import { base64url } from "../../../durable-objects/contract/crypto";
import type { Config } from "../config/config";
import type { Env } from "../platform/env";
import { OAuthError } from "../platform/errors";
import { issueId, parseId } from "../routing/ids";
import { allShards } from "../routing/shard-refs";
import { shard } from "../routing/stores";
import { keyRing, type SigningAlg, type SigningKey } from "./keys";
import { clientTokenAudience, personTokenAudience, userinfoAudience } from "./resources";

/** Claims Keyway puts in an access token besides the RFC 9068 ones: `sid` and `grant_id` drive revocation. */
export interface AccessTokenClaims extends JWTPayload {
  sub: string;
  client_id: string;
  scope: string;
  jti: string;
  sid: string;
  grant_id: string;
  auth_time: number;
  /** OIDC Core §5.5: the claims the authorization request asked userinfo for, space-separated. */
  userinfo_claims?: string;
  /** A pairwise client's token: the user's id, sealed (subjects.ts); its `sub` is the pairwise one. */
  uid?: string;
  /** RFC 9449 §6.1: bound to the DPoP key with this thumbprint. */
  cnf?: { jkt: string };
}

/**
 * A client's own access token (client_credentials, RFC 6749 §4.4): `sub` is the client_id (RFC 9068
 * §2.2), and there is no login behind it, so no `sid`, `grant_id` or `auth_time`. Its `jti` is placed
 * on a revocation shard of its own.
 */
export interface ClientTokenClaims extends JWTPayload {
  sub: string;
  client_id: string;
  scope: string;
  jti: string;
  /** RFC 9449 §6.1: bound to the DPoP key with this thumbprint. */
  cnf?: { jkt: string };
}

export type VerifiedAccessToken =
  | { kind: "user"; claims: AccessTokenClaims }
  | { kind: "client"; claims: ClientTokenClaims };

const jwtEncoder = new TextEncoder();
const base64urlJson = (value: unknown) => base64url(jwtEncoder.encode(JSON.stringify(value)));

/** The WebCrypto signature algorithm of each JWS `alg` Keyway signs with (RFC 7518 §3.3, §3.4). */
const JWS_SIGNING: Record<SigningAlg, Parameters<SubtleCrypto["sign"]>[0]> = {
  RS256: { name: "RSASSA-PKCS1-v1_5" },
  ES256: { name: "ECDSA", hash: "SHA-256" },
};

/**
 * A compact JWS of `claims` (RFC 7515 §7.1), the same bytes as jose's SignJWT makes of the same header
 * and claims set in the same order, without its builder: a token on the login path is two of these,
 * and jose's copy of the claims (structuredClone), header round trip through JSON.parse, key checks
 * and own base64 encoder cost more than the JSON and base64 themselves. The ring's keys are jose's
 * own imports for their `alg` (keys.ts), so they need none of its checks.
 */
export async function signJwt(
  key: SigningKey,
  header: Record<string, string>,
  claims: Record<string, unknown>,
): Promise<string> {
  const input = `${base64urlJson(header)}.${base64urlJson(claims)}`;
  const signature = await crypto.subtle.sign(JWS_SIGNING[key.alg], key.key, jwtEncoder.encode(input));
  return `${input}.${base64url(signature)}`;
}

/** The audience every token valid at /userinfo carries (a person's token, whatever its resources). */
export function accessTokenAudience(config: Config): string {
  return userinfoAudience(config);
}

/**
 * A jti placed in the revocation shard of its session, so one call checks jti, grant and sid.
 * `secret` makes it reproducible (a refresh retry re-signs the same token).
 */
export function newJti(config: Config, sid: string, secret?: string): string {
  const parsed = parseId(config, "sid", sid);
  // A sid no longer accepted (an id of the format before the MAC, past legacy_ids_until): the grant
  // it belongs to cannot be honoured.
  if (!parsed) throw new OAuthError("invalid_grant", "the login this grant belongs to is no longer valid");
  return issueId(config, "jti", { onto: parsed.ref }, secret).id;
}

export async function signAccessToken(
  env: Env,
  config: Config,
  c: {
    sub: string;
    client_id: string;
    scope: string;
    sid: string;
    grant_id: string;
    auth_time: number;
    jti: string;
    iat: number;
    /** RFC 8707: the resources the token is for (its `aud`, with userinfo's). */
    resource?: string[] | undefined;
    /** Issue 24: claims from organizations and grants (never one of the claims set here). */
    extra?: Record<string, unknown> | undefined;
    /** RFC 9449 §6.1: the thumbprint of the DPoP key the token is bound to. */
    jkt?: string | undefined;
  },
): Promise<string> {
  const alg = config.POLICY.access_token_signing_alg;
  const key = (await keyRing(env, config)).signing[alg];
  // RFC 9068 §2.1: typ "at+jwt"; RS256 (the default) is the algorithm every resource server must support.
  // The claims in the order SignJWT's setters put them: the payload's, then iss, sub, aud, jti, iat, exp.
  const claims: Record<string, unknown> = {
    ...c.extra,
    client_id: c.client_id,
    scope: c.scope,
    sid: c.sid,
    grant_id: c.grant_id,
    auth_time: c.auth_time,
    ...(c.jkt ? { cnf: { jkt: c.jkt } } : {}),
  };
  claims.iss = config.ISSUER;
  claims.sub = c.sub;
  claims.aud = personTokenAudience(config, c.resource);
  claims.jti = c.jti;
  claims.iat = finiteDate(c.iat);
  claims.exp = finiteDate(c.iat + config.POLICY.access_token_ttl_seconds);
  return signJwt(key, { alg, typ: "at+jwt", kid: key.kid }, claims);
}

/** A NumericDate claim: a finite number, as SignJWT requires. */
function finiteDate(value: number): number {
  if (!Number.isFinite(value)) throw new TypeError("a JWT date claim must be a finite number");
  return value;
}

/** Signs a client_credentials access token: RFC 9068 claims, `sub` = `client_id`, a jti of its own. */
export async function signClientToken(
  env: Env,
  config: Config,
  c: { client_id: string; scope: string; iat: number; region: string; resource: string[] | null; jkt?: string },
): Promise<{ token: string; jti: string }> {
  const alg = config.POLICY.access_token_signing_alg;
  const key = (await keyRing(env, config)).signing[alg];
  const { id: jti } = issueId(config, "jti", { region: c.region });
  const token = await new SignJWT({
    client_id: c.client_id,
    scope: c.scope,
    ...(c.jkt ? { cnf: { jkt: c.jkt } } : {}),
  })
    .setProtectedHeader({ alg, typ: "at+jwt", kid: key.kid })
    .setIssuer(config.ISSUER)
    .setSubject(c.client_id)
    .setAudience(clientTokenAudience(config, c.resource))
    .setJti(jti)
    .setIssuedAt(c.iat)
    .setExpirationTime(c.iat + config.POLICY.access_token_ttl_seconds)
    .sign(key.key);
  return { token, jti };
}

export async function signIdToken(
  env: Env,
  config: Config,
  alg: SigningAlg,
  c: {
    sub: string;
    aud: string;
    auth_time: number;
    nonce?: string | undefined;
    sid: string;
    iat: number;
    email?: string | undefined;
    /** The access token issued with this ID token: its hash becomes `at_hash`. */
    accessToken: string;
    /** Issue 24: claims from organizations and grants (never one of the claims set here). */
    extra?: Record<string, unknown> | undefined;
  },
): Promise<string> {
  const key = (await keyRing(env, config)).signing[alg];
  const claims: JWTPayload = {
    ...c.extra,
    auth_time: c.auth_time,
    amr: ["otp"],
    sid: c.sid,
    at_hash: await accessTokenHash(c.accessToken),
  };
  if (c.nonce !== undefined) claims.nonce = c.nonce;
  if (c.email !== undefined) {
    claims.email = c.email;
    claims.email_verified = true;
  }
  // As SignJWT's setters order them (signAccessToken).
  claims.iss = config.ISSUER;
  claims.sub = c.sub;
  claims.aud = c.aud;
  claims.iat = finiteDate(c.iat);
  claims.exp = finiteDate(c.iat + config.POLICY.id_token_ttl_seconds);
  return signJwt(key, { alg, typ: "JWT", kid: key.kid }, claims);
}

/**
 * A signed userinfo response (OIDC Core §5.3.2): the userinfo claims with `iss` (the tenant's issuer)
 * and `aud` (the client), signed by the tenant's current key of the client's
 * `userinfo_signed_response_alg`; the key ring is the one that just verified the access token.
 */
export async function signUserinfo(
  env: Env,
  config: Config,
  alg: SigningAlg,
  clientId: string,
  claims: Record<string, unknown>,
): Promise<string> {
  const key = (await keyRing(env, config)).signing[alg];
  return new SignJWT(claims)
    .setProtectedHeader({ alg, kid: key.kid })
    .setIssuer(config.ISSUER)
    .setAudience(clientId)
    .sign(key.key);
}

/**
 * OIDC Core §3.1.3.6 / §3.3.2.11: the left half of the access token's hash, base64url. RS256 and ES256
 * both hash with SHA-256, so the left 128 bits.
 */
export async function accessTokenHash(accessToken: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(accessToken)));
  return base64url(digest.subarray(0, digest.length / 2));
}

/** What an ID token used as a hint says: for whom (`aud`), about whom (`sub`), from which login (`sid`). */
export interface IdTokenHint {
  aud: string[];
  sub: string;
  sid?: string;
}

/**
 * An `id_token_hint` (OIDC Core §3.1.2.1, RP-Initiated Logout §2): an ID token this issuer signed,
 * by a key of its ring (the algorithm the key's, never the token's), expired or not, as both specs
 * allow for a hint. An access token (RFC 9068 `typ: at+jwt`) is no ID token. Null for anything else.
 */
export async function verifyIdTokenHint(env: Env, config: Config, token: string): Promise<IdTokenHint | null> {
  if (token.length > 8192) return null;
  try {
    const header = decodeProtectedHeader(token);
    if (header.typ?.toLowerCase().endsWith("at+jwt")) return null;
    const entry = header.kid ? (await keyRing(env, config)).verification.get(header.kid) : undefined;
    if (!entry) return null;
    const exp = decodeJwt(token).exp;
    const { payload } = await jwtVerify(token, entry.key, {
      algorithms: [entry.alg],
      issuer: config.ISSUER,
      // Judged as of just before its expiry: an expired hint still names its user (OIDC Core §3.1.2.1).
      currentDate: exp ? new Date((exp - 1) * 1000) : undefined,
    });
    const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
    if (typeof payload.sub !== "string" || aud.length === 0 || !aud.every((a) => typeof a === "string")) return null;
    const hint: IdTokenHint = { aud: aud as string[], sub: payload.sub };
    if (typeof payload.sid === "string") hint.sid = payload.sid;
    return hint;
  } catch {
    return null;
  }
}

const invalidToken = (description: string) =>
  new OAuthError("invalid_token", description, {
    wwwAuthenticate: `Bearer error="invalid_token", error_description="${description}"`,
  });

/**
 * Verifies a Keyway access token: signature by a published key (alg from the key, never from the
 * token: `none` and HS256-with-the-public-key are refused), `typ`, issuer, audience, expiry. Returns
 * null for anything that is not a valid token.
 */
export async function verifyAccessToken(env: Env, config: Config, token: string): Promise<AccessTokenClaims | null> {
  const verified = await verifyAnyAccessToken(env, config, token);
  return verified?.kind === "user" ? verified.claims : null;
}

/**
 * Verifies an access token of either kind: a user's (from a login: `sid`, `grant_id`, `auth_time`)
 * or a client's own (client_credentials: `sub` is the client_id, nothing of a login). Anything that
 * is neither, such as a token with a `sid` but no `grant_id`, is null. `audience` is "userinfo" where
 * the token is used at /userinfo; "any" for introspection and revocation, which answer for tokens of
 * every resource (RFC 8707: a resource server introspects its own tokens).
 */
export async function verifyAnyAccessToken(
  env: Env,
  config: Config,
  token: string,
  audience: "userinfo" | "any" = "userinfo",
): Promise<VerifiedAccessToken | null> {
  if (token.length > 4096 || token.split(".").length !== 3) return null;
  let kid: string | undefined;
  try {
    kid = decodeProtectedHeader(token).kid;
  } catch {
    return null;
  }
  const ring = await keyRing(env, config);
  const entry = kid ? ring.verification.get(kid) : undefined;
  if (!entry) return null;
  try {
    const { payload } = await jwtVerify(token, entry.key, {
      algorithms: [entry.alg],
      typ: "at+jwt",
      issuer: config.ISSUER,
      ...(audience === "userinfo" ? { audience: accessTokenAudience(config) } : {}),
      requiredClaims: ["sub", "jti", "exp", "iat", "client_id", "aud"],
    });
    if (typeof payload.scope !== "string") return null;
    const login = ["sid", "grant_id", "auth_time"].filter((k) => payload[k] !== undefined).length;
    if (login === 3) return { kind: "user", claims: payload as AccessTokenClaims };
    if (login === 0 && payload.sub === payload.client_id)
      return { kind: "client", claims: payload as ClientTokenClaims };
    return null;
  } catch {
    return null;
  }
}

/**
 * Whether any of a login's revocation marks is set: its session (`sid`), its grant, or one token's
 * jti. All live in the revocation shard the sid names. An unroutable sid counts as revoked.
 */
export async function isRevoked(
  env: Env,
  config: Config,
  m: { sid: string; grant_id?: string; jti?: string },
): Promise<boolean> {
  const parsed = parseId(config, "sid", m.sid);
  if (!parsed) return true;
  const keys = [`sid:${m.sid}`];
  if (m.grant_id) keys.push(`grant:${m.grant_id}`);
  if (m.jti) keys.push(`jti:${m.jti}`);
  return shard(env, "revocation", parsed.ref).anyRevoked(keys);
}

/** Whether a client token's jti was revoked, in the revocation shard the jti names. */
export async function isClientTokenRevoked(env: Env, config: Config, jti: string): Promise<boolean> {
  const parsed = parseId(config, "jti", jti);
  if (!parsed) return true;
  return shard(env, "revocation", parsed.ref).anyRevoked([`jti:${jti}`]);
}

/** Revokes one client token by its jti, in the shard the jti names. */
export async function revokeClientToken(env: Env, config: Config, jti: string): Promise<void> {
  const parsed = parseId(config, "jti", jti);
  if (!parsed) return;
  await shard(env, "revocation", parsed.ref).revoke([`jti:${jti}`], markHorizon(config, Date.now()));
}

/** Verified and not revoked; otherwise the RFC 6750 §3.1 `invalid_token` error. */
export async function requireLiveAccessToken(env: Env, config: Config, token: string): Promise<AccessTokenClaims> {
  const claims = await verifyAccessToken(env, config, token);
  if (!claims) throw invalidToken("the access token is invalid or expired");
  if (await isRevoked(env, config, claims)) throw invalidToken("the access token has been revoked");
  return claims;
}

/** How long a revocation mark must last: as long as any token it can affect. */
const markHorizon = (config: Config, from: number) =>
  from + Math.max(config.POLICY.access_token_ttl_seconds, config.POLICY.refresh_token_ttl_seconds) * 1000;

/**
 * Ends every login of a user that began at or before `at` (ms): a mark in every revocation shard of
 * every generation, since a login's sid may name any of them. An admin action, rare; the token
 * endpoint then refuses a code of such a login in the one call it makes to the sid's shard.
 */
export async function revokeUserEverywhere(env: Env, config: Config, userId: string, at: number): Promise<void> {
  const horizon = markHorizon(config, at);
  await Promise.all(
    allShards(config, "revocation").map((ref) => shard(env, "revocation", ref).revokeUser(userId, at, horizon)),
  );
}

/**
 * Users whose organization grants lost or changed something (issue 38 item 3): a mark in every
 * revocation shard, since their logins' sids may name any, so that a login verified before the change
 * redeems no code carrying what was taken away. Called after the new claims are pushed, with the time
 * then: a login that read them before it is refused, one that read the new claims is not. The mark
 * lasts as long as claims travel sealed (a login's transaction, then its code).
 */
export async function markClaimsChangedEverywhere(env: Env, config: Config, userIds: string[]): Promise<void> {
  if (userIds.length === 0) return;
  const at = Date.now();
  const horizon = at + (config.POLICY.login_tx_ttl_seconds + config.POLICY.code_ttl_seconds) * 1000;
  const unique = [...new Set(userIds)];
  await Promise.all(
    allShards(config, "revocation").map((ref) => shard(env, "revocation", ref).markClaimsChanged(unique, at, horizon)),
  );
}

/** Revokes a session's or grant's tokens in the revocation shard its sid names. */
export async function revokeInSidShard(env: Env, config: Config, sid: string, keys: string[]): Promise<void> {
  const parsed = parseId(config, "sid", sid);
  if (!parsed) return;
  await shard(env, "revocation", parsed.ref).revoke(keys, markHorizon(config, Date.now()));
}
