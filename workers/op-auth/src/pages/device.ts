import { escapeHtml } from "../../../shared/branding/html";
import { hidden, isolated, messageRegion, type PageMessage, page, strong, strongLtr } from "./layout";
import type { PageUi } from "./ui";

/** RFC 8628 §3.3: where a person types the code their device shows. */
export function deviceCodePage(ui: PageUi, o: { userCode?: string; message?: PageMessage; status?: number }) {
  const { t } = ui;
  const invalid = o.message?.kind === "error";
  return page(ui, {
    title: "device.title",
    status: o.status,
    body: `<h1>${t.html("device.title")}</h1><p class="lead">${t.html("device.lead")}</p>${messageRegion(o.message)}
<form method="post" action="/device">
<label for="user_code">${t.html("device.code_label")}</label>
<input id="user_code" class="code" name="user_code" dir="ltr" autocomplete="off" autocapitalize="characters" spellcheck="false" maxlength="12" required autofocus${
      o.userCode ? ` value="${escapeHtml(o.userCode)}"` : ""
    }${invalid ? ' aria-invalid="true" aria-describedby="msg"' : ""}>
<button class="primary" type="submit">${t.html("device.continue")}</button></form>`,
  });
}

/**
 * RFC 8628 §5.4: the person sees which application asks, for what, as whom, and decides. The form
 * posts same-origin only (the session cookie is SameSite=Lax, and the decision checks Origin).
 */
export function deviceConsentPage(ui: PageUi, o: { scope: string; email: string; userCode: string }) {
  const { t, look } = ui;
  const decision = (value: "approve" | "deny", cls: string, label: string) =>
    `<form method="post" action="/device/decision">${hidden("user_code", o.userCode)}${hidden("decision", value)}<button class="${cls}" type="submit">${label}</button></form>`;
  return page(ui, {
    title: "device.title",
    body: `<h1>${t.html("device.consent_heading", { app: isolated(look.app) })}</h1>
<p class="lead">${t.html("device.consent_lead", { code: strongLtr(o.userCode), email: strongLtr(o.email), scope: strong(o.scope) })}</p>
<p class="muted">${t.html("device.consent_warning")}</p>
${decision("approve", "primary", t.html("device.allow"))}${decision("deny", "secondary", t.html("device.deny"))}`,
  });
}
