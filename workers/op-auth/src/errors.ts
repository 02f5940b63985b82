import type { Context } from "hono";
import type { AppEnv } from "../../shared/app";
import { errorResponse, OAuthError, type OAuthErrorCode } from "../../shared/errors";
import { authorizationResponseUrl } from "./authorization-response";
import { errorPage } from "./login-page";

/**
 * op-auth's errors: one type (OAuthError), three renderings. A redirect to the client when the error
 * may go back to it (a validated redirect URI), Keyway's own page when it may not or a person is
 * reading, and RFC 6749 JSON otherwise (API callers of the login endpoints).
 */
export function renderAuthError(err: unknown, c: Context<AppEnv>): Response {
  if (err instanceof OAuthError && err.options.redirect) {
    const { uri, state } = err.options.redirect;
    const location = authorizationResponseUrl(uri, c.get("config").ISSUER, {
      error: err.code,
      error_description: err.description,
      state,
    });
    return new Response(null, { status: 302, headers: { Location: location, "Cache-Control": "no-store" } });
  }
  if (err instanceof OAuthError && err.options.page) {
    const headers: Record<string, string> = { "Cache-Control": "no-store", ...err.options.headers };
    if (err.options.retryAfter !== undefined) headers["Retry-After"] = String(err.options.retryAfter);
    return errorPage(err.options.page.title, err.description ?? err.code, err.status, headers);
  }
  return errorResponse(err);
}

/** An error shown on Keyway's own page (400 unless said otherwise). */
export function pageError(
  title: string,
  message: string,
  o: { status?: number; code?: OAuthErrorCode; retryAfter?: number; headers?: Record<string, string> } = {},
): OAuthError {
  return new OAuthError(o.code ?? "invalid_request", message, {
    status: o.status ?? 400,
    page: { title },
    ...(o.retryAfter !== undefined ? { retryAfter: o.retryAfter } : {}),
    ...(o.headers ? { headers: o.headers } : {}),
  });
}

/** A request that could not be read (a body or query that is not well formed), as a page. */
export function unreadable(err: unknown): OAuthError {
  if (err instanceof OAuthError && err.code !== "invalid_request") return err;
  return pageError("Invalid request", err instanceof Error ? err.message : "malformed request");
}
