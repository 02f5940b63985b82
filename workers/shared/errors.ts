import { errorField, log } from "./log";
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
  | "access_denied"
  | "login_required"
  | "invalid_token"
  | "insufficient_scope"
  | "invalid_code"
  | "too_many_attempts"
  | "too_many_requests"
  | "slow_down"
  | "authorization_pending"
  | "expired_token"
  | "request_not_supported"
  | "request_uri_not_supported"
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
  access_denied: 403,
  login_required: 400,
  invalid_token: 401,
  insufficient_scope: 403,
  invalid_code: 400,
  too_many_attempts: 429,
  too_many_requests: 429,
  slow_down: 429,
  // RFC 8628 §3.5: the token endpoint's answers to a device that polls; all 400 there.
  authorization_pending: 400,
  expired_token: 400,
  // OIDC Core §3.1.2.6: request objects are not supported.
  request_not_supported: 400,
  request_uri_not_supported: 400,
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
  page?: { title: string };
  /** ...or sends it to the client's validated redirect URI (RFC 6749 §4.1.2.1, with `state` and `iss`). */
  redirect?: { uri: string; state?: string | undefined };
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

/**
 * Durable Objects and D1 flag transient failures: `overloaded` (the object's queue is full),
 * `retryable` (reset or network blip), or D1's "overloaded"/"busy" messages. All become 503 with
 * Retry-After, never a retry loop inside Keyway.
 */
export function isTransientPlatformError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const flags = err as Error & { overloaded?: boolean; retryable?: boolean; remote?: boolean };
  if (flags.overloaded || flags.retryable) return true;
  return /D1_ERROR|overloaded|Network connection lost|Durable Object reset|storage operation exceeded|exceeded its CPU|SQLITE_BUSY|database is locked|internal error/i.test(
    err.message,
  );
}

/** Renders any thrown value. Unexpected errors become `server_error` without details. */
export function errorResponse(err: unknown): Response {
  let e: OAuthError;
  if (err instanceof OAuthError) e = err;
  else if (isTransientPlatformError(err)) e = unavailable(1);
  else {
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
