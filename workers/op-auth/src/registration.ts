import type { Context } from "hono";
import { z } from "zod";
import { randomToken, timingSafeEqualString } from "../../../durable-objects/contract/crypto";
import { askPeers } from "../../shared/app/isolate";
import { audit } from "../../shared/events/audit";
import {
  authProof,
  createSchema,
  insertClient,
  PROOF_FIXED,
  registrationProblems,
  updateClient,
} from "../../shared/oauth/client-registration";
import { type Client, clientFromRow, forgetClient, hashClientSecret } from "../../shared/oauth/clients";
import { fetchClientDocument, OutboundFetchError } from "../../shared/oauth/outbound-fetch";
import {
  hashInitialAccessToken,
  hashRegistrationAccessToken,
  INITIAL_TOKEN_PREFIX,
  REGISTRATION_TOKEN_PREFIX,
} from "../../shared/oauth/registration-tokens";
import { OAuthError } from "../../shared/platform/errors";
import { json, NO_STORE, parseJsonObject, readBodyText } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";

/**
 * Dynamic Client Registration (issue 40, CONTRACT §9): RFC 7591 and OpenID Connect Dynamic Client
 * Registration 1.0 at `<issuer>/register`, and RFC 7592's client configuration endpoint at
 * `<issuer>/register/<client_id>`. Served by op-auth, which already serves every issuer path of every
 * tenant (at `/t/<tenant>` and on custom hosts) that is not op-token's; the metadata is validated and
 * written by op-mgmt's client code (createSchema, registrationProblems, insertClient, updateClient),
 * so a client registered here is held to exactly the rules of one the admin API registers, and is an
 * ordinary client afterwards, marked `registered_via: "dynamic"`.
 *
 * Open registration is off by default: a registration needs an initial access token a tenant admin
 * minted (op-mgmt's registration-tokens.ts), unless the tenant's policy has `open_registration`.
 */

/** The fields of RFC 7591 / OIDC Registration that become the client's registration (createSchema's). */
const REGISTERED = [
  "client_name",
  "redirect_uris",
  "post_logout_redirect_uris",
  "token_endpoint_auth_method",
  "grant_types",
  "scope",
  "id_token_signed_response_alg",
  // OIDC Core §5.3.2: userinfo as a JWT signed with RS256 or ES256 (op-token's userinfo.ts).
  "userinfo_signed_response_alg",
  "jwks",
  // OIDC Registration §2 / RFC 7591 §2: the keys by reference (client-keys.ts), and the request_uri
  // values /authorize may fetch request objects from (request-uri.ts).
  "jwks_uri",
  "request_uris",
  // Keyway's own: CORS for a browser client's token requests, and PKCE for a confidential client.
  "allowed_cors_origins",
  "require_pkce",
  // OIDC Registration §2: pairwise subjects (OIDC Core §8.1) and request objects (§6.1).
  "subject_type",
  "sector_identifier_uri",
  "request_object_signing_alg",
  // RFC 9449 §5.2 (DPoP-bound access tokens) and RFC 9126 §6 (pushed authorization requests only).
  "dpop_bound_access_tokens",
  "require_pushed_authorization_requests",
] as const;

const uri = z
  .string()
  .max(2000)
  .refine((v) => {
    try {
      return ["https:", "http:"].includes(new URL(v).protocol);
    } catch {
      return false;
    }
  }, "must be an absolute http(s) URL");

/**
 * Metadata kept only to be shown back (RFC 7591 §2, OIDC Registration §2): stored as given, checked
 * for shape. `sector_identifier_uri` is also fetched and checked against the redirect URIs.
 */
const kept = z
  .object({
    contacts: z.array(z.string().min(1).max(254)).max(10),
    logo_uri: uri,
    client_uri: uri,
    policy_uri: uri,
    tos_uri: uri,
    sector_identifier_uri: z.string().max(2000),
    application_type: z.enum(["web", "native"]),
    software_id: z.string().min(1).max(200),
    software_version: z.string().min(1).max(200),
    // Keyway always puts auth_time in the ID token, so a client that asks for it has it.
    require_auth_time: z.boolean(),
    // The algorithms a private_key_jwt assertion is verified with.
    token_endpoint_auth_signing_alg: z.enum(["RS256", "PS256", "ES256"]),
  })
  .partial();
const KEPT = Object.keys(kept.shape);

/**
 * Metadata Keyway cannot honour, whose absence the client would read wrong (an encrypted ID token or
 * userinfo it would fail to parse, request objects it would send in vain): refused rather
 * than dropped. Any other field Keyway does not know is ignored and left out of the answer (RFC 7591 §2).
 */
const UNSUPPORTED: Record<string, string> = {
  id_token_encrypted_response_alg: "encrypted ID tokens are not supported",
  id_token_encrypted_response_enc: "encrypted ID tokens are not supported",
  userinfo_encrypted_response_alg: "encrypted userinfo is not supported",
  userinfo_encrypted_response_enc: "encrypted userinfo is not supported",
  request_object_encryption_alg: "encrypted request objects are not supported",
  request_object_encryption_enc: "encrypted request objects are not supported",
};

/** Keyway's admin-only client fields: what a client may not grant itself. */
const ADMIN_ONLY = ["resources", "token_claims", "branding"];

const OIDC_SCOPES = new Set(["openid", "email", "profile", "offline_access"]);

const metadataError = (description: string) => new OAuthError("invalid_client_metadata", description);

function invalidToken(description: string): OAuthError {
  return new OAuthError("invalid_token", description, {
    wwwAuthenticate: `Bearer error="invalid_token", error_description="${description.replace(/["\\]/g, "")}"`,
  });
}

function bearer(c: Context<AppEnv>): string | null {
  const header = c.req.header("authorization");
  if (header === undefined) return null;
  const m = /^Bearer ([\x21-\x7E]{1,200})$/i.exec(header.trim());
  if (!m) throw invalidToken("the Authorization header must be Bearer <token>");
  return m[1] as string;
}

async function readMetadata(c: Context<AppEnv>): Promise<Record<string, unknown>> {
  const type = (c.req.header("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "application/json") throw metadataError("the body must be application/json client metadata");
  let raw: Record<string, unknown>;
  try {
    raw = parseJsonObject(await readBodyText(c.req.raw));
  } catch (err) {
    // Too large or too slow stays what it is (413, 408); a body that is not a JSON object is metadata refused.
    if (err instanceof OAuthError && err.code !== "invalid_request") throw err;
    throw metadataError(err instanceof Error ? err.message : "the body is not JSON client metadata");
  }
  // RFC 7592 §2.2: an omitted field is null; a null is an omitted field.
  return Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== null));
}

interface Registration {
  input: z.output<typeof createSchema>;
  metadata: Record<string, unknown>;
}

/**
 * The client a registration (or an RFC 7592 replacement) describes, validated as the admin API
 * validates a client (createSchema: the redirect URI rules, registrationProblems), with RFC 7591's
 * defaults. `apiScopes`: whether the registrant may ask for scopes beyond OpenID Connect's (a
 * client_credentials client's API scopes), which only an admin-minted initial access token allows.
 */
async function validate(c: Context<AppEnv>, raw: Record<string, unknown>, apiScopes: boolean): Promise<Registration> {
  for (const [field, why] of Object.entries(UNSUPPORTED)) if (field in raw) throw metadataError(why);
  for (const field of ADMIN_ONLY)
    if (field in raw) throw metadataError(`${field} is set by a tenant admin (the admin API), not by registration`);

  const candidate: Record<string, unknown> = Object.fromEntries(
    REGISTERED.filter((f) => raw[f] !== undefined).map((f) => [f, raw[f]]),
  );
  // RFC 7591 §2's defaults: client_secret_basic, the authorization code grant.
  candidate.token_endpoint_auth_method ??= "client_secret_basic";
  candidate.grant_types ??= ["authorization_code"];
  candidate.client_name ??= defaultName(raw.redirect_uris);
  // The tenant's registration_require_pkce (true by default): false lets a confidential client that
  // does not say otherwise sign in without PKCE, as OIDC Core's code flow and RFC 9700 §2.1.1 allow
  // (the OpenID Foundation's dynamic plan sends none). A public client always uses PKCE.
  if (
    candidate.require_pkce === undefined &&
    candidate.token_endpoint_auth_method !== "none" &&
    !c.get("config").POLICY.registration_require_pkce
  )
    candidate.require_pkce = false;
  const parsed = createSchema.safeParse(candidate);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => ({
      redirect: i.path[0] === "redirect_uris" || /^redirect_uris\b/.test(i.message),
      text: i.path.length ? `${i.path.join(".")}: ${i.message}` : i.message,
    }));
    const redirect = problems.filter((p) => p.redirect);
    if (redirect.length) throw new OAuthError("invalid_redirect_uri", redirect.map((p) => p.text).join("; "));
    throw metadataError(problems.map((p) => p.text).join("; "));
  }
  const input = parsed.data;

  // RFC 7591 §2.1: response_types and grant_types agree; "code" is the only response type.
  const code = input.grant_types.includes("authorization_code");
  if (raw.response_types !== undefined) {
    const types = raw.response_types;
    if (!Array.isArray(types) || !types.every((t) => t === "code"))
      throw metadataError('response_types: only "code" is supported');
    if (types.length > 0 !== code)
      throw metadataError('response_types ["code"] goes with the authorization_code grant, and only with it');
  }
  const api = input.scope.split(" ").filter((s) => s && !OIDC_SCOPES.has(s));
  if (api.length && !apiScopes)
    throw metadataError(`scope ${api.join(" ")}: API scopes need an initial access token from a tenant admin`);

  const extra = kept.safeParse(Object.fromEntries(KEPT.filter((f) => raw[f] !== undefined).map((f) => [f, raw[f]])));
  if (!extra.success)
    throw metadataError(extra.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "));
  const metadata: Record<string, unknown> = { ...extra.data };
  if (typeof metadata.sector_identifier_uri === "string")
    await checkSectorIdentifier(c, metadata.sector_identifier_uri, input.redirect_uris);
  return { input, metadata };
}

/** RFC 7591 makes client_name optional; Keyway shows one on its pages: the redirect URI's host. */
function defaultName(redirectUris: unknown): string {
  const first = Array.isArray(redirectUris) ? redirectUris[0] : undefined;
  try {
    const host = typeof first === "string" ? new URL(first).hostname : "";
    if (host && /^[\x21-\x7E]{1,200}$/.test(host)) return host;
  } catch {}
  return "Unnamed client";
}

/**
 * OIDC Registration §5 (and Core §8.1): the sector identifier document is a JSON array of URIs that
 * must hold every redirect URI. Fetched once by outbound-fetch.ts's rules (the webhook sender's
 * address rules, no redirect followed, 5 s, 64 KB at most).
 */
async function checkSectorIdentifier(c: Context<AppEnv>, url: string, redirectUris: string[]): Promise<void> {
  const production = c.get("config").ENVIRONMENT === "production";
  let text: string;
  try {
    text = await fetchClientDocument(url, production, "application/json");
  } catch (err) {
    if (err instanceof OutboundFetchError) throw metadataError(`sector_identifier_uri: ${err.message}`);
    throw err;
  }
  let listed: unknown;
  try {
    listed = JSON.parse(text);
  } catch {
    throw metadataError("sector_identifier_uri: the document is not JSON");
  }
  if (!Array.isArray(listed) || !listed.every((u) => typeof u === "string"))
    throw metadataError("sector_identifier_uri: the document must be a JSON array of URIs");
  const missing = redirectUris.filter((u) => !listed.includes(u));
  if (missing.length)
    throw metadataError(`sector_identifier_uri: the document does not list the redirect URIs ${missing.join(" ")}`);
}

interface InitialToken {
  id: string;
  multi_use: number;
  uses: number;
  expires_at: number | null;
  revoked_at: number | null;
}

/**
 * Who may register: the holder of a live initial access token of this tenant, or anyone where the
 * tenant's policy opened registration. A token presented is checked even then. Null: open registration.
 */
async function initialAccessToken(c: Context<AppEnv>): Promise<InitialToken | null> {
  const config = c.get("config");
  const token = bearer(c);
  if (token === null) {
    if (config.POLICY.open_registration) return null;
    throw new OAuthError("invalid_token", "an initial access token is required to register a client", {
      wwwAuthenticate: 'Bearer realm="registration"',
    });
  }
  const row = token.startsWith(INITIAL_TOKEN_PREFIX)
    ? await c.env.DB.prepare(
        "SELECT id, multi_use, uses, expires_at, revoked_at FROM registration_tokens WHERE token_hash = ? AND tenant = ?",
      )
        .bind(await hashInitialAccessToken(token), config.TENANT)
        .first<InitialToken>()
    : null;
  if (!row || row.revoked_at !== null || (row.expires_at !== null && row.expires_at <= Date.now()))
    throw invalidToken("the initial access token is not valid here");
  if (!row.multi_use && row.uses > 0) throw invalidToken("the initial access token was used");
  return row;
}

/**
 * Spends a use of the token, atomically: of two registrations racing on a single-use token, one
 * wins. Done after the metadata is accepted, so a refused registration does not spend it.
 */
async function spend(c: Context<AppEnv>, token: InitialToken): Promise<void> {
  const now = Date.now();
  const { meta } = await c.env.DB.prepare(
    `UPDATE registration_tokens SET uses = uses + 1, last_used_at = ?
     WHERE id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) AND (multi_use = 1 OR uses = 0)`,
  )
    .bind(now, token.id, now)
    .run();
  if (!meta.changes) throw invalidToken("the initial access token was used");
}

/** RFC 7591 §3.2.1 / RFC 7592 §3: the client's registration as the client sees it. */
function registrationResponse(
  c: Context<AppEnv>,
  client: Client,
  shown: { client_secret?: string; registration_access_token?: string } = {},
): Record<string, unknown> {
  return {
    client_id: client.client_id,
    ...(shown.client_secret ? { client_secret: shown.client_secret } : {}),
    client_id_issued_at: Math.floor(client.created_at / 1000),
    // A secret does not expire (RFC 7591 §3.2.1: 0).
    ...(client.secret_hash ? { client_secret_expires_at: 0 } : {}),
    ...(shown.registration_access_token ? { registration_access_token: shown.registration_access_token } : {}),
    registration_client_uri: `${c.get("config").ISSUER}/register/${client.client_id}`,
    client_name: client.client_name,
    redirect_uris: client.redirect_uris,
    post_logout_redirect_uris: client.post_logout_redirect_uris,
    token_endpoint_auth_method: client.token_endpoint_auth_method,
    grant_types: client.grant_types,
    response_types: client.grant_types.includes("authorization_code") ? ["code"] : [],
    scope: client.scope,
    id_token_signed_response_alg: client.id_token_signed_response_alg,
    ...(client.userinfo_signed_response_alg
      ? { userinfo_signed_response_alg: client.userinfo_signed_response_alg }
      : {}),
    subject_type: client.subject_type,
    ...(client.request_object_signing_alg ? { request_object_signing_alg: client.request_object_signing_alg } : {}),
    require_pkce: client.require_pkce,
    dpop_bound_access_tokens: client.dpop_bound_access_tokens,
    require_pushed_authorization_requests: client.require_pushed_authorization_requests,
    ...(client.jwks ? { jwks: client.jwks } : {}),
    ...(client.jwks_uri ? { jwks_uri: client.jwks_uri } : {}),
    ...(client.request_uris.length ? { request_uris: client.request_uris } : {}),
    ...(client.allowed_cors_origins.length ? { allowed_cors_origins: client.allowed_cors_origins } : {}),
    ...client.registration_metadata,
  };
}

async function readClient(c: Context<AppEnv>, clientId: string): Promise<Client | null> {
  const row = await c.env.DB.prepare("SELECT * FROM clients WHERE client_id = ? AND tenant = ?")
    .bind(clientId, c.get("config").TENANT)
    .first();
  return row ? clientFromRow(row as never) : null;
}

/** `POST <issuer>/register` (RFC 7591 §3.1): 201 with the client, its secret and its registration access token. */
export async function register(c: Context<AppEnv>): Promise<Response> {
  const token = await initialAccessToken(c);
  const raw = await readMetadata(c);
  const { input, metadata } = await validate(c, raw, token !== null);
  if (token) await spend(c, token);
  const registrationToken = `${REGISTRATION_TOKEN_PREFIX}${randomToken(32)}`;
  const { clientId, secret } = await insertClient(c.env.DB, c.get("config").TENANT, input, {
    registration_access_token_hash: await hashRegistrationAccessToken(registrationToken),
    registration_metadata: metadata,
    registration_token_id: token?.id ?? null,
  });
  audit(c, {
    kind: "client_registration",
    client: clientId,
    detail: { action: "created", registration_token: token?.id ?? null },
  });
  const client = await readClient(c, clientId);
  if (!client) throw new OAuthError("temporarily_unavailable", "the client was not stored, retry", { retryAfter: 1 });
  return json(
    registrationResponse(c, client, {
      ...(secret ? { client_secret: secret } : {}),
      registration_access_token: registrationToken,
    }),
    201,
    NO_STORE,
  );
}

/**
 * RFC 7592 §2: the client the registration access token is for. Wrong token, no token, an unknown
 * client or one the admin API registered (it has no such token): 401 invalid_token alike, so the
 * endpoint tells nothing of which clients exist.
 */
async function configuredClient(c: Context<AppEnv>): Promise<Client> {
  const token = bearer(c);
  if (token === null)
    throw new OAuthError("invalid_token", "the registration access token is required", {
      wwwAuthenticate: 'Bearer realm="registration"',
    });
  const client = token.startsWith(REGISTRATION_TOKEN_PREFIX)
    ? await readClient(c, c.req.param("client_id") ?? "")
    : null;
  const presented = await hashRegistrationAccessToken(token);
  if (
    !client?.registration_access_token_hash ||
    !timingSafeEqualString(presented, client.registration_access_token_hash)
  )
    throw invalidToken("the registration access token is not valid for this client");
  return client;
}

/** A changed or deleted client: forgotten here and in the op-token isolate op-auth's binding reaches. */
async function forgetEverywhere(c: Context<AppEnv>, clientId: string): Promise<void> {
  forgetClient(clientId);
  await askPeers(c.env, c.get("config").ADMIN_TOKEN, "POST", `/__keyway/forget-client/${encodeURIComponent(clientId)}`);
}

/** `GET <issuer>/register/<client_id>` (RFC 7592 §2.1). The secret is stored hashed, so it is not shown again. */
export async function readRegistration(c: Context<AppEnv>): Promise<Response> {
  return json(registrationResponse(c, await configuredClient(c)), 200, NO_STORE);
}

/** The fields of a replacement that are the server's, not the client's (RFC 7592 §2.2); ignored. */
const SERVER_FIELDS = [
  "client_secret",
  "client_id_issued_at",
  "client_secret_expires_at",
  "registration_access_token",
  "registration_client_uri",
];

/**
 * `PUT <issuer>/register/<client_id>` (RFC 7592 §2.2): the registration replaced as a whole, by the
 * same validation as a registration; an omitted field takes its default. `client_id` must be the
 * client's, a `client_secret` sent must be its secret; the authentication method keeps its kind
 * (none, a secret, a key). The secret and the registration access token stay as they are.
 */
export async function replaceRegistration(c: Context<AppEnv>): Promise<Response> {
  const current = await configuredClient(c);
  const raw = await readMetadata(c);
  if (raw.client_id !== current.client_id)
    throw metadataError("client_id must be included and must be the client's (RFC 7592 §2.2)");
  if (raw.client_secret !== undefined) {
    const presented = typeof raw.client_secret === "string" ? await hashClientSecret(raw.client_secret) : "";
    if (!current.secret_hash || !timingSafeEqualString(presented, current.secret_hash))
      throw metadataError("client_secret, when included, must be the client's current secret");
  }
  const rest = Object.fromEntries(Object.entries(raw).filter(([k]) => k !== "client_id" && !SERVER_FIELDS.includes(k)));
  const { input, metadata } = await validate(c, rest, current.registration_token_id !== null);
  if (authProof(input.token_endpoint_auth_method) !== authProof(current.token_endpoint_auth_method))
    throw metadataError(PROOF_FIXED);
  const next: Client = {
    ...current,
    client_name: input.client_name,
    redirect_uris: input.redirect_uris,
    post_logout_redirect_uris: input.post_logout_redirect_uris,
    token_endpoint_auth_method: input.token_endpoint_auth_method,
    grant_types: [...new Set(input.grant_types)],
    scope: [...new Set(input.scope.split(" "))].join(" "),
    id_token_signed_response_alg: input.id_token_signed_response_alg,
    userinfo_signed_response_alg: input.userinfo_signed_response_alg,
    allowed_cors_origins: input.allowed_cors_origins,
    jwks: input.jwks ?? null,
    jwks_uri: input.jwks_uri,
    request_uris: input.request_uris,
    require_pkce: input.require_pkce,
    // OIDC Registration §2: a replacement may change the subject type (and so the client's `sub`s),
    // its sector and its request object algorithm like any other field.
    subject_type: input.subject_type,
    sector_identifier_uri: input.sector_identifier_uri,
    request_object_signing_alg: input.request_object_signing_alg,
    dpop_bound_access_tokens: input.dpop_bound_access_tokens,
    require_pushed_authorization_requests: input.require_pushed_authorization_requests,
    registration_metadata: metadata,
    updated_at: Date.now(),
  };
  // createSchema checked the replacement; the whole client is checked once more as the admin PATCH does.
  const problems = registrationProblems(next);
  if (problems.length) throw metadataError(problems.join("; "));
  await updateClient(c.env.DB, next);
  await forgetEverywhere(c, current.client_id);
  audit(c, { kind: "client_registration", client: current.client_id, detail: { action: "updated" } });
  const stored = await readClient(c, current.client_id);
  return json(registrationResponse(c, stored ?? next), 200, NO_STORE);
}

/** `DELETE <issuer>/register/<client_id>` (RFC 7592 §2.3): 204; the client and its token are gone. */
export async function deleteRegistration(c: Context<AppEnv>): Promise<Response> {
  const client = await configuredClient(c);
  await c.env.DB.prepare("DELETE FROM clients WHERE client_id = ? AND tenant = ?")
    .bind(client.client_id, client.tenant)
    .run();
  await forgetEverywhere(c, client.client_id);
  audit(c, { kind: "client_registration", client: client.client_id, detail: { action: "deleted" } });
  return new Response(null, { status: 204, headers: NO_STORE });
}
