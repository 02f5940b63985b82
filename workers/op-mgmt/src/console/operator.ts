import type { Context, Hono, Next } from "hono";
import { randomToken, timingSafeEqualString } from "../../../../durable-objects/contract/crypto";
import type { AppEnv } from "../../../shared/request/context";
import { DEFAULT_TENANT } from "../../../shared/routing/tenant-route";
import { operatorScope } from "../operators";
import { markConsoleRequest } from "./caller";
import type { ConsoleEnv } from "./env";
import { consoleLocale, LANG_COOKIE } from "./i18n";
import { renderMessagePage } from "./layout";
import { openSession, startSignIn } from "./session";

/** Every console response: a fresh CSP nonce and the page's language (a chosen one remembered for a year). */
export async function pageBasics(c: Context<ConsoleEnv>, next: Next): Promise<void> {
  c.set("nonce", randomToken(16));
  const { locale, chosen } = consoleLocale(c);
  c.set("locale", locale);
  await next();
  if (chosen)
    c.res.headers.append("Set-Cookie", `${LANG_COOKIE}=${locale}; Path=/console; SameSite=Lax; Max-Age=31536000`);
}

/**
 * The guard in front of every console page but the sign-in's callback and the sign-out: a live
 * session (else Keyway's login, for a page; a refusal, for a form), the address's grants read again
 * on every request (a removed operator loses the console at once), and on a POST the session's CSRF
 * token and a same-origin fetch (Fetch Metadata, where the browser sends it).
 */
export async function requireOperator(c: Context<ConsoleEnv>, next: Next): Promise<Response | undefined> {
  const session = await openSession(c);
  const isPost = c.req.method === "POST";
  if (!session) return isPost ? renderMessagePage(c, { kind: "expired", status: 403 }) : startSignIn(c);
  const scope = await operatorScope(c.env.DB, session.email);
  if (!scope) return renderMessagePage(c, { kind: "noAccess", status: 403 });
  c.set("operator", { email: session.email, csrf: session.csrf, scope });
  if (isPost) {
    const site = c.req.header("sec-fetch-site");
    const form = await c.req.parseBody({ all: true }).catch(() => null);
    const csrf = form && typeof form.csrf === "string" ? form.csrf : "";
    if ((site && site !== "same-origin") || !timingSafeEqualString(csrf, session.csrf))
      return renderMessagePage(c, { kind: "expired", status: 403 });
  }
  await next();
  return undefined;
}

export const canManage = (scope: "all" | readonly string[], tenant: string) =>
  scope === "all" || scope.includes(tenant);

/**
 * `/console/t/{tenant}/...`: the operator must manage that tenant. The refusal is the same whether
 * the tenant exists or not, and is checked before anything is read, by URL or by form.
 */
export async function requireTenant(c: Context<ConsoleEnv>, next: Next): Promise<Response | undefined> {
  const id = c.req.param("tenant") ?? "";
  if (!canManage(c.get("operator").scope, id)) return renderMessagePage(c, { kind: "notYours", status: 403 });
  if (id === DEFAULT_TENANT) c.set("tenant", { id, name: c.get("config").ISSUER_NAME, status: "active" });
  else {
    const row = await c.env.DB.prepare("SELECT id, name, status FROM tenants WHERE id = ? AND status != 'deleted'")
      .bind(id)
      .first<{ id: string; name: string; status: string }>();
    if (!row) return renderMessagePage(c, { kind: "notYours", status: 403 });
    c.set("tenant", row);
  }
  await next();
  return undefined;
}

let adminApp: Hono<AppEnv> | null = null;
/** op-mgmt's app, whose admin routes the console dispatches into (set once by mountConsole). */
export function useAdminApp(app: Hono<AppEnv>): void {
  adminApp = app;
}

/** A tenant's admin API path: the default tenant's at `/admin/v1/...`, another's under `/admin/v1/tenants/{id}`. */
export const tenantApiPath = (tenant: string, rest: string) =>
  tenant === DEFAULT_TENANT ? `/admin/v1${rest}` : `/admin/v1/tenants/${encodeURIComponent(tenant)}${rest}`;

export interface AdminAnswer<T> {
  status: number;
  ok: boolean;
  /** The JSON body (or null); on an error, `{error, error_description}` as CONTRACT §4 shapes it. */
  data: T;
  /** The admin API's error description, for the page to show. */
  error?: string;
}

/**
 * One admin API call on the operator's behalf, through op-mgmt's own app: the same validation,
 * permissions, audit (with the operator's address) and webhooks as a call with a token.
 * `body` is sent as JSON, or as it is when it is already a FormData or a string (NDJSON, say).
 */
export async function adminCall<T = unknown>(
  c: Context<ConsoleEnv>,
  method: "GET" | "POST" | "PATCH" | "PUT" | "DELETE",
  path: string,
  body?: unknown,
  contentType?: string,
): Promise<AdminAnswer<T>> {
  if (!adminApp) throw new Error("the console is not mounted");
  const headers = new Headers();
  let payload: BodyInit | undefined;
  if (body instanceof FormData || typeof body === "string") {
    payload = body;
    if (contentType) headers.set("Content-Type", contentType);
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers.set("Content-Type", "application/json");
  }
  const operator = c.get("operator");
  const req = markConsoleRequest(new Request(new URL(path, c.req.url), { method, headers, body: payload ?? null }), {
    email: operator.email,
    scope: operator.scope,
  });
  const res = await adminApp.fetch(req, c.env, c.executionCtx);
  const text = await res.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  const error =
    res.ok || !data || typeof data !== "object"
      ? undefined
      : String(
          (data as { error_description?: unknown; error?: unknown }).error_description ??
            (data as { error?: unknown }).error,
        );
  return { status: res.status, ok: res.ok, data: data as T, ...(error ? { error } : {}) };
}

/** After a change, back to a page (POST/redirect/GET), with a notice key the page translates. */
export function seeOther(path: string, notice?: string): Response {
  const url = notice ? `${path}${path.includes("?") ? "&" : "?"}notice=${encodeURIComponent(notice)}` : path;
  return new Response(null, { status: 303, headers: { Location: url, "Cache-Control": "no-store" } });
}
