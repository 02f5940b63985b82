import { decodeJwt, type JWK, type JWTPayload } from "jose";
import { sha256, timingSafeEqualString } from "../../../durable-objects/contract/crypto";
import { type Branding, brandingSchema } from "../branding/branding";
import type { Config } from "../config/config";
import type { Env } from "../platform/env";
import { OAuthError } from "../platform/errors";
import { NO_STORE } from "../platform/http";
import { clientAddress, RATE_LIMIT_PERIOD_SECONDS, weighedLimit } from "../request/ip-quota";
import { ClientKeysUnavailable, verifyWithClientKeys } from "./client-keys";
import { spendOnceAtHome } from "./single-use";
import { type TokenClaimsTemplate, templateOf } from "./token-claims";

export type AuthMethod = "none" | "client_secret_basic" | "client_secret_post" | "private_key_jwt";

/** A client's registered public keys (private_key_jwt). */
export interface ClientJwks {
  keys: JWK[];
}

export interface Client {
  client_id: string;
  /** The tenant the client is registered in; it exists nowhere else (issue 23). */
  tenant: string;
  client_name: string;
  token_endpoint_auth_method: AuthMethod;
  secret_hash: string | null;
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  grant_types: string[];
  scope: string;
  id_token_signed_response_alg: "RS256" | "ES256";
  /**
   * OIDC Registration §2 / OIDC Core §5.3.2: userinfo answers it a JWT signed with the tenant's
   * current key of this algorithm (op-token's userinfo.ts); null: plain JSON.
   */
  userinfo_signed_response_alg: "RS256" | "ES256" | null;
  allowed_cors_origins: string[];
  jwks: ClientJwks | null;
  /**
   * OIDC Registration §2 / RFC 7591 §2: its keys by reference, fetched and cached per isolate
   * (client-keys.ts); the alternative to `jwks`, never both. Null: none.
   */
  jwks_uri: string | null;
  /** OIDC Registration §2 / RFC 9101 §10.4.1: the request_uri values it pre-registered (request-uri.ts). */
  request_uris: string[];
  /** RFC 8707: the resources (APIs) the client may ask tokens for; each becomes a token's `aud`. */
  resources: string[];
  /** Issue 26: what its login pages and mail show instead of the tenant's branding. */
  branding: Branding;
  /** Issue 24: what its tokens carry from organizations and entity grants; null for nothing. */
  token_claims: TokenClaimsTemplate | null;
  /** Issue 40: false only for a confidential client registered to sign in without PKCE (RFC 9700 §2.1.1). */
  require_pkce: boolean;
  /** OIDC Core §8: the `sub` it sees, the user's id or one of its sector (subjects.ts). */
  subject_type: "public" | "pairwise";
  /** OIDC Registration §5: a pairwise client's sector, when its redirect URIs span several hosts. */
  sector_identifier_uri: string | null;
  /**
   * Issue 40 (OIDC Registration §2): what its request objects must be signed with; null for RS256 or
   * ES256 with its jwks, "none" for unsigned ones (then only those).
   */
  request_object_signing_alg: RequestObjectAlg | null;
  /** Issue 40: registered through the admin API, or by itself at `<issuer>/register` (RFC 7591). */
  registered_via: "admin" | "dynamic";
  /** RFC 7592: the SHA-256 of its registration access token; null for an admin-registered client. */
  registration_access_token_hash: string | null;
  /** The RFC 7591 / OIDC Registration metadata kept only to be shown back (contacts, logo_uri, ...). */
  registration_metadata: Record<string, unknown> | null;
  /** The initial access token it registered with (its id); null for open registration or the admin API. */
  registration_token_id: string | null;
  /** RFC 9449 §5.2: its token requests must carry a DPoP proof, and its access tokens are always bound. */
  dpop_bound_access_tokens: boolean;
  /** RFC 9126 §6: its authorization requests must be pushed (PAR) first. */
  require_pushed_authorization_requests: boolean;
  created_at: number;
  updated_at: number;
}

export type RequestObjectAlg = "RS256" | "PS256" | "ES256" | "none";

interface ClientRow {
  client_id: string;
  tenant: string;
  client_name: string;
  token_endpoint_auth_method: AuthMethod;
  secret_hash: string | null;
  redirect_uris: string;
  post_logout_redirect_uris: string;
  grant_types: string;
  scope: string;
  id_token_signed_response_alg: "RS256" | "ES256";
  userinfo_signed_response_alg?: "RS256" | "ES256" | null;
  allowed_cors_origins: string;
  jwks: string | null;
  jwks_uri?: string | null;
  request_uris?: string;
  resources: string;
  branding?: string;
  token_claims?: string | null;
  require_pkce?: number;
  subject_type?: "public" | "pairwise";
  sector_identifier_uri?: string | null;
  request_object_signing_alg?: RequestObjectAlg | null;
  registered_via?: "admin" | "dynamic";
  registration_access_token_hash?: string | null;
  registration_metadata?: string | null;
  registration_token_id?: string | null;
  dpop_bound_access_tokens?: number;
  require_pushed_authorization_requests?: number;
  created_at: number;
  updated_at: number;
}

/** Validated when written; a value that no longer parses (a field removed since) shows the tenant's branding. */
function brandingOf(raw: string | undefined): Branding {
  const parsed = brandingSchema.safeParse(JSON.parse(raw ?? "{}"));
  return parsed.success ? parsed.data : {};
}

export function clientFromRow(row: ClientRow): Client {
  return {
    ...row,
    redirect_uris: JSON.parse(row.redirect_uris) as string[],
    post_logout_redirect_uris: JSON.parse(row.post_logout_redirect_uris) as string[],
    grant_types: JSON.parse(row.grant_types) as string[],
    allowed_cors_origins: JSON.parse(row.allowed_cors_origins) as string[],
    jwks: row.jwks ? (JSON.parse(row.jwks) as ClientJwks) : null,
    jwks_uri: row.jwks_uri ?? null,
    request_uris: JSON.parse(row.request_uris ?? "[]") as string[],
    resources: JSON.parse(row.resources ?? "[]") as string[],
    branding: brandingOf(row.branding),
    token_claims: templateOf(row.token_claims),
    require_pkce: row.require_pkce !== 0,
    subject_type: row.subject_type === "pairwise" ? "pairwise" : "public",
    sector_identifier_uri: row.sector_identifier_uri ?? null,
    request_object_signing_alg: row.request_object_signing_alg ?? null,
    userinfo_signed_response_alg: row.userinfo_signed_response_alg ?? null,
    registered_via: row.registered_via ?? "admin",
    registration_access_token_hash: row.registration_access_token_hash ?? null,
    registration_metadata: row.registration_metadata
      ? (JSON.parse(row.registration_metadata) as Record<string, unknown>)
      : null,
    registration_token_id: row.registration_token_id ?? null,
    dpop_bound_access_tokens: row.dpop_bound_access_tokens === 1,
    require_pushed_authorization_requests: row.require_pushed_authorization_requests === 1,
  };
}

/**
 * Clients are read from D1, and kept per isolate for `client_cache_seconds` (30 s by default; 0 turns
 * the cache off). op-mgmt forgets a changed client in its own isolate and in the op-auth and op-token
 * isolates its service bindings reach; other isolates' copies last until they expire.
 */
const cache = new Map<string, { client: Client | null; until: number }>();

export async function findClient(env: Env, config: Config, clientId: string): Promise<Client | null> {
  if (!clientId || clientId.length > 128) return null;
  const now = Date.now();
  // A client belongs to one tenant: asked for by another, it does not exist (issue 23).
  const key = `${config.TENANT}:${clientId}`;
  const hit = cache.get(key);
  if (hit && hit.until > now) return hit.client;
  const row = await env.DB.prepare("SELECT * FROM clients WHERE client_id = ? AND tenant = ?")
    .bind(clientId, config.TENANT)
    .first<ClientRow>();
  const client = row ? clientFromRow(row) : null;
  if (config.POLICY.client_cache_seconds > 0) {
    if (cache.size > 10_000) cache.clear();
    cache.set(key, { client, until: now + config.POLICY.client_cache_seconds * 1000 });
  }
  return client;
}

/** Forgets a client in every tenant's entry (client ids are unique across tenants). */
export function forgetClient(clientId: string): void {
  for (const key of cache.keys()) if (key.endsWith(`:${clientId}`)) cache.delete(key);
}

export async function hashClientSecret(secret: string): Promise<string> {
  // Client secrets are 256-bit random values, so a fast hash is enough; no password KDF is needed.
  return sha256(`client-secret:${secret}`);
}

const basicChallenge = 'Basic realm="keyway", charset="UTF-8"';

function invalidClient(description = "client authentication failed"): OAuthError {
  // RFC 6749 §5.2: 401, with the challenge of the scheme the token endpoint takes (Basic), for the
  // methods that send a secret.
  return new OAuthError("invalid_client", description, { status: 401, wwwAuthenticate: basicChallenge });
}

/**
 * A failed private_key_jwt authentication: 401 without a Basic challenge (RFC 6749 §5.2 asks for the
 * scheme the client used, and an assertion is no HTTP authentication scheme; issue 27 item 4).
 */
function invalidAssertion(description: string): OAuthError {
  return new OAuthError("invalid_client", description, { status: 401 });
}

/**
 * Authenticates the client of a token, revocation or introspection request (RFC 6749 §2.3).
 * Exactly one method may be used. A confidential client (registered `client_secret_basic` or
 * `client_secret_post`) proves its secret by either method, as RFC 6749 §2.3.1 offers both and
 * OIDC client libraries differ in their default; a public client (`none`) sends no secret.
 */
export async function authenticateClient(
  env: Env,
  config: Config,
  req: Request,
  form: Record<string, string>,
  /**
   * The endpoint authenticating: a tenant's `client_assertion_token_endpoint_audience` lets an
   * assertion name the token endpoint only there; at the PAR endpoint the issuer alone is taken
   * (RFC 9126 §2, FAPI 2.0 Security Profile §5.3.2.1).
   */
  at: "token" | "par" = "token",
): Promise<Client> {
  try {
    return await authenticate(env, config, req, form, at);
  } catch (err) {
    if (err instanceof OAuthError && err.code === "invalid_client") {
      const refused = await countAuthFailure(env, config, req, form);
      if (refused) throw refused;
    }
    throw err;
  }
}

/** The client id a request claims, for counting its failures (never trusted for anything else). */
function claimedClientId(req: Request, form: Record<string, string>): string {
  if (form.client_id) return form.client_id.slice(0, 128);
  const basic = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(req.headers.get("authorization")?.trim() ?? "");
  try {
    if (basic)
      return (
        atob(basic[1] as string)
          .split(":")[0]
          ?.slice(0, 128) ?? ""
      );
    if (form.client_assertion) return String(decodeJwt(form.client_assertion).sub ?? "").slice(0, 128);
  } catch {
    // Malformed: counted under no client id.
  }
  return "";
}

/**
 * Counts a failed authentication against the client id and the caller's address (op-token's Rate
 * Limiting binding, issue 27 item 11); past `client_auth_failures_per_minute`, the answer is 429 with
 * Retry-After instead of 401, so guessing a secret is bounded per source.
 */
async function countAuthFailure(
  env: Env,
  config: Config,
  req: Request,
  form: Record<string, string>,
): Promise<OAuthError | null> {
  const limiter = env.CLIENT_AUTH_FAILURE_LIMIT;
  if (!limiter) return null;
  const key = `client_auth:${config.TENANT}:${claimedClientId(req, form)}:${clientAddress(req, 64)}`;
  if (await weighedLimit(limiter, key, config.POLICY.client_auth_failures_per_minute)) return null;
  return new OAuthError("too_many_requests", "too many failed client authentications from this address", {
    retryAfter: RATE_LIMIT_PERIOD_SECONDS,
    headers: NO_STORE,
  });
}

/**
 * A failed secret or assertion re-reads its client from D1 (a rotated secret or key works at once);
 * at most this often per client and isolate, so failures cannot turn into D1 reads one for one.
 */
const REREAD_EVERY_MS = 5_000;
const rereadAt = new Map<string, number>();
function mayReread(config: Config, clientId: string): boolean {
  if (config.POLICY.client_cache_seconds === 0) return false;
  const key = `${config.TENANT}:${clientId}`;
  const now = Date.now();
  if (now - (rereadAt.get(key) ?? 0) < REREAD_EVERY_MS) return false;
  if (rereadAt.size > 10_000) rereadAt.clear();
  rereadAt.set(key, now);
  return true;
}

async function authenticate(
  env: Env,
  config: Config,
  req: Request,
  form: Record<string, string>,
  at: "token" | "par",
): Promise<Client> {
  const header = req.headers.get("authorization");
  if (form.client_assertion_type !== undefined || form.client_assertion !== undefined) {
    if (header !== null || form.client_secret !== undefined)
      throw new OAuthError("invalid_request", "use one client authentication method");
    return authenticateByAssertion(env, config, form, at);
  }
  let clientId: string | undefined;
  let secret: string | undefined;
  let method: AuthMethod;
  if (header !== null) {
    const m = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(header.trim());
    if (!m) throw invalidClient("malformed Authorization header");
    let decoded: string;
    try {
      decoded = atob(m[1] as string);
    } catch {
      throw invalidClient("malformed Authorization header");
    }
    const colon = decoded.indexOf(":");
    if (colon < 0) throw invalidClient("malformed Authorization header");
    try {
      // RFC 6749 §2.3.1: id and secret are form-urlencoded before Base64.
      clientId = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, " "));
      secret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, " "));
    } catch {
      throw invalidClient("malformed Authorization header");
    }
    if (form.client_secret !== undefined)
      throw new OAuthError("invalid_request", "use one client authentication method");
    if (form.client_id !== undefined && form.client_id !== clientId) throw invalidClient();
    method = "client_secret_basic";
  } else if (form.client_secret !== undefined) {
    clientId = form.client_id;
    secret = form.client_secret;
    method = "client_secret_post";
  } else {
    clientId = form.client_id;
    method = "none";
  }
  if (!clientId) throw invalidClient("client_id is required");
  let client = await findClient(env, config, clientId);
  if (!client) throw invalidClient();
  if (method !== "none") {
    const presented = await hashClientSecret(secret ?? "");
    const proves = (c: Client) => c.secret_hash !== null && timingSafeEqualString(presented, c.secret_hash);
    // A cached registration may predate a new secret: a secret that does not match is checked
    // against D1 once more, so a rotated secret works at once in every isolate.
    if (!proves(client) && mayReread(config, clientId)) {
      forgetClient(clientId);
      client = await findClient(env, config, clientId);
      if (!client) throw invalidClient();
    }
    if (!proves(client)) throw invalidClient();
  }
  if ((client.token_endpoint_auth_method === "none") !== (method === "none")) throw invalidClient();
  // A client that registered a key proves itself with it, never with a secret it does not have.
  if (client.token_endpoint_auth_method === "private_key_jwt") throw invalidClient();
  return client;
}

const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/**
 * The assertion's claims if it verifies against the client's keys: RS256, PS256 or ES256, `iss` = `sub` =
 * client_id, `exp` and `jti` present, and `aud` exactly the issuer identifier, a single value
 * (RFC 10070: an audience naming an endpoint, or several audiences, lets another authorization
 * server the client trusts replay the assertion here). Where the tenant's policy has
 * `client_assertion_token_endpoint_audience`, its own token endpoint URL is also taken, as the single
 * value (OIDC Core §9's advice). Null otherwise.
 */
async function verifyAssertion(
  config: Config,
  client: Client,
  assertion: string,
  at: "token" | "par",
): Promise<{ payload: JWTPayload } | { problem: string }> {
  if (client.token_endpoint_auth_method !== "private_key_jwt" || (!client.jwks && !client.jwks_uri))
    return { problem: "the client does not authenticate with private_key_jwt" };
  // The audiences taken, each only as the assertion's one value.
  const tokenEndpoint = `${config.ISSUER}/token`;
  const tokenAudience = at === "token" && config.POLICY.client_assertion_token_endpoint_audience;
  const audiences = tokenAudience ? [config.ISSUER, tokenEndpoint] : [config.ISSUER];
  const audOnly = tokenAudience
    ? `its aud must be the issuer identifier ${config.ISSUER} or the token endpoint ${tokenEndpoint}, alone`
    : `its aud must be the issuer identifier ${config.ISSUER} alone`;
  try {
    // Its registered jwks, or the set at its jwks_uri (client-keys.ts: cached, refetched for a new kid).
    const { payload } = await verifyWithClientKeys(config, client, assertion, {
      // PS256 too: FAPI 2.0 clients sign their assertions with PS256 or ES256.
      algorithms: ["RS256", "PS256", "ES256"],
      issuer: client.client_id,
      subject: client.client_id,
      audience: audiences,
      requiredClaims: ["exp", "jti"],
    });
    const aud = payload.aud;
    const single = typeof aud === "string" ? aud : Array.isArray(aud) && aud.length === 1 ? aud[0] : undefined;
    return single !== undefined && audiences.includes(single)
      ? { payload }
      : { problem: `client_assertion is refused: ${audOnly}` };
  } catch (err) {
    // A jwks_uri that could not be fetched (RFC 6749 §5.2: still invalid_client, never a 500).
    if (err instanceof ClientKeysUnavailable) return { problem: `client_assertion is refused: ${err.message}` };
    // Which check failed, so a client that got one wrong can tell (issue 27 item 4); never a key detail.
    const code = (err as { code?: string }).code;
    const claim = (err as { claim?: string }).claim;
    if (code === "ERR_JWT_EXPIRED") return { problem: "client_assertion has expired" };
    if (code === "ERR_JWT_CLAIM_VALIDATION_FAILED" && claim === "aud")
      return { problem: `client_assertion is refused: ${audOnly}` };
    if (code === "ERR_JWT_CLAIM_VALIDATION_FAILED" && (claim === "iss" || claim === "sub"))
      return { problem: "client_assertion is refused: its iss and sub must be the client_id" };
    if (code === "ERR_JWT_CLAIM_VALIDATION_FAILED")
      return { problem: `client_assertion is refused: ${claim ?? "a claim"} is missing or invalid` };
    return { problem: "client_assertion is refused: its signature does not verify with the client's registered keys" };
  }
}
/**
 * How far ahead an assertion may expire: it is remembered (single use) until then. An hour, as Okta
 * allows: Authlib's private_key_jwt signs its assertions for an hour (RFC 7523 §3 leaves the bound
 * to the server), and a jti kept an hour is one expiry-bucket row either way.
 */
const MAX_ASSERTION_SECONDS = 3600;

/**
 * private_key_jwt (RFC 7523 §2.2, OIDC Core §9): a JWT the client signed with a key it registered,
 * `iss` = `sub` = client_id, `aud` the issuer identifier alone, a `jti`, and an `exp` at most five
 * minutes ahead. Each assertion is used once: its jti is recorded in a revocation shard until it
 * expires, and a second use is `invalid_client`.
 */
async function authenticateByAssertion(
  env: Env,
  config: Config,
  form: Record<string, string>,
  at: "token" | "par",
): Promise<Client> {
  if (form.client_assertion_type !== JWT_BEARER)
    throw new OAuthError("invalid_request", `client_assertion_type must be ${JWT_BEARER}`);
  const assertion = form.client_assertion;
  if (!assertion || assertion.length > 8192) throw new OAuthError("invalid_request", "client_assertion is required");
  let claimed: string | undefined;
  try {
    claimed = decodeJwt(assertion).sub;
  } catch {
    throw invalidAssertion("client_assertion is not a JWT");
  }
  const clientId = form.client_id ?? claimed;
  if (!clientId || (claimed !== undefined && claimed !== clientId))
    throw invalidAssertion("client_assertion's sub must be the client_id");
  const unknown = { problem: "client authentication failed" };
  let client = await findClient(env, config, clientId);
  let verified = client ? await verifyAssertion(config, client, assertion, at) : unknown;
  // A cached registration may predate a key rotation: a failure is checked against D1 once more, so a
  // new key works at once in every isolate.
  if ("problem" in verified && mayReread(config, clientId)) {
    forgetClient(clientId);
    client = await findClient(env, config, clientId);
    verified = client ? await verifyAssertion(config, client, assertion, at) : unknown;
  }
  if (!client || "problem" in verified)
    throw invalidAssertion("problem" in verified ? verified.problem : unknown.problem);
  const { payload } = verified;
  const now = Math.floor(Date.now() / 1000);
  const exp = payload.exp as number;
  if (exp > now + MAX_ASSERTION_SECONDS)
    throw invalidAssertion(`client_assertion is refused: its exp may be at most ${MAX_ASSERTION_SECONDS} s ahead`);
  // Used once (single-use.ts): the key is the client and its jti, as before.
  const fresh = await spendOnceAtHome(
    env,
    config,
    "assertion",
    `${clientId}\n${payload.jti}`,
    exp * 1000 + 1000,
    MAX_ASSERTION_SECONDS,
  );
  if (!fresh) throw invalidAssertion("client_assertion was used before");
  return client;
}

/** RFC 8252 §7.3: for loopback IP redirect URIs any port is allowed; everything else matches exactly. */
export function redirectUriAllowed(client: Client, uri: string): boolean {
  if (client.redirect_uris.includes(uri)) return true;
  const presented = loopbackParts(uri);
  if (!presented) return false;
  return client.redirect_uris.some((registered) => {
    const r = loopbackParts(registered);
    return r !== null && r.rest === presented.rest && r.host === presented.host;
  });
}

function loopbackParts(uri: string): { host: string; rest: string } | null {
  const m = /^http:\/\/(127\.0\.0\.1|\[::1\])(?::(\d{1,5}))?(\/[^#]*)?$/.exec(uri);
  // A port past 65535 is no URL at all (URL parsing would throw later): not a loopback redirect.
  if (!m || Number(m[2] ?? 0) > 65_535) return null;
  return { host: m[1] as string, rest: m[3] ?? "" };
}
