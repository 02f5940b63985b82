import { errorField, log } from "../../../durable-objects/contract/log";
/**
 * One error type for everything Keyway answers with an OAuth-style error, and one place
 * (`errorResponse`) that renders it: RFC 6749 §5.2 JSON, `Cache-Control: no-store`.
 */
export type OAuthErrorCode =
  | "invalid_request"
  | "invalid_client"
  | "invalid_grant"
  | "unauthorized_client"
  | "unsupported_grant_type"
  | "unsupported_response_type"
  | "invalid_scope"
  | "invalid_target"
  | "access_denied"
  | "login_required"
  | "interaction_required"
  | "invalid_token"
  | "insufficient_scope"
  | "invalid_code"
  | "too_many_attempts"
  | "too_many_requests"
  | "slow_down"
  | "authorization_pending"
  | "expired_token"
  | "request_not_supported"
  | "invalid_request_object"
  | "request_uri_not_supported"
  | "invalid_request_uri"
  | "invalid_redirect_uri"
  | "invalid_client_metadata"
  | "invalid_dpop_proof"
  | "use_dpop_nonce"
  | "not_found"
  | "method_not_allowed"
  | "conflict"
  | "unauthorized"
  | "forbidden"
  | "tenant_disabled"
  | "payload_too_large"
  | "unsupported_media_type"
  | "server_error"
  | "temporarily_unavailable";

const defaultStatus: Record<OAuthErrorCode, number> = {
  invalid_request: 400,
  invalid_client: 401,
  invalid_grant: 400,
  unauthorized_client: 400,
  unsupported_grant_type: 400,
  unsupported_response_type: 400,
  invalid_scope: 400,
  // RFC 8707 §2: a resource the client may not ask for, or not an absolute URI.
  invalid_target: 400,
  access_denied: 403,
  login_required: 400,
  // OIDC Core §3.1.2.6: prompt=none, and the request needs the person (issue 24: an organization to pick).
  interaction_required: 400,
  invalid_token: 401,
  insufficient_scope: 403,
  invalid_code: 400,
  too_many_attempts: 429,
  too_many_requests: 429,
  slow_down: 429,
  // RFC 8628 §3.5: the token endpoint's answers to a device that polls; all 400 there.
  authorization_pending: 400,
  expired_token: 400,
  // OIDC Core §3.1.2.6: request_not_supported is kept for request objects Keyway cannot take; a
  // request object that fails a check is invalid_request_object (RFC 9101 §6.3, issue 40).
  request_not_supported: 400,
  invalid_request_object: 400,
  request_uri_not_supported: 400,
  // OIDC Core §3.1.2.6 / RFC 9101 §6.2: a request_uri not registered for the client, or whose
  // request object could not be fetched from it.
  invalid_request_uri: 400,
  // RFC 7591 §3.2.2: what dynamic client registration refuses.
  invalid_redirect_uri: 400,
  invalid_client_metadata: 400,
  // RFC 9449 §5, §8: a DPoP proof refused, or one without the server's current nonce (400 at the
  // token endpoint; a resource server answers 401 with a DPoP challenge, §7.1, §9).
  invalid_dpop_proof: 400,
  use_dpop_nonce: 400,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  // Issue 23: a disabled tenant's endpoints answer this and issue nothing.
  tenant_disabled: 403,
  unauthorized: 401,
  forbidden: 403,
  payload_too_large: 413,
  unsupported_media_type: 415,
  server_error: 500,
  temporarily_unavailable: 503,
};

export interface OAuthErrorOptions {
  status?: number;
  retryAfter?: number;
  /** Value of `WWW-Authenticate` (RFC 6749 §5.2 for invalid_client, RFC 6750 §3 for bearer tokens). */
  wwwAuthenticate?: string;
  headers?: Record<string, string>;
  /**
   * A browser-facing endpoint (op-auth) shows this error on a page of its own with this title, for
   * whatever cannot be handed back to a client (an unknown client, an unregistered redirect URI, an
   * expired sign-in link)...
   */
  page?: PageErrorText;
  /**
   * What a person who made this error on a form is told, as a catalogue key (i18n/en.ts), when the
   * page they were on is shown again with it (a wrong code, a wait before a new one).
   */
  notice?: string;
  /** ...or sends it to the client's validated redirect URI (RFC 6749 §4.1.2.1, with `state` and `iss`). */
  redirect?: { uri: string; state?: string | undefined; mode?: "query" | "form_post" | undefined };
  /** Logged by whoever threw it (admission counts its refusals in one line a second), not once each. */
  logged?: boolean;
}

/**
 * The words of an error page, as catalogue keys (i18n/en.ts) and their parameters, and a technical
 * detail for the application's developers (shown as it is, in English).
 */
export interface PageErrorText {
  title: string;
  message: string;
  params?: Record<string, string | number>;
  detail?: string;
}

/**
 * The one error type: every OAuth error Keyway answers with. An API answers it as JSON
 * (`errorResponse`); op-auth renders the same error as a page or a redirect when its options say so
 * (op-auth's errors.ts).
 */
export class OAuthError extends Error {
  readonly status: number;
  constructor(
    readonly code: OAuthErrorCode,
    readonly description?: string,
    readonly options: OAuthErrorOptions = {},
  ) {
    super(description ?? code);
    this.name = "OAuthError";
    this.status = options.status ?? defaultStatus[code];
  }
}

export const invalidRequest = (description: string) => new OAuthError("invalid_request", description);
export const unavailable = (retryAfter = 1) =>
  new OAuthError("temporarily_unavailable", "the service is busy, retry later", { retryAfter });

/** What kind of temporary platform failure an error is, for the log line and the person's message. */
export type PlatformErrorKind = "overloaded" | "storage" | "unreachable";

/**
 * Durable Objects and D1 flag transient failures: `overloaded` (the object's queue is full),
 * `retryable` (reset or network blip), or D1's "overloaded"/"busy" messages; and storage that cannot
 * take a write now (SQLITE_FULL, READONLY, IOERR, CANTOPEN: a full or unwritable disk, issue 27 item
 * 15), temporary from the caller's view. All become 503 with Retry-After, never a retry loop inside
 * Keyway. Null for anything else.
 */
export function platformErrorKind(err: unknown): PlatformErrorKind | null {
  if (!(err instanceof Error)) return null;
  const flags = err as Error & { overloaded?: boolean; retryable?: boolean; remote?: boolean };
  if (flags.overloaded || /overloaded|exceeded its CPU|storage operation exceeded/i.test(err.message))
    return "overloaded";
  if (/SQLITE_(FULL|READONLY|IOERR|CANTOPEN|BUSY)|disk is full|database is locked|readonly database/i.test(err.message))
    return "storage";
  if (flags.retryable || /D1_ERROR|Network connection lost|Durable Object reset|internal error/i.test(err.message))
    return "unreachable";
  return null;
}

export const isTransientPlatformError = (err: unknown): boolean => platformErrorKind(err) !== null;

const KIND_MESSAGE: Record<PlatformErrorKind, string> = {
  overloaded: "the service is busy, retry later",
  storage: "storage cannot take this request now, retry later",
  unreachable: "a part of the service could not be reached, retry later",
};

/** Renders any thrown value. Unexpected errors become `server_error` without details. */
export function errorResponse(err: unknown): Response {
  let e: OAuthError;
  const kind = err instanceof OAuthError ? null : platformErrorKind(err);
  if (err instanceof OAuthError) {
    e = err;
    // Load shedding and a store's own refusals: one line each too.
    if (e.status === 503 && !e.options.logged)
      log("warn", "request refused", { kind: "busy", error: e.description ?? e.code });
  } else if (kind) {
    // One line per refused request (its request id comes with every line), with what refused it.
    log("warn", "request refused: platform error", { kind, error: errorField(err) });
    e = new OAuthError("temporarily_unavailable", KIND_MESSAGE[kind], { retryAfter: kind === "storage" ? 30 : 1 });
  } else {
    log("error", "unexpected error", { error: errorField(err, true) });
    e = new OAuthError("server_error", "internal error");
  }
  const headers = new Headers({
    "Content-Type": "application/json; charset=utf-8",
    "Cache-Control": "no-store",
    Pragma: "no-cache",
  });
  if (e.options.retryAfter !== undefined)
    headers.set("Retry-After", String(Math.max(1, Math.ceil(e.options.retryAfter))));
  if (e.options.wwwAuthenticate) headers.set("WWW-Authenticate", e.options.wwwAuthenticate);
  for (const [k, v] of Object.entries(e.options.headers ?? {})) headers.set(k, v);
  const body: Record<string, string> = { error: e.code };
  if (e.description) body.error_description = e.description;
  return new Response(JSON.stringify(body), { status: e.status, headers });
}
