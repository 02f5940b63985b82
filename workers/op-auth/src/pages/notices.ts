import { escapeHtml } from "../../../shared/branding/html";
import type { MessageKey, MessageParams } from "../../../shared/branding/i18n/index";
import { hidden, messageRegion, page } from "./layout";
import type { PageUi } from "./ui";

/** An error shown on a page: its title and what to do, and a technical detail for developers. */
export function errorPage(
  ui: PageUi,
  o: {
    title: MessageKey;
    message: MessageKey;
    params?: MessageParams;
    detail?: string;
    status?: number;
    headers?: Record<string, string>;
  },
): Response {
  const { t } = ui;
  // The detail is the protocol's own words (a parameter's name, what is wrong with it), in English.
  const detail = o.detail
    ? `<p class="detail">${t.html("err.technical_detail")} <code lang="en" dir="ltr">${escapeHtml(o.detail)}</code></p>`
    : "";
  return page(ui, {
    title: o.title,
    status: o.status ?? 400,
    headers: o.headers,
    body: `<h1>${t.html(o.title)}</h1>${messageRegion({ kind: "error", html: t.html(o.message, o.params) })}${detail}`,
  });
}

/** A page that tells the person how something ended. */
export function messagePage(
  ui: PageUi,
  o: { title: MessageKey; message: MessageKey; headers?: Record<string, string> },
): Response {
  const { t } = ui;
  return page(ui, {
    title: o.title,
    headers: o.headers,
    body: `<h1>${t.html(o.title)}</h1>${messageRegion({ kind: "info", html: t.html(o.message) })}`,
  });
}

/**
 * Asks before ending a session that a request from elsewhere, without an ID token of one of its
 * logins, wants ended (OIDC RP-Initiated Logout 1.0 §2: the OP should confirm with the person).
 */
export function confirmLogoutPage(ui: PageUi, fields: Record<string, string>, headers?: Record<string, string>) {
  const { t } = ui;
  const carried = Object.entries(fields)
    .map(([k, v]) => hidden(k, v))
    .join("");
  return page(ui, {
    title: "logout.confirm.title",
    headers,
    body: `<h1>${t.html("logout.confirm.title")}</h1><p class="lead">${t.html("logout.confirm.lead")}</p>
<form method="post" action="/logout">${carried}<button class="primary" type="submit">${t.html("logout.confirm.submit")}</button></form>`,
  });
}

export type { MessageParams };
