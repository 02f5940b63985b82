import { describe, expect, it } from "vitest";
import { createE2ETenant } from "../support.js";
import { adminApi, blockingViolations, type ConsoleE2E, operatorPage, screenshot } from "./support.js";

/**
 * The tenants' pages in Chromium (issue 43): a deployment operator creates a tenant (a refused id
 * shown on its field first), brands it with the sign-in page's preview, rotates its keys, mints an
 * admin key, disables and deletes it (the purge's page); the settings in Arabic; the capacity page
 * (the planner, the bill's charts, a change's confirmation); a tenant operator's refusals. Each page
 * axe clean, no CSP report, screenshots in test-artifacts/console/.
 */
export function tenantsSuite(ctx: ConsoleE2E): void {
  const stamp = () => `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 5)}`;

  describe("console: tenants and their settings", () => {
    it("a deployment operator creates, brands, keys, disables and deletes a tenant", async () => {
      const { page, context, cspErrors } = await operatorPage(ctx, { email: `tenants.${stamp()}@example.com` });
      const url = ctx.stack.url;
      try {
        // A refused id is shown on its field, the values kept.
        await page.fill("#create-id", "Not Valid");
        await page.fill("#create-name", "E2E Made");
        await page.click("form[action='/console/tenants'] button[type=submit]");
        await page.waitForSelector("#create-id-error");
        expect(await page.getAttribute("#create-id", "aria-invalid")).toBe("true");
        expect(await page.inputValue("#create-name")).toBe("E2E Made");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "tenants-create-error");

        const id = `made-${stamp()}`;
        await page.fill("#create-id", id);
        await page.selectOption("#create-locale", "fr");
        await Promise.all([
          page.waitForURL((u) => u.pathname === `/console/t/${id}`),
          page.click("form[action='/console/tenants'] button[type=submit]"),
        ]);
        expect(await page.locator("[role=status]").textContent()).toContain("The tenant is created");
        expect(await page.locator("h1").textContent()).toBe("E2E Made");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "tenant-settings");

        // Branding: the preview first, then saved.
        await page.click("nav[aria-label=Settings] >> text=Branding");
        await page.fill("#brand-product_name", "Made Cloud");
        await page.fill("#brand-primary_color", "#0f766e");
        await page.fill("#brand-support_uri", "mailto:help@made.example");
        await page.click("button[value=preview]");
        await page.waitForSelector("figcaption:has-text('not saved yet')");
        expect(await page.locator(".kw-preview .kw-brand").textContent()).toContain("Made Cloud");
        expect(await page.locator(".kw-preview .kw-h").textContent()).toContain("Se connecter à Made Cloud");
        const bg = await page.locator(".kw-preview .kw-primary").evaluate((e) => getComputedStyle(e).backgroundColor);
        expect(bg).toBe("rgb(15, 118, 110)");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "tenant-branding-preview");
        await page.click("button[value=save]");
        await page.waitForSelector("[role=status]");
        const stored = (await (await adminApi(ctx.stack, "GET", `/tenants/${id}`)).json()) as { branding: unknown };
        expect(stored.branding).toEqual({
          product_name: "Made Cloud",
          primary_color: "#0f766e",
          support_uri: "mailto:help@made.example",
        });

        // Keys: a rotation confirmed, an admin key minted and shown once.
        await page.click("nav[aria-label=Settings] >> text=Keys");
        const before = await page.locator("table tbody tr").count();
        await page.click("text=Rotate keys…");
        await page.click("button:has-text('Rotate now')");
        await page.waitForSelector("text=New signing keys are published");
        expect(await page.locator("table tbody tr").count()).toBe(before + 2);
        await page.fill("#key-name", "CI deploys");
        await page.click("button:has-text('Mint a key')");
        const key = await page.inputValue("#minted-key");
        expect(key).toMatch(/^kwa_/);
        const withKey = await fetch(`${url}/admin/v1/tenants/${id}/clients`, {
          headers: { Authorization: `Bearer ${key}` },
        });
        expect(withKey.status).toBe(200);
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "tenant-keys-minted");

        // Disabled after its confirmation.
        await page.click("nav[aria-label=Settings] >> text=Overview");
        await page.click("text=Disable…");
        expect(await blockingViolations(page)).toEqual([]);
        await page.click("button:has-text('Disable the tenant')");
        await page.waitForSelector("text=The tenant is disabled");
        const disabled = (await (await adminApi(ctx.stack, "GET", `/tenants/${id}`)).json()) as { status: string };
        expect(disabled.status).toBe("disabled");

        // Deleted with its id typed, from the keyboard; the purge's page says it is done.
        await page.click("nav[aria-label=Settings] >> text=Delete");
        await page.focus("#confirm-id");
        await page.keyboard.type(id);
        await Promise.all([
          page.waitForURL((u) => u.pathname === `/console/purges/${id}`),
          page.keyboard.press("Enter"),
        ]);
        expect(await page.locator("[role=status]").textContent()).toContain("all its data are deleted");
        expect(await page.getAttribute("#purge-progress", "value")).toBe("9");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "tenant-purge");
        expect((await adminApi(ctx.stack, "GET", `/tenants/${id}`)).status).toBe(404);
        expect(cspErrors).toEqual([]);
      } finally {
        await context.close();
      }
    }, 180_000);

    it("shows a tenant's settings and branding preview in Arabic, right to left", async () => {
      const tenant = await createE2ETenant(ctx.stack, "console-ar");
      const { page, context, cspErrors } = await operatorPage(ctx, { email: `tenants-ar.${stamp()}@example.com` });
      try {
        await page.goto(`${ctx.stack.url}/console/t/${tenant.id}?lang=ar`);
        expect(await page.getAttribute("html", "dir")).toBe("rtl");
        expect(await page.locator("#status-heading").textContent()).toBe("الحالة");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "tenant-settings-ar");
        await page.goto(`${ctx.stack.url}/console/t/${tenant.id}/branding?preview=ar`);
        expect(await page.getAttribute(".kw-preview", "dir")).toBe("rtl");
        expect(await page.locator(".kw-preview .kw-h").textContent()).toContain("تسجيل الدخول");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "tenant-branding-ar");
        await page.goto(`${ctx.stack.url}/console?lang=en`);
        expect(cspErrors).toEqual([]);
      } finally {
        await context.close();
      }
    }, 120_000);

    it("a tenant operator sees why it cannot change what is the platform's, and no capacity page", async () => {
      const tenant = await createE2ETenant(ctx.stack, "console-op");
      const { page, context } = await operatorPage(ctx, {
        email: `tenant-op.${stamp()}@example.com`,
        tenant: tenant.id,
      });
      try {
        await page.goto(`${ctx.stack.url}/console/t/${tenant.id}/keys`);
        expect(await page.locator("main").textContent()).toContain("Only a deployment operator mints and revokes");
        expect(await page.locator("#key-name").count()).toBe(0);
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "tenant-keys-tenant-operator");
        const res = await page.goto(`${ctx.stack.url}/console/capacity`);
        expect(res?.status()).toBe(403);
        expect(await blockingViolations(page)).toEqual([]);
      } finally {
        await context.close();
      }
    }, 120_000);
  });

  describe("console: capacity", () => {
    it("shows the shards, the planner's plan, the bill's charts, and a change's confirmation", async () => {
      const { page, context, cspErrors } = await operatorPage(ctx, { email: `capacity.${stamp()}@example.com` });
      try {
        await page.goto(`${ctx.stack.url}/console/capacity`);
        expect(await page.locator("#shards-chart-caption").count()).toBe(1);
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "capacity");

        await page.fill("#plan-window", "1");
        await page.click("button:has-text('Measure and plan')");
        await page.waitForSelector("text=Recommendation from 1 s measured");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "capacity-plan");

        // The bill: another operator signs in (a login) while the counters are watched.
        await page.fill("#bill-window", "12");
        await Promise.all([
          page.click("button:has-text('Measure the bill')", { timeout: 60_000 }),
          (async () => {
            await new Promise((r) => setTimeout(r, 1_000));
            const other = await operatorPage(ctx, { email: `capacity-login.${stamp()}@example.com` });
            await other.context.close();
          })(),
        ]);
        await page.waitForSelector("#cost-chart-caption", { timeout: 60_000 });
        expect(await page.locator("main").textContent()).toMatch(
          /Sign-ins in the 12 s measured: [1-9][0-9]*\. The bill: \$[0-9.,]+ per million logins/,
        );
        expect(await page.locator("svg.chart").count()).toBeGreaterThanOrEqual(4);
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "capacity-bill");

        await page.click("a[aria-label='Change entity']");
        await page.fill("#change-shards", "40");
        await page.click("button:has-text('Review the change')");
        await page.waitForSelector("button:has-text('Append the generation')");
        expect(await page.locator("h1").textContent()).toMatch(/^Change entity from \d+ to 40 shards\?$/);
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "capacity-change");
        // Cancelled: the suites after this one share the stack's shards.
        await page.click("text=Cancel");
        expect(new URL(page.url()).pathname).toBe("/console/capacity");
        expect(cspErrors).toEqual([]);
      } finally {
        await context.close();
      }
    }, 180_000);
  });
}
