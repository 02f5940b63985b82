import type { Context } from "hono";
import { SUPPORTED_LOCALES } from "../../shared/branding/i18n/index";
import { DEVICE_GRANT } from "../../shared/oauth/device";
import { DPOP_ALGS } from "../../shared/oauth/dpop";
import type { AppEnv } from "../../shared/request/context";
import { RESPONSE_MODES, SUPPORTED_SCOPES } from "./authorize-request";
import { REQUEST_OBJECT_ALGS } from "./request-object";

/** OpenID Connect Discovery 1.0 §3. Every value here is true of the running server. */
export function discovery(c: Context<AppEnv>): Response {
  const config = c.get("config");
  const issuer = config.ISSUER;
  const doc = {
    issuer,
    authorization_endpoint: `${issuer}/authorize`,
    token_endpoint: `${issuer}/token`,
    userinfo_endpoint: `${issuer}/userinfo`,
    jwks_uri: `${issuer}/jwks.json`,
    revocation_endpoint: `${issuer}/revoke`,
    introspection_endpoint: `${issuer}/introspect`,
    end_session_endpoint: `${issuer}/logout`,
    // RFC 7591 / OIDC Registration (registration.ts): an initial access token unless the tenant opened it.
    registration_endpoint: `${issuer}/register`,
    response_types_supported: ["code"],
    response_modes_supported: [...RESPONSE_MODES],
    grant_types_supported: ["authorization_code", "refresh_token", "client_credentials", DEVICE_GRANT],
    device_authorization_endpoint: `${issuer}/device_authorization`,
    // OIDC Core §8: a client registers `subject_type` (subjects.ts).
    subject_types_supported: ["public", "pairwise"],
    id_token_signing_alg_values_supported: ["RS256", "ES256"],
    // OIDC Core §5.3.2: userinfo is a JWT for a client that registered userinfo_signed_response_alg
    // (op-token's userinfo.ts); plain JSON for the others.
    userinfo_signing_alg_values_supported: ["RS256", "ES256"],
    code_challenge_methods_supported: ["S256"],
    token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post", "private_key_jwt", "none"],
    revocation_endpoint_auth_methods_supported: [
      "client_secret_basic",
      "client_secret_post",
      "private_key_jwt",
      "none",
    ],
    introspection_endpoint_auth_methods_supported: [
      "client_secret_basic",
      "client_secret_post",
      "private_key_jwt",
      "none",
    ],
    // RFC 8414 §2: the algorithms a private_key_jwt assertion may be signed with (clients.ts).
    token_endpoint_auth_signing_alg_values_supported: ["RS256", "PS256", "ES256"],
    revocation_endpoint_auth_signing_alg_values_supported: ["RS256", "PS256", "ES256"],
    introspection_endpoint_auth_signing_alg_values_supported: ["RS256", "PS256", "ES256"],
    // RFC 9449 §5.1: DPoP proofs at the token endpoint and userinfo (dpop.ts).
    dpop_signing_alg_values_supported: [...DPOP_ALGS],
    scopes_supported: [...SUPPORTED_SCOPES],
    claims_supported: [
      "iss",
      "sub",
      "aud",
      "exp",
      "iat",
      "auth_time",
      "nonce",
      "amr",
      "sid",
      "email",
      "email_verified",
      "name",
    ],
    // `consent` is accepted and has nothing to ask (no consent step), so it is not advertised.
    prompt_values_supported: ["none", "login", "select_account"],
    authorization_response_iss_parameter_supported: true,
    // RFC 8707 defines no metadata name; RFC 8414 §2 allows more. `resource` is taken at /authorize and
    // /token (client credentials, code, refresh) for the resources registered for the client.
    resource_indicators_supported: true,
    // OIDC Discovery §3: the languages of the pages (issue 26), chosen by `ui_locales`.
    ui_locales_supported: SUPPORTED_LOCALES,
    // OIDC Core §5.5: email, email_verified and name may be asked for by name (claims-request.ts).
    claims_parameter_supported: true,
    // OIDC Core §6.1 / RFC 9101 (request-object.ts): signed with the client's registered keys, or
    // unsigned (`none`) from a client registered with request_object_signing_alg "none".
    request_parameter_supported: true,
    request_object_signing_alg_values_supported: [...REQUEST_OBJECT_ALGS],
    // OIDC Core §6.2 / RFC 9101 §5.2 (request-uri.ts): fetched only from a request_uri the client
    // registered (request_uris), RFC 9101 §10.4.1.
    request_uri_parameter_supported: true,
    require_request_uri_registration: true,
    // RFC 9126 (par.ts): a request_uri good once, for pushed_request_ttl_seconds.
    pushed_authorization_request_endpoint: `${issuer}/par`,
    require_pushed_authorization_requests: config.POLICY.require_pushed_authorization_requests,
    frontchannel_logout_supported: false,
    backchannel_logout_supported: false,
  };
  return new Response(JSON.stringify(doc), {
    headers: {
      "Content-Type": "application/json; charset=utf-8",
      "Access-Control-Allow-Origin": "*",
      "Cache-Control": "public, max-age=300",
    },
  });
}
