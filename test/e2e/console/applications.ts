import { describe, expect, it } from "vitest";
import { createE2ETenant } from "../support.js";
import { adminApi, blockingViolations, type ConsoleE2E, operatorPage, screenshot } from "./support.js";

/**
 * The applications pages in Chromium (issue 43): a tenant operator registers an application (the
 * API's refusal shown beside the field first, then the secret once), changes its settings, makes a
 * new secret behind a confirmation step and deletes it by typing its name, keyboard only for that
 * last step; axe clean in English and Arabic, no CSP report. Checked against the stored state.
 */
export function applicationsSuite(ctx: ConsoleE2E): void {
  describe("console applications in Chromium", () => {
    it("registers, changes, gives a new secret to and deletes an application", async () => {
      const tenant = await createE2ETenant(ctx.stack, "apps");
      const { page, context, cspErrors } = await operatorPage(ctx, {
        email: `apps.${Date.now()}@example.com`,
        tenant: tenant.id,
      });
      const base = `${ctx.stack.url}/console/t/${tenant.id}`;
      const stored = async (id: string) => {
        const res = await adminApi(ctx.stack, "GET", `/tenants/${tenant.id}/clients/${id}`);
        return { status: res.status, client: (await res.json()) as Record<string, unknown> };
      };
      try {
        await page.goto(`${base}/apps`);
        expect(await page.locator("h1").textContent()).toBe("Applications");
        expect(await blockingViolations(page)).toEqual([]);
        await page.getByRole("link", { name: "Register an application" }).click();
        await page.waitForURL(`${base}/apps/new`);

        await page.getByLabel("Name", { exact: true }).fill("Storefront");
        await page.getByLabel("How it authenticates at the token endpoint").selectOption("client_secret_post");
        await page.getByLabel("Redirect URIs", { exact: true }).fill("http://shop.example.com/callback");
        await page.getByLabel("Resources (APIs)").fill("https://api.shop.example.com/");
        await page.getByLabel("Bind its access tokens to its key (DPoP)").check();
        await page.getByLabel("Main colour").fill("#0f766e");
        await page.getByRole("button", { name: "Register", exact: true }).click();
        // The API's refusal beside the field, with what was typed kept.
        const problem = page.locator("#problem-redirect_uris");
        await expect.poll(() => problem.textContent()).toContain("http is allowed only for loopback");
        expect(await page.getByLabel("Redirect URIs", { exact: true }).getAttribute("aria-invalid")).toBe("true");
        expect(await page.getByLabel("Name", { exact: true }).inputValue()).toBe("Storefront");
        expect(await page.getByLabel("Main colour").inputValue()).toBe("#0f766e");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "applications-register-refused");

        await page.getByLabel("Redirect URIs", { exact: true }).fill("https://shop.example.com/callback");
        await page.getByRole("button", { name: "Register", exact: true }).click();
        await page.waitForSelector("#client-secret");
        const secret = (await page.locator("#client-secret").textContent()) as string;
        const id = (await page.locator("#client-id").textContent()) as string;
        expect(secret).toMatch(/^kws_/);
        expect(page.url()).not.toContain(secret);
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "applications-registered");
        expect((await stored(id)).client).toMatchObject({
          client_name: "Storefront",
          token_endpoint_auth_method: "client_secret_post",
          redirect_uris: ["https://shop.example.com/callback"],
          resources: ["https://api.shop.example.com/"],
          dpop_bound_access_tokens: true,
          branding: { primary_color: "#0f766e" },
        });

        await page.getByRole("link", { name: "Go to the application" }).click();
        await page.waitForURL(`${base}/apps/${id}`);
        expect(await page.content()).not.toContain(secret);
        await page.getByLabel("Scopes").fill("openid email");
        await page
          .getByLabel("Redirect URIs", { exact: true })
          .fill("https://shop.example.com/callback\nhttps://shop.example.com/callback2");
        await page.getByLabel("Product name").fill("Storefront Plus");
        await page.getByRole("button", { name: "Save changes" }).click();
        await page.waitForSelector("text=Changes saved.");
        expect((await stored(id)).client).toMatchObject({
          scope: "openid email",
          redirect_uris: ["https://shop.example.com/callback", "https://shop.example.com/callback2"],
          branding: { product_name: "Storefront Plus", primary_color: "#0f766e" },
        });
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "applications-app");

        await page.goto(`${base}/apps/${id}?lang=ar`);
        expect(await page.getAttribute("html", "dir")).toBe("rtl");
        expect(await page.getAttribute("#f-redirect_uris", "dir")).toBe("ltr");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "applications-app-ar");
        await page.goto(`${base}/apps/${id}?lang=en`);

        await page.getByRole("link", { name: "Make a new secret…" }).click();
        await page.waitForURL(`${base}/apps/${id}/rotate-secret`);
        expect(await blockingViolations(page)).toEqual([]);
        await page.getByRole("button", { name: "Make a new secret" }).click();
        await page.waitForSelector("#client-secret");
        const fresh = (await page.locator("#client-secret").textContent()) as string;
        expect(fresh).toMatch(/^kws_/);
        expect(fresh).not.toBe(secret);

        // Deleting, keyboard only: the link, the typed name, Enter.
        await page.goto(`${base}/apps/${id}`);
        await page.getByRole("link", { name: "Delete…" }).focus();
        await page.keyboard.press("Enter");
        await page.waitForURL(`${base}/apps/${id}/delete`);
        const typed = page.getByLabel(/To confirm, type the application's name/);
        await typed.focus();
        await page.keyboard.type("Storefront");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "applications-delete-confirm");
        await page.keyboard.press("Enter");
        await page.waitForSelector("text=The application was deleted.");
        expect((await stored(id)).status).toBe(404);
        expect(await page.locator("main").textContent()).not.toContain("Storefront");
        expect(cspErrors).toEqual([]);
      } finally {
        await context.close();
      }
    }, 180_000);
  });
}
