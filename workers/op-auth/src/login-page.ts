import { randomToken } from "../../shared/crypto";
import { escapeHtml, pageSecurityHeaders } from "../../shared/http";
import { pathBase } from "../../shared/log";

/**
 * Keyway's own pages: the two-step login form (email, then code) and error pages. Plain HTML forms,
 * no script; every page carries a CSP with `frame-ancestors 'none'` and a per-response style nonce.
 */

interface PageOptions {
  title: string;
  body: string;
  status?: number;
  headers?: Record<string, string>;
}

const STYLE = `
*{box-sizing:border-box}body{margin:0;min-height:100vh;display:grid;place-items:center;background:#f4f5f7;
font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1b1f24}
main{width:min(92vw,380px);background:#fff;border-radius:12px;padding:32px;box-shadow:0 1px 3px #0002}
h1{font-size:20px;margin:0 0 4px}p{margin:8px 0 16px;color:#4b5563}
label{display:block;font-weight:600;margin:12px 0 6px}
input{width:100%;padding:10px 12px;border:1px solid #c9ced6;border-radius:8px;font-size:16px}
input.code{letter-spacing:8px;font-family:ui-monospace,monospace;font-size:22px;text-align:center}
button{margin-top:16px;width:100%;padding:11px;border:0;border-radius:8px;background:#1f6feb;color:#fff;font-size:16px;cursor:pointer}
.error{background:#fdecec;color:#a61b1b;padding:8px 12px;border-radius:8px}
.muted{font-size:13px;color:#6b7280}`;

export function page(o: PageOptions): Response {
  const nonce = randomToken(16);
  // The forms post to Keyway's own paths, under the tenant's `/t/<tenant>` when it is served there.
  const body = o.body.replaceAll('action="/', `action="${pathBase()}/`);
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1"><title>${escapeHtml(o.title)}</title>
<style nonce="${nonce}">${STYLE}</style></head><body><main>${body}</main></body></html>`;
  return new Response(html, { status: o.status ?? 200, headers: { ...pageSecurityHeaders(nonce), ...o.headers } });
}

const errorBlock = (error?: string) => (error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : "");

export function emailStep(o: {
  issuerName: string;
  tx: string;
  /** The request's login_hint, pre-filled. */
  email?: string | undefined;
  error?: string;
  status?: number;
  headers?: Record<string, string>;
}) {
  return page({
    title: `Sign in · ${o.issuerName}`,
    status: o.status,
    headers: o.headers,
    body: `<h1>Sign in to ${escapeHtml(o.issuerName)}</h1><p>We will email you a 6-digit code.</p>${errorBlock(o.error)}
<form method="post" action="/email-code/generate">
<input type="hidden" name="tx" value="${escapeHtml(o.tx)}">
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="email" required autofocus maxlength="254"${o.email ? ` value="${escapeHtml(o.email)}"` : ""}>
<button type="submit">Email me a code</button></form>`,
  });
}

export function codeStep(o: {
  issuerName: string;
  tx: string;
  email: string;
  error?: string;
  status?: number;
  headers?: Record<string, string>;
}) {
  return page({
    title: `Enter your code · ${o.issuerName}`,
    status: o.status,
    headers: o.headers,
    body: `<h1>Check your email</h1><p>If <strong>${escapeHtml(o.email)}</strong> can sign in, a code is on its way.</p>${errorBlock(o.error)}
<form method="post" action="/email-code/verify">
<input type="hidden" name="tx" value="${escapeHtml(o.tx)}">
<input type="hidden" name="email" value="${escapeHtml(o.email)}">
<label for="code">Code</label>
<input id="code" class="code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required autofocus>
<button type="submit">Sign in</button></form>
<form method="post" action="/email-code/generate"><input type="hidden" name="tx" value="${escapeHtml(o.tx)}">
<input type="hidden" name="email" value="${escapeHtml(o.email)}"><button type="submit" style="background:#6b7280">Send a new code</button></form>`,
  });
}

export function errorPage(title: string, message: string, status = 400, headers?: Record<string, string>): Response {
  return page({
    title,
    status,
    headers,
    body: `<h1>${escapeHtml(title)}</h1><p class="error" role="alert">${escapeHtml(message)}</p>`,
  });
}

export function messagePage(title: string, message: string, headers?: Record<string, string>): Response {
  return page({ title, headers, body: `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>` });
}

/**
 * Asks before ending a session that a request from elsewhere, without an ID token of one of its
 * logins, wants ended (OIDC RP-Initiated Logout 1.0 §2: the OP should confirm with the person).
 */
export function confirmLogoutPage(fields: Record<string, string>, headers?: Record<string, string>): Response {
  const hidden = Object.entries(fields)
    .map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`)
    .join("");
  return page({
    title: "Sign out?",
    headers,
    body: `<h1>Sign out?</h1><p>An application asked to sign you out of this browser.</p>
<form method="post" action="/logout">${hidden}<button type="submit">Sign out</button></form>`,
  });
}

/** RFC 8628 §3.3: where a person types the code their device shows. */
export function deviceCodePage(o: { issuerName: string; userCode?: string; error?: string; status?: number }) {
  return page({
    title: `Connect a device · ${o.issuerName}`,
    status: o.status,
    body: `<h1>Connect a device</h1><p>Enter the code your device shows.</p>${errorBlock(o.error)}
<form method="post" action="/device">
<label for="user_code">Code</label>
<input id="user_code" class="code" name="user_code" autocomplete="off" autocapitalize="characters" maxlength="9" required autofocus${
      o.userCode ? ` value="${escapeHtml(o.userCode)}"` : ""
    }>
<button type="submit">Continue</button></form>`,
  });
}

/**
 * RFC 8628 §5.4: the person sees which application asks, for what, as whom, and decides. The form
 * posts same-origin only (the session cookie is SameSite=Lax, and the decision checks Origin).
 */
export function deviceConsentPage(o: {
  issuerName: string;
  clientName: string;
  scope: string;
  email: string;
  userCode: string;
}) {
  const code = escapeHtml(o.userCode);
  return page({
    title: `Connect a device · ${o.issuerName}`,
    body: `<h1>Connect ${escapeHtml(o.clientName)}?</h1>
<p>A device showing <strong>${code}</strong> asks to sign in as <strong>${escapeHtml(o.email)}</strong>
with access to: ${escapeHtml(o.scope)}.</p><p class="muted">Only allow it if you started this on your own device.</p>
<form method="post" action="/device/decision"><input type="hidden" name="user_code" value="${code}">
<input type="hidden" name="decision" value="approve"><button type="submit">Allow</button></form>
<form method="post" action="/device/decision"><input type="hidden" name="user_code" value="${code}">
<input type="hidden" name="decision" value="deny"><button type="submit" style="background:#6b7280">Deny</button></form>`,
  });
}
