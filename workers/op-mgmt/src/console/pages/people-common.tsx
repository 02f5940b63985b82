import type { Context } from "hono";
import type { Child } from "hono/jsx";
import type { ConsoleEnv } from "../env";
import { CsrfField, renderPage, type TenantSection } from "../layout";

/**
 * What the people, organizations and audit pages share: the admin API's shapes they read, the
 * confirmation step before a destructive action, and how a form's list of words is read.
 */

/** A user as `GET /admin/v1/users...` answers. */
export interface ApiUser {
  id: string;
  email: string;
  name: string | null;
  created_at: number;
  updated_at: number;
  last_login_at: number | null;
  revoked_at: number | null;
}

/** An event as `GET /admin/v1/audit` answers (`at` an ISO date). */
export interface ApiEvent {
  id: string;
  at: string;
  kind: string;
  user_id: string | null;
  email_key: string | null;
  client_id: string | null;
  ip: string | null;
  detail: unknown;
}

/** The path segment of an id in a console URL or an admin API path. */
export const seg = (id: string) => encodeURIComponent(id);

/** Whether what was typed in a "person" field is an address (else it is taken as a user id). */
export const isAddress = (q: string) => q.includes("@");

/** A user id as the audit trail and the API accept it. */
export const USER_ID = /^[A-Za-z0-9_-]{1,100}$/;

/** A form field's values: one or several (`parseBody({ all: true })`), strings only. */
export function values(form: Record<string, unknown>, name: string): string[] {
  const v = form[name];
  const list = Array.isArray(v) ? v : v === undefined ? [] : [v];
  return list.filter((x): x is string => typeof x === "string");
}

/** The first value of a form field, trimmed ("" when absent). */
export const field = (form: Record<string, unknown>, name: string) => (values(form, name)[0] ?? "").trim();

/** Words typed in one field, separated by commas or spaces, each once. */
export const words = (text: string) => [...new Set(text.split(/[\s,]+/).filter(Boolean))];

/**
 * The confirmation step before a destructive action: what will happen, a form that posts it (with
 * the session's CSRF token), and a way back that changes nothing.
 */
export function confirmPage(
  c: Context<ConsoleEnv>,
  o: {
    title: string;
    section: TenantSection;
    explain: Child;
    action: string;
    confirm: string;
    cancel: string;
    back: string;
    error?: string;
    status?: number;
  },
): Response {
  return renderPage(c, {
    title: o.title,
    section: o.section,
    error: o.error,
    ...(o.status ? { status: o.status } : {}),
    children: (
      <>
        <p>{o.explain}</p>
        <form method="post" action={o.action}>
          <CsrfField c={c} />
          <button type="submit" class="danger">
            {o.confirm}
          </button>{" "}
          <a href={o.back}>{o.cancel}</a>
        </form>
      </>
    ),
  });
}

/** The notice a page was sent back with (`seeOther(path, key)`), if it is one of the page's. */
export function noticeOf<K extends string>(c: Context<ConsoleEnv>, known: readonly K[]): K | undefined {
  const n = c.req.query("notice");
  return known.find((k) => k === n);
}
