import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../workers/shared/config/config";
import { admin, Browser, call, uniqueEmail, withVars } from "../support/harness";
import { createTenant } from "../tenants/support";
import { consoleEnv, csrfOf, grant, signIn } from "./support";

const ISSUER_NAME = loadConfig(env).ISSUER_NAME;

describe("operators API", () => {
  it("grants, lists and removes an operator; validates", { timeout: 30_000 }, async () => {
    const tenant = await createTenant();
    const email = uniqueEmail("op");
    const created = await grant({ email: email.toUpperCase(), tenant: tenant.id });
    expect(created.status, await created.clone().text()).toBe(201);
    expect(await created.json()).toMatchObject({ email, tenant: tenant.id });
    expect((await grant({ email })).status).toBe(201);
    const list = (await (await admin("/operators")).json()) as {
      operators: { email: string; tenant: string | null }[];
    };
    expect(list.operators.filter((o) => o.email === email)).toEqual([
      expect.objectContaining({ tenant: null }),
      expect.objectContaining({ tenant: tenant.id }),
    ]);
    expect((await grant({ email, role: "x" })).status).toBe(400);
    expect((await grant({ email: "not an address" })).status).toBe(400);
    expect((await grant({ email, tenant: "no-such-tenant-zz" })).status).toBe(404);
    expect((await admin(`/operators/${encodeURIComponent(email)}`, { method: "DELETE" })).status).toBe(204);
    expect((await admin(`/operators/${encodeURIComponent(email)}`, { method: "DELETE" })).status).toBe(404);
  });

  it("loses a tenant's grants with the tenant", async () => {
    const tenant = await createTenant();
    const email = uniqueEmail("gone-op");
    expect((await grant({ email, tenant: tenant.id })).status).toBe(201);
    expect((await admin(`/tenants/${tenant.id}`, { method: "DELETE" })).status).toBe(204);
    const list = (await (await admin("/operators")).json()) as { operators: { email: string }[] };
    expect(list.operators.some((o) => o.email === email)).toBe(false);
  });

  it("is the platform token's only", async () => {
    const tenant = await createTenant();
    const key = await admin(`/tenants/${tenant.id}/admin-keys`, { method: "POST", json: { name: "k" } });
    const { key: tenantKey } = (await key.json()) as { key: string };
    const init = {
      method: "POST",
      headers: { Authorization: `Bearer ${tenantKey}`, "Content-Type": "application/json" },
      body: JSON.stringify({ email: uniqueEmail(), tenant: tenant.id }),
    };
    expect((await call("/admin/v1/operators", init)).status).toBe(401);
    // Not a tenant's route: under the tenant's admin path it does not exist.
    expect((await call(`/admin/v1/tenants/${tenant.id}/operators`, init)).status).toBe(404);
  });
});

describe("console", () => {
  it("without a session redirects to the deployment's own /authorize", async () => {
    const res = await new Browser({ env: consoleEnv }).fetch("/console");
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toMatch(new RegExp(`^${env.ISSUER}/authorize\\?`));
    expect(res.headers.getSetCookie().join()).toMatch(/kw_console_login=.*HttpOnly/);
  });

  it("lists every tenant by name for a deployment operator", { timeout: 60_000 }, async () => {
    const a = await createTenant({ name: "Console Acme" });
    const b = await createTenant({ name: "Console Globex" });
    const email = uniqueEmail("deploy-op");
    expect((await grant({ email })).status).toBe(201);
    const { page } = await signIn(email);
    expect(page.status).toBe(200);
    expect(page.headers.get("cache-control")).toBe("no-store");
    const csp = page.headers.get("content-security-policy") ?? "";
    expect(csp).toMatch(/default-src 'none'/);
    expect(csp).toMatch(/frame-ancestors 'none'/);
    const html = await page.text();
    expect(html).toContain('<html lang="en"');
    expect(html.match(/<h1>/g)).toHaveLength(1);
    expect(html).toContain("<main>");
    for (const t of [a, b]) {
      expect(html).toContain(t.name);
      expect(html).toContain(t.id);
    }
    expect(html).toContain(`<bdi>${ISSUER_NAME}</bdi>`);
  });

  it("shows a tenant operator only that tenant", { timeout: 60_000 }, async () => {
    const mine = await createTenant({ name: "Console Mine" });
    const other = await createTenant({ name: "Console Other" });
    const email = uniqueEmail("tenant-op");
    expect((await grant({ email, tenant: mine.id })).status).toBe(201);
    const html = await (await signIn(email)).page.text();
    expect(html).toContain(mine.id);
    expect(html).not.toContain(other.id);
    expect(html).not.toContain(`<bdi>${ISSUER_NAME}</bdi>`);
  });

  it("shows an address without a grant no tenant, 403; a removed grant ends access", { timeout: 60_000 }, async () => {
    const tenant = await createTenant({ name: "Console Hidden" });
    const email = uniqueEmail("no-op");
    const { page } = await signIn(email);
    expect(page.status).toBe(403);
    const html = await page.text();
    expect(html).toContain("no access");
    expect(html).not.toContain(tenant.id);
    expect(html).not.toContain("Console Hidden");

    const revoked = uniqueEmail("revoked-op");
    await grant({ email: revoked });
    const session = await signIn(revoked);
    expect(session.page.status).toBe(200);
    await admin(`/operators/${encodeURIComponent(revoked)}`, { method: "DELETE" });
    const after = await session.browser.fetch("/console");
    expect(after.status).toBe(403);
    expect(await after.text()).not.toContain(tenant.id);
  });

  it("refuses a forged or tampered session cookie and a callback without its login", { timeout: 60_000 }, async () => {
    const forged = new Browser({ env: consoleEnv });
    forged.cookies.set("kw_console", "abc.def");
    expect((await forged.fetch("/console")).status).toBe(302);
    const email = uniqueEmail("forge-op");
    await grant({ email });
    const { browser } = await signIn(email);
    const real = browser.cookies.get("kw_console") as string;
    browser.cookies.set("kw_console", `${real.slice(0, -2)}${real.endsWith("A") ? "B" : "A"}A`);
    expect((await browser.fetch("/console")).status).toBe(302);
    const cb = await new Browser({ env: consoleEnv }).fetch("/console/callback?code=x&state=y");
    expect(cb.status).toBe(400);
  });

  it("signs out only with the session's CSRF token", { timeout: 60_000 }, async () => {
    const email = uniqueEmail("logout-op");
    await grant({ email });
    const { browser, page } = await signIn(email);
    const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())?.[1] as string;
    expect(csrf).toBeTruthy();
    expect((await browser.postForm("/console/logout", { csrf: "wrong" })).status).toBe(403);
    expect((await browser.postForm("/console/logout", {})).status).toBe(403);
    expect((await browser.fetch("/console")).status).toBe(200);
    const out = await browser.postForm("/console/logout", { csrf });
    expect(out.status).toBe(200);
    expect(out.headers.getSetCookie().join()).toMatch(/kw_console=;.*Max-Age=0/);
    expect((await browser.fetch("/console")).status).toBe(302);
  });

  it("marks its cookies Secure on an https issuer, and its page's style carries the CSP nonce", async () => {
    const https = withVars({ ISSUER: "https://id.console-test.example" });
    const start = await call("/console", {}, https);
    expect(start.status).toBe(302);
    expect(start.headers.get("location")).toMatch(/^https:\/\/id\.console-test\.example\/authorize\?/);
    expect(start.headers.getSetCookie().join()).toMatch(/kw_console_login=[^;]+;.*HttpOnly.*Secure/);
    // Put back for any later test: the console's client follows the issuer it was last asked on.
    await call("/console", {}, env);

    const email = uniqueEmail("csp-op");
    await grant({ email });
    const { page } = await signIn(email);
    const nonce = /style-src 'nonce-([^']+)'/.exec(page.headers.get("content-security-policy") ?? "")?.[1];
    expect(nonce).toBeTruthy();
    expect(await page.text()).toContain(`<style nonce="${nonce}">`);
  });
});

describe("console pages: who may reach what", () => {
  it("opens a tenant's pages to its operators only, by URL or by form", { timeout: 60_000 }, async () => {
    const mine = await createTenant({ name: "Guard Mine" });
    const other = await createTenant({ name: "Guard Other" });
    const email = uniqueEmail("guard-op");
    await grant({ email, tenant: mine.id });
    const { browser, page } = await signIn(email);
    const csrf = csrfOf(await page.text());
    const own = await browser.fetch(`/console/t/${mine.id}`);
    expect(own.status).toBe(200);
    expect(await own.text()).toContain("Guard Mine");
    for (const path of [`/console/t/${other.id}`, `/console/t/${other.id}/people`, "/console/t/default"]) {
      const res = await browser.fetch(path);
      expect(res.status, path).toBe(403);
      expect(await res.text()).not.toContain("Guard Other");
    }
    const posted = await browser.postForm(`/console/t/${other.id}/people`, { csrf });
    expect(posted.status).toBe(403);
    // A tenant that does not exist is refused exactly like another's.
    expect((await browser.fetch("/console/t/no-such-tenant")).status).toBe(403);
    // A form without the session's CSRF token changes nothing, even on the operator's own tenant.
    expect((await browser.postForm(`/console/t/${mine.id}`, {})).status).toBe(403);
  });

  it("speaks French and Arabic on request and remembers the choice", { timeout: 60_000 }, async () => {
    const email = uniqueEmail("lang-op");
    await grant({ email });
    const { browser } = await signIn(email);
    const fr = await browser.fetch("/console?lang=fr");
    const frHtml = await fr.text();
    expect(frHtml).toContain('lang="fr"');
    expect(frHtml).toContain("Locataires");
    expect(fr.headers.getSetCookie().join()).toMatch(/kw_console_lang=fr/);
    const ar = await (await browser.fetch("/console", { headers: { "Accept-Language": "ar" } })).text();
    // The remembered choice wins over the browser's languages.
    expect(ar).toContain('lang="fr"');
    const arHtml = await (await browser.fetch("/console?lang=ar")).text();
    expect(arHtml).toContain('dir="rtl"');
    expect(arHtml).toContain("المستأجرون");
  });
});
