import { decodeProtectedHeader, type JWTPayload, UnsecuredJWT } from "jose";
import type { Config } from "../../shared/config/config";
import { ClientKeysUnavailable, verifyWithClientKeys } from "../../shared/oauth/client-keys";
import { type Client, redirectUriAllowed } from "../../shared/oauth/clients";
import { OAuthError, type OAuthErrorCode } from "../../shared/platform/errors";
import { invalidRequestPage } from "./errors";

/** Discovery's `request_object_signing_alg_values_supported`: `none` only for a client registered with it. */
export const REQUEST_OBJECT_ALGS = ["RS256", "PS256", "ES256", "none"] as const;

/** A request object's size limit: far above any real one, far below what a URL can carry through the edge. */
const MAX_REQUEST_OBJECT = 16_384;

/** JWT claims that are not authorization request parameters (RFC 9101 §4), never copied into the request. */
const JWT_CLAIMS = new Set(["iss", "aud", "exp", "nbf", "iat", "jti", "sub"]);

/**
 * The authorization request a `request` parameter (OIDC Core §6.1, RFC 9101) makes: the query's
 * parameters, each superseded by the request object's own (OIDC Core §6.3.3), once the object is
 * proven to be the client's. Returns the parameters unchanged without a `request`, or before the
 * client is known (validateAuthorizeRequest refuses that on Keyway's page).
 *
 * - Signed (RS256 or ES256), it must verify with a key of the client's registered `jwks` or of the
 *   set at its `jwks_uri` (client-keys.ts) and carry `iss` = client_id and `aud` = the issuer
 *   identifier (RFC 9101 §4 and §10.2: without them, a JWT the client signed for something else
 *   could pass for a request).
 * - Unsigned (`alg: none`) only from a client registered with `request_object_signing_alg: "none"`,
 *   or, `byReference` (fetched from a request_uri the client registered: request-uri.ts), from one
 *   that registered no algorithm; its `iss` and `aud`, when present, are checked the same way. A
 *   client registered with RS256 or ES256 must use that algorithm.
 * - `exp` and `nbf`, when present, must hold now. Its `client_id` and `response_type`, when present,
 *   must be the query's (OIDC Core §6.1), which must carry both and a `scope` with `openid`.
 *
 * A failure is `invalid_request_object`, redirected to the client (the query's redirect URI and
 * state until the object is proven, the object's after) when that URI is registered, else the page.
 */
export async function withRequestObject(
  config: Config,
  params: Record<string, string>,
  client: Client | null,
  /**
   * How the object came: by value in the query, by reference (a registered request_uri), or in a
   * pushed authorization request's body (RFC 9126 §3), where RFC 9101 §5 holds and not OIDC Core
   * §6.1: the object's parameters alone, no query beside it.
   */
  how: "value" | "reference" | "pushed" = "value",
): Promise<Record<string, string>> {
  const byReference = how === "reference";
  const jwt = params.request;
  if (jwt === undefined || !client || params.client_id !== client.client_id) return params;

  let target = params;
  const fail = (code: OAuthErrorCode, description: string): never => {
    const uri = target.redirect_uri;
    if (!uri || !redirectUriAllowed(client, uri)) throw invalidRequestPage(description);
    const mode = target.response_mode === "form_post" ? "form_post" : "query";
    throw new OAuthError(code, description, { redirect: { uri, state: target.state, mode } });
  };

  if (params.request_uri !== undefined) fail("invalid_request", "request and request_uri cannot both be sent");
  // OIDC Core §6.1: the query is an OAuth 2.0 request of its own, whatever the object says.
  if (how !== "pushed" && !params.response_type)
    fail("invalid_request", "response_type is required in the query with a request object");
  if (how !== "pushed" && !(params.scope ?? "").split(" ").includes("openid"))
    fail("invalid_scope", "scope with openid is required in the query with a request object");
  if (jwt.length > MAX_REQUEST_OBJECT) fail("invalid_request_object", "the request object is too large");

  const claims = await verifiedClaims(config, client, jwt, byReference, (d) => fail("invalid_request_object", d));
  const fromObject: Record<string, string> = {};
  for (const [name, value] of Object.entries(claims)) {
    if (JWT_CLAIMS.has(name)) continue;
    const param = asParameter(name, value);
    if (param === null) fail("invalid_request_object", `the request object's ${name} is not a valid parameter value`);
    fromObject[name] = param as string;
  }
  if (fromObject.request !== undefined || fromObject.request_uri !== undefined)
    fail("invalid_request_object", "a request object cannot contain request or request_uri");
  if (fromObject.client_id !== undefined && fromObject.client_id !== params.client_id)
    fail("invalid_request_object", "the request object is for another client");
  if (how !== "pushed" && fromObject.response_type !== undefined && fromObject.response_type !== params.response_type)
    fail("invalid_request_object", "the request object's response_type differs from the query's");

  const { request: _, ...query } = params;
  target = how === "pushed" ? { client_id: params.client_id as string, ...fromObject } : { ...query, ...fromObject };
  return target;
}

/** The object's claims, if it is the client's by the rules above; `problem` is called otherwise. */
async function verifiedClaims(
  config: Config,
  client: Client,
  jwt: string,
  byReference: boolean,
  problem: (description: string) => never,
): Promise<JWTPayload> {
  if (jwt.split(".").length === 5) return problem("encrypted request objects are not supported");
  let alg: string | undefined;
  try {
    alg = decodeProtectedHeader(jwt).alg;
  } catch {
    return problem("the request object is not a JWT");
  }
  const registered = client.request_object_signing_alg;
  if (alg === "none") {
    // By reference, from a request_uri the client registered, its source is the client's own server
    // (RFC 9101 §10.2 (c): the request_uri's TLS server identity), as OIDC Registration §2's default
    // (any algorithm) allows; by value, only from a client registered for unsigned objects.
    if (registered !== "none" && !(byReference && registered === null))
      return problem(
        byReference
          ? `the client registered request_object_signing_alg ${registered}: an unsigned request object is refused`
          : 'unsigned request objects are refused unless the client registered request_object_signing_alg "none"',
      );
    let payload: JWTPayload;
    try {
      ({ payload } = UnsecuredJWT.decode(jwt));
    } catch (err) {
      return problem(claimProblem(err) ?? "the request object is not a valid unsigned JWT");
    }
    if (payload.iss !== undefined && payload.iss !== client.client_id)
      return problem("the request object's iss must be the client_id");
    const aud = payload.aud;
    if (aud !== undefined && !(Array.isArray(aud) ? aud : [aud]).includes(config.ISSUER))
      return problem(`the request object's aud must be the issuer identifier ${config.ISSUER}`);
    return payload;
  }
  if (registered === "none") return problem('the client registered unsigned request objects (alg "none") only');
  const algorithms = registered ? [registered] : ["RS256", "PS256", "ES256"];
  if (!alg || !algorithms.includes(alg))
    return problem(`the request object must be signed with ${algorithms.join(" or ")}`);
  if (!client.jwks && !client.jwks_uri)
    return problem("the client has registered no keys to verify a signed request object with");
  try {
    // Its registered jwks, or the set at its jwks_uri (client-keys.ts: cached, refetched for a new kid).
    const { payload } = await verifyWithClientKeys(config, client, jwt, {
      algorithms,
      issuer: client.client_id,
      audience: config.ISSUER,
      requiredClaims: ["iss", "aud"],
    });
    return payload;
  } catch (err) {
    if (err instanceof ClientKeysUnavailable) return problem(`the client's keys could not be had: ${err.message}`);
    return problem(
      claimProblem(err) ?? "the request object's signature does not verify with the client's registered keys",
    );
  }
}

/** Which claim check failed (jose's codes), in words; null for a signature or format failure. */
function claimProblem(err: unknown): string | null {
  const code = (err as { code?: string }).code;
  const claim = (err as { claim?: string }).claim;
  if (code === "ERR_JWT_EXPIRED") return "the request object has expired";
  if (code !== "ERR_JWT_CLAIM_VALIDATION_FAILED") return null;
  if (claim === "nbf") return "the request object is not valid yet";
  if (claim === "iss") return "the request object's iss must be the client_id";
  if (claim === "aud") return "the request object's aud must be the issuer identifier";
  return `the request object's ${claim ?? "claims"} are invalid`;
}

/**
 * A request object's member as the parameter the query would carry: strings as they are, numbers
 * (`max_age`) as digits, `claims` as its JSON, `resource` (RFC 8707, repeatable) as the list the
 * query's repeated values make (http.ts). Null for anything else.
 */
function asParameter(name: string, value: unknown): string | null {
  if (name === "claims" && value !== null && typeof value === "object" && !Array.isArray(value))
    return JSON.stringify(value);
  if (name === "resource") {
    const list = Array.isArray(value) ? value : [value];
    if (list.length === 0 || !list.every((v) => typeof v === "string" && !v.includes("\0"))) return null;
    return JSON.stringify(list);
  }
  if (typeof value === "string") return value.includes("\0") || !value.isWellFormed() ? null : value;
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  if (typeof value === "boolean") return String(value);
  return null;
}
