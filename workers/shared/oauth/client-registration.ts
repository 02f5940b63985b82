import { z } from "zod";
import { randomToken } from "../../../durable-objects/contract/crypto";
import { brandingSchema } from "../branding/branding";
import { displayName } from "../branding/display-name";
import { type Client, hashClientSecret } from "./clients";
import { DEVICE_GRANT } from "./device";
import { isResourceIndicator, MAX_RESOURCES } from "./resources";
import { sectorOf } from "./subjects";
import { tokenClaimsSchema } from "./token-claims";

/**
 * What a client registration must be, and writing it to D1: the admin API's (op-mgmt's clients.ts)
 * and a client's own (RFC 7591 and RFC 7592 at op-auth's /register) are held to the same rules and
 * written by the same statements, so a dynamically registered client is an ordinary client afterwards.
 */

const FORBIDDEN_SCHEMES = new Set(["javascript:", "data:", "file:", "vbscript:", "blob:", "about:"]);

/**
 * A redirect URI a client may register (RFC 6749 §3.1.2, RFC 8252 §7, RFC 9700 §4.1): absolute, no
 * fragment, no wildcard; https, or http only on a loopback IP, or a private-use scheme of reverse-DNS form.
 */
export function redirectUriProblem(value: string): string | null {
  if (value.includes("*")) return "wildcards are not allowed";
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "must be an absolute URI";
  }
  if (url.hash || value.includes("#")) return "must not contain a fragment";
  if (FORBIDDEN_SCHEMES.has(url.protocol)) return `the ${url.protocol} scheme is not allowed`;
  if (url.protocol === "https:") return url.hostname ? null : "must name a host";
  if (url.protocol === "http:")
    return ["127.0.0.1", "[::1]", "localhost"].includes(url.hostname) ? null : "http is allowed only for loopback";
  if (/^[a-z][a-z0-9+.-]*\.[a-z0-9+.-]+:$/.test(url.protocol)) return null;
  return "must be https, loopback http, or a private-use scheme like com.example.app:";
}

export const redirectUri = z
  .string()
  .max(2000)
  .superRefine((v, ctx) => {
    const problem = redirectUriProblem(v);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });

export const corsOrigin = z
  .string()
  .max(300)
  .superRefine((v, ctx) => {
    let url: URL | null = null;
    try {
      url = new URL(v);
    } catch {}
    if (!url || url.origin !== v || !/^https?:$/.test(url.protocol))
      ctx.addIssue({ code: "custom", message: "must be an origin like https://app.example.com" });
  });

const SCOPES = ["openid", "email", "profile", "offline_access"] as const;
/** RFC 6749 §3.3 scope-token: an API scope a machine client may be given (client_credentials). */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]{1,100}$/;

/** A public signing key a private_key_jwt client registers (RFC 7517); private members are refused. */
const publicJwk = z
  .looseObject({
    kty: z.enum(["RSA", "EC"]),
    kid: z.string().min(1).max(200).optional(),
    alg: z.enum(["RS256", "PS256", "ES256"]).optional(),
    use: z.literal("sig").optional(),
  })
  .refine((k) => !["d", "p", "q", "dp", "dq", "qi", "k"].some((m) => m in k), "a registered key must be public")
  .refine(
    (k) =>
      k.kty === "RSA"
        ? typeof k.n === "string" && typeof k.e === "string"
        : k.crv === "P-256" && typeof k.x === "string" && typeof k.y === "string",
    "an RSA key needs n and e; an EC key is P-256 with x and y",
  );

const clientFields = {
  client_name: displayName(200),
  redirect_uris: z.array(redirectUri).max(50),
  post_logout_redirect_uris: z.array(redirectUri).max(50),
  token_endpoint_auth_method: z.enum(["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]),
  grant_types: z.array(z.enum(["authorization_code", "refresh_token", "client_credentials", DEVICE_GRANT])).min(1),
  scope: z
    .string()
    .max(2000)
    .refine((s) => s.split(" ").every((p) => SCOPE_TOKEN.test(p)), "scope must be space-separated scope tokens"),
  id_token_signed_response_alg: z.enum(["RS256", "ES256"]),
  /**
   * OIDC Registration §2: userinfo as a JWT signed with this algorithm (OIDC Core §5.3.2), one the
   * tenant's key ring signs with (keys.ts); null: plain JSON.
   */
  userinfo_signed_response_alg: z.enum(["RS256", "ES256"]).nullable(),
  allowed_cors_origins: z.array(corsOrigin).max(50),
  /** private_key_jwt: the keys the client's assertions are signed with (RFC 7523, OIDC Core §9). */
  jwks: z.object({ keys: z.array(publicJwk).min(1).max(10) }).strict(),
  /** RFC 8707: the APIs the client may ask tokens for (`resource`); each is an absolute URI without a fragment. */
  resources: z
    .array(z.string().refine(isResourceIndicator, "a resource must be an absolute URI without a fragment"))
    .max(MAX_RESOURCES),
  /** Issue 26: what the client's login pages and mail show instead of the tenant's branding. */
  branding: brandingSchema,
  /** Issue 24: what its tokens carry from organizations and entity grants (docs/organizations.md). */
  token_claims: tokenClaimsSchema.nullable(),
  /**
   * Issue 40: PKCE is required unless a confidential client is registered without it (RFC 9700
   * §2.1.1; OIDC Core's code flow, where the nonce binds the code to the login instead).
   */
  require_pkce: z.boolean(),
  /** OIDC Core §8: `pairwise` gives the client a `sub` of its sector's own (subjects.ts). */
  subject_type: z.enum(["public", "pairwise"]),
  /** OIDC Registration §5: the sector of a pairwise client whose redirect URIs span several hosts. */
  sector_identifier_uri: z
    .string()
    .max(2000)
    .refine(
      (u) => fetchableUrl(u, false),
      "sector_identifier_uri must be an https URL (http only on loopback) without credentials or a fragment",
    )
    .nullable(),
  /**
   * OIDC Registration §2 / RFC 7591 §2: the client's keys by reference, the alternative to `jwks`
   * (never both), fetched when an assertion or a request object is verified (client-keys.ts).
   */
  jwks_uri: z
    .string()
    .max(2000)
    .refine(
      (u) => fetchableUrl(u, false),
      "jwks_uri must be an https URL (http only on loopback) without credentials or a fragment",
    )
    .nullable(),
  /**
   * OIDC Registration §2 / RFC 9101 §10.4.1: the request_uri values /authorize may fetch a request
   * object from for this client, and no others. A fragment (the content's hash, OIDC Registration
   * §2) is allowed and ignored when a request_uri is matched.
   */
  request_uris: z
    .array(
      z
        .string()
        .max(2000)
        .refine(
          (u) => fetchableUrl(u, true),
          "each request_uri must be an https URL (http only on loopback) without credentials",
        ),
    )
    .max(20),
  /**
   * Issue 40 (OIDC Registration §2): the algorithm its request objects must use; RS256 or ES256 need
   * its `jwks`, `none` allows unsigned request objects (and only those). Null: RS256 or ES256.
   */
  request_object_signing_alg: z.enum(["RS256", "PS256", "ES256", "none"]).nullable(),
  /** RFC 9449 §5.2: token requests must carry a DPoP proof; its access tokens are always DPoP-bound. */
  dpop_bound_access_tokens: z.boolean(),
  /** RFC 9126 §6: authorization requests must be pushed (PAR) first. */
  require_pushed_authorization_requests: z.boolean(),
};

/**
 * A URL Keyway may fetch a client's document from: https, or http to a loopback host (the fetch
 * itself refuses that in production: outbound-fetch.ts), without credentials; a fragment only where
 * `fragment` allows it.
 */
function fetchableUrl(value: string, fragment: boolean): boolean {
  try {
    const url = new URL(value);
    const loopback = ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname);
    return (
      (url.protocol === "https:" || (url.protocol === "http:" && loopback)) &&
      !url.username &&
      !url.password &&
      (fragment || !url.hash)
    );
  } catch {
    return false;
  }
}

type ClientShape = {
  redirect_uris: string[];
  token_endpoint_auth_method: string;
  grant_types: string[];
  scope: string;
  jwks?: unknown;
  jwks_uri?: string | null;
  require_pkce?: boolean;
  subject_type?: "public" | "pairwise";
  sector_identifier_uri?: string | null;
  request_object_signing_alg?: string | null;
};

/**
 * What a registration must be as a whole, on create and after a PATCH. A login client (the
 * authorization_code grant) needs a redirect URI and `openid`, and asks only for the OIDC scopes; a
 * machine client (client_credentials, RFC 6749 §4.4) must be confidential and may hold API scopes.
 */
export function registrationProblems(c: ClientShape): string[] {
  const problems: string[] = [];
  const scopes = c.scope.split(" ");
  const login = c.grant_types.includes("authorization_code");
  // A device (RFC 8628) signs a person in too, with no redirect URI of its own.
  const device = c.grant_types.includes(DEVICE_GRANT);
  if (c.grant_types.includes("client_credentials") && c.token_endpoint_auth_method === "none")
    problems.push("client_credentials needs a confidential client (a secret), not token_endpoint_auth_method none");
  const byValue = c.jwks !== undefined && c.jwks !== null;
  const byReference = typeof c.jwks_uri === "string";
  // RFC 7591 §2: jwks and jwks_uri MUST NOT both be present.
  if (byValue && byReference) problems.push("jwks and jwks_uri cannot both be registered (RFC 7591 §2)");
  const keys = byValue || byReference;
  if ((c.token_endpoint_auth_method === "private_key_jwt") !== keys)
    problems.push("jwks or jwks_uri goes with token_endpoint_auth_method private_key_jwt, and only with it");
  if (
    c.subject_type === "pairwise" &&
    !c.sector_identifier_uri &&
    sectorOf({ ...c, sector_identifier_uri: null }) === null
  )
    problems.push(
      "a pairwise client whose redirect_uris span several hosts needs a sector_identifier_uri (OIDC Registration §5)",
    );
  const roAlg = c.request_object_signing_alg;
  if (roAlg && roAlg !== "none" && !keys)
    problems.push(
      `request_object_signing_alg ${roAlg} needs the client's jwks or jwks_uri (token_endpoint_auth_method private_key_jwt)`,
    );
  if (c.require_pkce === false && c.token_endpoint_auth_method === "none")
    problems.push("a public client (token_endpoint_auth_method none) always uses PKCE: require_pkce cannot be false");
  if (c.grant_types.includes("refresh_token") && !login && !device)
    problems.push("refresh_token comes only with authorization_code or the device code grant");
  if (device && !scopes.includes("openid")) problems.push("scope must include openid for the device code grant");
  if (login && c.redirect_uris.length === 0) problems.push("redirect_uris: at least one for authorization_code");
  if (login && !scopes.includes("openid")) problems.push("scope must include openid for authorization_code");
  const api = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (api.length && !c.grant_types.includes("client_credentials"))
    problems.push(`unsupported scope ${api.join(" ")} (API scopes are for client_credentials clients)`);
  return problems;
}

const checked = <T extends ClientShape>(value: T, ctx: z.RefinementCtx) => {
  for (const message of registrationProblems(value)) ctx.addIssue({ code: "custom", message });
};

export const createSchema = z
  .object({
    ...clientFields,
    redirect_uris: clientFields.redirect_uris.default([]),
    post_logout_redirect_uris: clientFields.post_logout_redirect_uris.default([]),
    grant_types: clientFields.grant_types.default(["authorization_code", "refresh_token"]),
    scope: clientFields.scope.optional(),
    id_token_signed_response_alg: clientFields.id_token_signed_response_alg.default("RS256"),
    userinfo_signed_response_alg: clientFields.userinfo_signed_response_alg.default(null),
    allowed_cors_origins: clientFields.allowed_cors_origins.default([]),
    jwks: clientFields.jwks.optional(),
    jwks_uri: clientFields.jwks_uri.default(null),
    request_uris: clientFields.request_uris.default([]),
    resources: clientFields.resources.default([]),
    branding: clientFields.branding.default({}),
    token_claims: clientFields.token_claims.default(null),
    require_pkce: clientFields.require_pkce.default(true),
    subject_type: clientFields.subject_type.default("public"),
    sector_identifier_uri: clientFields.sector_identifier_uri.default(null),
    request_object_signing_alg: clientFields.request_object_signing_alg.default(null),
    dpop_bound_access_tokens: clientFields.dpop_bound_access_tokens.default(false),
    require_pushed_authorization_requests: clientFields.require_pushed_authorization_requests.default(false),
  })
  .strict()
  // A login client's default scope is every OIDC scope; a machine client names its own.
  .transform((v) => ({
    ...v,
    scope:
      v.scope ??
      (v.grant_types.includes("authorization_code") || v.grant_types.includes(DEVICE_GRANT) ? SCOPES.join(" ") : ""),
  }))
  .superRefine(checked);

// `jwks: null` removes the keys by value, to register them by reference (`jwks_uri`) instead.
export const patchSchema = z
  .object({ ...clientFields, jwks: clientFields.jwks.nullable() })
  .partial()
  .strict();

/** What a dynamically registered client (RFC 7591, op-auth's /register) has besides its metadata. */
export interface DynamicRegistration {
  registration_access_token_hash: string;
  registration_metadata: Record<string, unknown>;
  registration_token_id: string | null;
}

/** A client secret: shown once (at registration and at each rotation), stored as its hash. */
export const newClientSecret = () => `kws_${randomToken(32)}`;

/**
 * Writes a new client, validated by `createSchema`: the admin API's registration, and op-auth's
 * dynamic one (`dynamic`), one INSERT. Returns its id and, for the methods that prove one, its
 * secret (only the hash is stored).
 */
export async function insertClient(
  db: D1Database,
  tenant: string,
  input: z.output<typeof createSchema>,
  dynamic?: DynamicRegistration,
): Promise<{ clientId: string; secret: string | undefined; now: number }> {
  const now = Date.now();
  const clientId = `kwc_${randomToken(16)}`;
  // A secret only for the methods that prove one; a private_key_jwt client proves its key instead.
  const secret = ["none", "private_key_jwt"].includes(input.token_endpoint_auth_method) ? undefined : newClientSecret();
  await db
    .prepare(
      `INSERT INTO clients (client_id, tenant, client_name, token_endpoint_auth_method, secret_hash, redirect_uris,
      post_logout_redirect_uris, grant_types, scope, id_token_signed_response_alg, allowed_cors_origins, jwks, resources,
      branding, token_claims, require_pkce, subject_type, sector_identifier_uri, request_object_signing_alg,
      registered_via, registration_access_token_hash, registration_metadata, registration_token_id, created_at, updated_at,
      jwks_uri, request_uris, userinfo_signed_response_alg, dpop_bound_access_tokens, require_pushed_authorization_requests)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    .bind(
      clientId,
      tenant,
      input.client_name,
      input.token_endpoint_auth_method,
      secret ? await hashClientSecret(secret) : null,
      JSON.stringify(input.redirect_uris),
      JSON.stringify(input.post_logout_redirect_uris),
      JSON.stringify([...new Set(input.grant_types)]),
      [...new Set(input.scope.split(" "))].join(" "),
      input.id_token_signed_response_alg,
      JSON.stringify(input.allowed_cors_origins),
      input.jwks ? JSON.stringify(input.jwks) : null,
      JSON.stringify([...new Set(input.resources)]),
      JSON.stringify(input.branding),
      input.token_claims ? JSON.stringify(input.token_claims) : null,
      input.require_pkce ? 1 : 0,
      input.subject_type,
      input.sector_identifier_uri,
      input.request_object_signing_alg,
      dynamic ? "dynamic" : "admin",
      dynamic?.registration_access_token_hash ?? null,
      dynamic ? JSON.stringify(dynamic.registration_metadata) : null,
      dynamic?.registration_token_id ?? null,
      now,
      now,
      input.jwks_uri,
      JSON.stringify([...new Set(input.request_uris)]),
      input.userinfo_signed_response_alg,
      input.dpop_bound_access_tokens ? 1 : 0,
      input.require_pushed_authorization_requests ? 1 : 0,
    )
    .run();
  return { clientId, secret, now };
}

/**
 * What a client proves itself with (nothing, a secret, a key) is fixed at registration: switching
 * would leave it without the credential the new method needs (the admin PATCH, RFC 7592's PUT).
 */
export const authProof = (m: string) => (m === "none" ? "nothing" : m === "private_key_jwt" ? "key" : "secret");
export const PROOF_FIXED = "a client cannot switch between public, secret and key authentication; register a new one";

/**
 * Writes a client's registration as a whole (the admin API's PATCH, RFC 7592's PUT), one UPDATE;
 * the caller has checked it (`registrationProblems`) and keeps its authentication method's proof.
 */
export async function updateClient(db: D1Database, next: Client): Promise<void> {
  await db
    .prepare(
      `UPDATE clients SET client_name = ?, token_endpoint_auth_method = ?, redirect_uris = ?, post_logout_redirect_uris = ?,
      grant_types = ?, scope = ?, id_token_signed_response_alg = ?, allowed_cors_origins = ?, jwks = ?, resources = ?,
      branding = ?, token_claims = ?, require_pkce = ?, subject_type = ?, sector_identifier_uri = ?,
      request_object_signing_alg = ?, registration_metadata = ?, updated_at = ?, jwks_uri = ?, request_uris = ?,
      userinfo_signed_response_alg = ?, dpop_bound_access_tokens = ?, require_pushed_authorization_requests = ?
     WHERE client_id = ? AND tenant = ?`,
    )
    .bind(
      next.client_name,
      next.token_endpoint_auth_method,
      JSON.stringify(next.redirect_uris),
      JSON.stringify(next.post_logout_redirect_uris),
      JSON.stringify(next.grant_types),
      next.scope,
      next.id_token_signed_response_alg,
      JSON.stringify(next.allowed_cors_origins),
      next.jwks ? JSON.stringify(next.jwks) : null,
      JSON.stringify([...new Set(next.resources)]),
      JSON.stringify(next.branding),
      next.token_claims ? JSON.stringify(next.token_claims) : null,
      next.require_pkce ? 1 : 0,
      next.subject_type,
      next.sector_identifier_uri,
      next.request_object_signing_alg,
      next.registration_metadata ? JSON.stringify(next.registration_metadata) : null,
      next.updated_at,
      next.jwks_uri,
      JSON.stringify([...new Set(next.request_uris)]),
      next.userinfo_signed_response_alg,
      next.dpop_bound_access_tokens ? 1 : 0,
      next.require_pushed_authorization_requests ? 1 : 0,
      next.client_id,
      next.tenant,
    )
    .run();
}
