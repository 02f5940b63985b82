import type { AuthRequest } from "../../../durable-objects/contract/verbs";
import { parseClaimsRequest } from "../../shared/oauth/claims-request";
import type { Client } from "../../shared/oauth/clients";
import { redirectUriAllowed } from "../../shared/oauth/clients";
import { requestedResources } from "../../shared/oauth/resources";
import { OAuthError, type OAuthErrorCode } from "../../shared/platform/errors";
import type { ResponseMode } from "./authorization-response";
import { invalidRequestPage } from "./errors";

export const SUPPORTED_SCOPES = ["openid", "email", "profile", "offline_access"] as const;
/** Discovery's `response_modes_supported`: the query (the default for `code`) and form_post. */
export const RESPONSE_MODES = ["query", "form_post"] as const;

/** RFC 7636 §4.2: an S256 challenge is BASE64URL(SHA-256(verifier)) without padding, 43 characters. */
const CODE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
const JWK_THUMBPRINT = /^[A-Za-z0-9_-]{43}$/;
const ORGANIZATION_ID = /^ent_[A-Za-z0-9_~-]{20,160}$/;
const PROMPTS = new Set(["none", "login", "consent", "select_account"]);

export interface ValidatedRequest extends AuthRequest {
  prompts: Set<string>;
  /** OIDC Core §3.1.2.1: pre-fills the login page's email; only an address is used, never sealed into tx. */
  login_hint?: string;
  /** OIDC Core §3.1.2.1: the languages of the pages, by preference; sealed into tx as the one chosen. */
  ui_locales?: string;
  /** OIDC Core §3.1.2.1: an ID token Keyway issued, naming the user the client expects. */
  id_token_hint?: string;
}

/**
 * Validates an authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3, OIDC Core §3.1.2.1) in the
 * order the RFCs require: client and redirect URI first, shown on Keyway's own page so nothing is
 * ever redirected to an unvalidated URI (RFC 6749 §4.1.2.1), then everything else as an error
 * redirected to the client. Unknown parameters are ignored.
 */
export function validateAuthorizeRequest(
  params: Record<string, string>,
  lookupClient: Client | null,
): ValidatedRequest {
  const untrusted = (message: string) => invalidRequestPage(message);
  if (!params.client_id) throw untrusted("client_id is missing");
  const client = lookupClient;
  if (!client) throw untrusted("the client is not registered");
  const redirectUri = params.redirect_uri;
  if (!redirectUri) throw untrusted("redirect_uri is missing");
  if (!redirectUriAllowed(client, redirectUri)) throw untrusted("redirect_uri is not registered for this client");

  const state = params.state;
  // Known first, so every error after this goes back the way the response would (a mode Keyway does
  // not support answers in the query, the default for `code`).
  const mode: ResponseMode = params.response_mode === "form_post" ? "form_post" : "query";
  const fail = (code: OAuthErrorCode, description: string): never => {
    throw new OAuthError(code, description, { redirect: { uri: redirectUri, state, mode } });
  };

  // A request object, by value or by reference, is opened and merged before (request-object.ts,
  // request-uri.ts).
  if (params.request !== undefined) fail("invalid_request_object", "the request object was not processed");
  if (params.request_uri !== undefined) fail("invalid_request_uri", "the request_uri was not processed");
  if (!params.response_type) fail("invalid_request", "response_type is required");
  if (params.response_type !== "code") fail("unsupported_response_type", "only response_type=code is supported");
  if (params.response_mode !== undefined && !(RESPONSE_MODES as readonly string[]).includes(params.response_mode))
    fail("invalid_request", `response_mode must be one of ${RESPONSE_MODES.join(", ")}`);
  if (!client.grant_types.includes("authorization_code"))
    fail("unauthorized_client", "the client may not use the authorization code grant");

  // RFC 7636 and RFC 9700 §2.1.1: PKCE for every client unless a confidential one was registered
  // without it (issue 40); sent anyway, it is checked, and then the token request must prove it.
  if (params.code_challenge || client.require_pkce) {
    if (!params.code_challenge) fail("invalid_request", "code_challenge is required (PKCE, S256)");
    if (params.code_challenge_method !== "S256") fail("invalid_request", "code_challenge_method must be S256");
    if (!CODE_CHALLENGE.test(params.code_challenge as string)) fail("invalid_request", "code_challenge is malformed");
  } else if (params.code_challenge_method !== undefined)
    fail("invalid_request", "code_challenge_method without code_challenge");

  const requested = (params.scope ?? "").split(" ").filter(Boolean);
  if (!requested.includes("openid")) fail("invalid_scope", "scope must include openid");
  const allowed = new Set(client.scope.split(" "));
  const scopes = requested.filter((s) => (SUPPORTED_SCOPES as readonly string[]).includes(s) && allowed.has(s));
  if (!scopes.includes("openid")) fail("invalid_scope", "the client may not request openid");
  // OIDC Core §11: offline_access is ignored unless the client can use refresh tokens.
  const scope = [...new Set(scopes)]
    .filter((s) => s !== "offline_access" || client.grant_types.includes("refresh_token"))
    .join(" ");

  const prompts = new Set((params.prompt ?? "").split(" ").filter(Boolean));
  for (const p of prompts) if (!PROMPTS.has(p)) fail("invalid_request", `prompt=${p} is not supported`);
  if (prompts.has("none") && prompts.size > 1) fail("invalid_request", "prompt=none cannot be combined");

  let maxAge: number | undefined;
  if (params.max_age !== undefined) {
    if (!/^\d{1,9}$/.test(params.max_age)) fail("invalid_request", "max_age must be a non-negative integer");
    maxAge = Number(params.max_age);
  }
  if (params.nonce !== undefined && params.nonce.length > 512) fail("invalid_request", "nonce is too long");
  // Issue 24: an organization's id (an entity id); whether the user belongs to it is decided at sign-in.
  if (params.organization !== undefined && !ORGANIZATION_ID.test(params.organization))
    fail("invalid_request", "organization is not an organization id");
  if (state !== undefined && state.length > 8192) fail("invalid_request", "state is too long");
  // RFC 8707 §2.1: the resources the tokens will be for; an unregistered one is invalid_target.
  const resource = requestedResources(params.resource, client.resources, { uri: redirectUri, state });
  const requestedClaims = parseClaimsRequest(params.claims, (d) => fail("invalid_request", d));
  // RFC 9449 §10: the thumbprint (RFC 7638, SHA-256, base64url) of the key the code will be bound to.
  if (params.dpop_jkt !== undefined && !JWK_THUMBPRINT.test(params.dpop_jkt))
    fail("invalid_request", "dpop_jkt is not a JWK SHA-256 thumbprint");

  const req: ValidatedRequest = {
    client_id: client.client_id,
    redirect_uri: redirectUri,
    scope,
    // "" when the client signs in without PKCE: its code then takes no code_verifier.
    code_challenge: params.code_challenge ?? "",
    prompts,
  };
  if (state !== undefined) req.state = state;
  if (mode === "form_post") req.response_mode = mode;
  if (params.nonce !== undefined) req.nonce = params.nonce;
  if (maxAge !== undefined) req.max_age = maxAge;
  if (params.prompt !== undefined) req.prompt = params.prompt;
  if (resource) req.resource = resource;
  if (params.organization !== undefined) req.organization = params.organization;
  if (requestedClaims) req.requested_claims = requestedClaims;
  if (params.dpop_jkt !== undefined) req.dpop_jkt = params.dpop_jkt;
  // A hint that is not an email address (an opaque subject id, say) is ignored, not an error.
  const hint = params.login_hint?.trim();
  if (hint && hint.length <= 254 && /^[^\s@]+@[^\s@]+$/.test(hint)) req.login_hint = hint;
  // OIDC Core §3.1.2.1: verified against Keyway's keys in authorize.ts (an async step); never sealed.
  if (params.id_token_hint !== undefined) req.id_token_hint = params.id_token_hint;
  if (params.ui_locales !== undefined && params.ui_locales.length <= 200) req.ui_locales = params.ui_locales;
  return req;
}
