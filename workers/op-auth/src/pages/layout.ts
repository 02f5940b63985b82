import { randomToken } from "../../../../durable-objects/contract/crypto";
import { pathBase } from "../../../../durable-objects/contract/log";
import { brandUrlProblem } from "../../../shared/branding/branding";
import { escapeHtml } from "../../../shared/branding/html";
import { Html, type MessageKey, type MessageParams } from "../../../shared/branding/i18n/index";
import { pageSecurityHeaders } from "../../../shared/platform/http";
import type { PageUi } from "./ui";

/**
 * The frame of every page of Keyway's own: the language and direction, the product's logo and name,
 * the brand's colours, one message region, the support link. Plain HTML forms that work without
 * script; a page's script (the code page's countdown) only adds to them. Every page carries a CSP
 * with a per-response nonce for its one style and one script, and `frame-ancestors 'none'`.
 */

export interface PageOptions {
  title: MessageKey;
  titleParams?: MessageParams;
  body: string;
  status?: number;
  headers?: Record<string, string>;
  /** A script that enhances the page (never one it needs). */
  script?: string;
}

const STYLE = `
*{box-sizing:border-box}
body{margin:0;min-height:100vh;display:flex;flex-direction:column;align-items:center;justify-content:center;gap:16px;
padding:24px 12px;background:#f3f4f6;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Noto Sans Arabic",sans-serif;color:#1b1f24}
main{width:min(100%,400px);background:#fff;border-radius:14px;padding:28px 28px 24px;box-shadow:0 1px 3px #0000001f,0 8px 24px #0000000d}
.brand{display:flex;align-items:center;gap:10px;margin:0 0 20px;font-weight:600;color:#374151}
.brand img{height:36px;width:auto;max-width:160px;object-fit:contain}
.app-logo{display:block;height:auto;width:auto;max-height:48px;max-width:160px;object-fit:contain;margin:0 0 12px}
.app-links{display:flex;flex-wrap:wrap;gap:4px 16px;margin:0 0 12px;font-size:14px}
h1{font-size:22px;line-height:1.3;margin:0 0 6px}
p{margin:8px 0 14px;color:#374151}
.lead{color:#4b5563}
label{display:block;font-weight:600;margin:14px 0 6px}
input{width:100%;padding:11px 12px;border:1px solid #8a919c;border-radius:8px;font:inherit;color:inherit;background:#fff}
input[aria-invalid=true]{border-color:#b42318;border-width:2px}
input.code{letter-spacing:.35em;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:22px;text-align:center}
button{font:inherit;cursor:pointer}
.primary{margin-top:16px;width:100%;padding:11px;border:0;border-radius:8px;background:var(--primary);color:var(--on-primary);font-weight:600}
.secondary{margin-top:10px;width:100%;padding:10px;border:1px solid var(--accent);border-radius:8px;background:#fff;color:var(--accent);font-weight:600}
.secondary:disabled{border-color:#8a919c;color:#4b5563;cursor:not-allowed}
.choices{list-style:none;margin:16px 0 0;padding:0}
.link{padding:0;border:0;background:none;color:var(--accent);text-decoration:underline;text-underline-offset:2px}
a{color:var(--accent)}
:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
.msg:empty{display:none}
.msg p{margin:0 0 14px;padding:10px 12px;border-radius:8px}
.error{background:#fdecec;color:#8a1c13}
.info{background:#eef4ff;color:#1e3a8a}
.muted{font-size:14px;color:#4b5563}
.row{display:flex;gap:8px;align-items:baseline;flex-wrap:wrap;margin:4px 0 12px}
.detail{font-size:13px;color:#4b5563;word-break:break-word}
.detail code{font-family:ui-monospace,monospace}
footer{font-size:14px;color:#4b5563}
footer a{color:#374151}
.ltr{direction:ltr;unicode-bidi:isolate}
form.inline{display:inline}`;

/**
 * An origin a page may load images from: the logo's, when it has one. The CSP is built from it, so
 * it is checked again here (a look sealed in a login transaction before the check was stricter).
 */
function imageOrigin(uri: string | undefined): string | undefined {
  if (!uri || brandUrlProblem(uri) !== null) return undefined;
  return new URL(uri).origin;
}

export function page(ui: PageUi, o: PageOptions): Response {
  const { t, look } = ui;
  const nonce = randomToken(16);
  // The forms post to Keyway's own paths, under the tenant's `/t/<tenant>` when it is served there.
  const body = o.body.replaceAll('action="/', `action="${pathBase()}/`);
  const title = t.text("page.title", { title: t.text(o.title, o.titleParams), product: look.product });
  const brand = look.logoUri
    ? `<img src="${escapeHtml(look.logoUri)}" alt="" height="36"><span>${escapeHtml(look.product)}</span>`
    : `<span>${escapeHtml(look.product)}</span>`;
  const support = look.supportUri
    ? `<footer><a href="${escapeHtml(look.supportUri)}" rel="noopener">${t.html("page.support")}</a></footer>`
    : "";
  const colours = `:root{--primary:${look.primary};--on-primary:${look.onPrimary};--accent:${look.accent}}`;
  const html = `<!doctype html><html lang="${t.locale}" dir="${t.dir}"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1"><title>${escapeHtml(title)}</title>
<style nonce="${nonce}">${colours}${STYLE}</style></head><body><main>
<div class="brand">${brand}</div>
${body}</main>${support}${o.script ? `<script nonce="${nonce}">${o.script}</script>` : ""}</body></html>`;
  return new Response(html, {
    status: o.status ?? 200,
    headers: {
      // The client's registered logo's origin only where the page shows it (clientLogo).
      ...pageSecurityHeaders(nonce, [
        imageOrigin(look.logoUri),
        body.includes(APP_LOGO) ? imageOrigin(shownLogo(ui)) : undefined,
      ]),
      ...o.headers,
    },
  });
}

const APP_LOGO = 'class="app-logo"';

/** The logo the client registered, unless it is the brand's logo the page already shows. */
const shownLogo = (ui: PageUi) => (ui.shown?.logo && ui.shown.logo !== ui.look.logoUri ? ui.shown.logo : undefined);

/**
 * The client's logo, named by the client's name, and links to its privacy policy and terms of service
 * (OIDC Registration §2), shown where a login page names the application; "" when it registered none.
 */
export function clientLogo(ui: PageUi): string {
  const logo = shownLogo(ui);
  return logo ? `<img ${APP_LOGO} src="${escapeHtml(logo)}" alt="${escapeHtml(ui.look.app)}">` : "";
}

export function clientLinks(ui: PageUi): string {
  const { t, shown } = ui;
  const links = [
    shown?.policy ? `<a href="${escapeHtml(shown.policy)}" rel="noopener">${t.html("page.app_privacy")}</a>` : "",
    shown?.tos ? `<a href="${escapeHtml(shown.tos)}" rel="noopener">${t.html("page.app_terms")}</a>` : "",
  ].filter(Boolean);
  return links.length ? `<p class="app-links">${links.join("")}</p>` : "";
}

/** What the message region says: an error (announced at once) or a notice. */
export interface PageMessage {
  kind: "error" | "info";
  html: string;
}

/**
 * The page's one message region (`aria-live`): the error or notice the server rendered, and what the
 * page's script adds later (the code page says there when a new code may be asked for).
 */
export function messageRegion(message?: PageMessage): string {
  const inner = message
    ? `<p class="${message.kind}"${message.kind === "error" ? ' role="alert"' : ""}>${message.html}</p>`
    : "";
  return `<div id="msg" class="msg" aria-live="polite" aria-atomic="true">${inner}</div>`;
}

/** A hidden form field. */
export const hidden = (name: string, value: string) =>
  `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`;

/**
 * A name someone chose (the application's), isolated in its own direction (`<bdi>`, HTML §4.5.24): an
 * Arabic name in an English sentence, or `Acme (EU)` in an Arabic one, keeps its order and leaves the
 * sentence's alone.
 */
export const isolated = (text: string) => new Html(`<bdi>${escapeHtml(text)}</bdi>`);
/** Text that reads left to right inside any page (an address, a code), isolated from the text around it. */
export const ltr = (text: string) => new Html(`<bdi class="ltr" dir="ltr">${escapeHtml(text)}</bdi>`);
export const strong = (text: string) => new Html(`<strong>${escapeHtml(text)}</strong>`);
export const strongLtr = (text: string) => new Html(`<strong><bdi dir="ltr">${escapeHtml(text)}</bdi></strong>`);
