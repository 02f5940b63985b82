import type { Context } from "hono";
import { type MessageKey, translator } from "../../shared/branding/i18n/index";
import { errorResponse, OAuthError, type OAuthErrorCode } from "../../shared/platform/errors";
import type { AppEnv } from "../../shared/request/context";
import { authorizationResponse } from "./authorization-response";
import { errorPage } from "./pages/notices";
import { requestUi } from "./pages/ui";

/**
 * op-auth's errors: one type (OAuthError), three renderings. A redirect to the client when the error
 * may go back to it (a validated redirect URI), Keyway's own page when it may not or a person is
 * reading, and RFC 6749 JSON otherwise (API callers of the login endpoints).
 */
export function renderAuthError(err: unknown, c: Context<AppEnv>): Response {
  if (err instanceof OAuthError && err.options.redirect) {
    const { uri, state, mode } = err.options.redirect;
    return authorizationResponse(
      uri,
      c.get("config").ISSUER,
      { error: err.code, error_description: err.description, state },
      mode,
    );
  }
  const text = err instanceof OAuthError ? err.options.page : undefined;
  if (err instanceof OAuthError && text && c.get("config")) {
    const headers: Record<string, string> = { "Cache-Control": "no-store", ...err.options.headers };
    if (err.options.retryAfter !== undefined) headers["Retry-After"] = String(err.options.retryAfter);
    const ui = requestUi(c);
    return errorPage(ui, {
      title: text.title as MessageKey,
      message: text.message as MessageKey,
      params: { ...text.params, wait: ui.t.duration(err.options.retryAfter ?? 60) },
      ...(text.detail ? { detail: text.detail } : {}),
      status: err.status,
      headers,
    });
  }
  return errorResponse(err);
}

/** An error shown on Keyway's own page (400 unless said otherwise), in the person's language. */
export function pageError(
  title: MessageKey,
  message: MessageKey,
  o: {
    status?: number;
    code?: OAuthErrorCode;
    retryAfter?: number;
    headers?: Record<string, string>;
    /** The protocol's words for what is wrong, shown to developers as they are. */
    detail?: string;
  } = {},
): OAuthError {
  // A JSON caller, and the log, get the detail or the English message.
  const description =
    o.detail ?? translator("en").text(message, { wait: translator("en").duration(o.retryAfter ?? 60) });
  return new OAuthError(o.code ?? "invalid_request", description, {
    status: o.status ?? 400,
    page: { title, message, ...(o.detail ? { detail: o.detail } : {}) },
    ...(o.retryAfter !== undefined ? { retryAfter: o.retryAfter } : {}),
    ...(o.headers ? { headers: o.headers } : {}),
  });
}

/** An authorization or logout request Keyway cannot use, with what is wrong with it for its developers. */
export const invalidRequestPage = (detail: string) =>
  pageError("err.invalid_request.title", "err.invalid_request.message", { detail });

/** A request that could not be read (a body or query that is not well formed), as a page. */
export function unreadable(err: unknown): OAuthError {
  if (err instanceof OAuthError && err.code !== "invalid_request") return err;
  return pageError("err.invalid_request.title", "err.invalid_form.message", {
    detail: err instanceof Error ? err.message : "malformed request",
  });
}
