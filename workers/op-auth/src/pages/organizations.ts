import { escapeHtml } from "../../../shared/branding/html";
import { hidden, isolated, page } from "./layout";
import type { PageUi } from "./ui";

/**
 * Issue 24: the organization picker, for a client that requires one when the person belongs to
 * several. Each choice is the same authorization request again with `organization` set (a GET, so
 * it works without script); the session just made answers it.
 */
export function organizationPage(
  ui: PageUi,
  o: { params: [string, string][]; orgs: { id: string; name: string }[] },
): Response {
  const { t, look } = ui;
  const fields = o.params.map(([k, v]) => hidden(k, v)).join("");
  const choices = o.orgs
    .map(
      (org) =>
        `<li><button class="secondary" type="submit" name="organization" value="${escapeHtml(org.id)}">${escapeHtml(org.name)}</button></li>`,
    )
    .join("");
  return page(ui, {
    title: "org.title",
    body: `<h1>${t.html("org.title")}</h1><p class="lead">${t.html("org.lead", { app: isolated(look.app) })}</p>
<form method="get" action="/authorize">${fields}<ul class="choices">${choices}</ul></form>`,
  });
}
