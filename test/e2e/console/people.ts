/// <reference lib="dom" />
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { createE2ETenant } from "../support.js";
import { adminApi, blockingViolations, type ConsoleE2E, operatorPage, screenshot } from "./support.js";

/**
 * The console's people, organizations and audit trail in Chromium (issue 43): each page's main task
 * done by keyboard-reachable forms without script, axe clean, screenshots in test-artifacts/console/.
 */
export function peopleSuite(ctx: ConsoleE2E): void {
  const url = () => ctx.stack.url;
  const stamp = () => `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;

  async function person(tenant: string, email: string, name?: string): Promise<{ id: string; email: string }> {
    const res = await adminApi(ctx.stack, "POST", `/tenants/${tenant}/users`, { email, ...(name ? { name } : {}) });
    expect(res.status, await res.clone().text()).toBe(201);
    return (await res.json()) as { id: string; email: string };
  }

  describe("the console's people, organizations and audit trail", () => {
    it("an operator finds a person, ends their sessions after confirming, and imports a file with its errors by line", async () => {
      const tenant = await createE2ETenant(ctx.stack, "people");
      const who = await person(tenant.id, `ada.${stamp()}@example.com`, "Ada Lovelace");
      const { page, context, cspErrors } = await operatorPage(ctx, {
        email: `people-op.${stamp()}@example.com`,
        tenant: tenant.id,
      });
      try {
        await page.goto(`${url()}/console/t/${tenant.id}/people`);
        expect(await blockingViolations(page)).toEqual([]);
        await page.getByLabel("Address or user id").fill(who.email.toUpperCase());
        await page.getByRole("button", { name: "Find" }).click();
        await page.getByRole("link", { name: who.email }).click();
        await expect.poll(() => page.locator("h1").textContent()).toBe(who.email);
        expect(await page.locator("main").textContent()).toContain("Ada Lovelace");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "people-person");

        await page.getByRole("button", { name: "End every session…" }).click();
        await page.waitForURL((u) => u.pathname.endsWith("/revoke"));
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "people-revoke-confirm");
        await page.getByRole("button", { name: "End every session" }).click();
        await page.getByText("Every session and token of this person has ended.").waitFor();
        const stored = (await (await adminApi(ctx.stack, "GET", `/tenants/${tenant.id}/users/${who.id}`)).json()) as {
          revoked_at: number | null;
        };
        expect(stored.revoked_at).toEqual(expect.any(Number));

        await page.goto(`${url()}/console/t/${tenant.id}/people`);
        await page.getByRole("link", { name: "Import people from a file" }).click();
        expect(await blockingViolations(page)).toEqual([]);
        const fresh = [`grace.${stamp()}@example.com`, `alan.${stamp()}@example.com`];
        const file = [
          JSON.stringify({ email: fresh[0], name: "Grace Hopper" }),
          "{not json",
          JSON.stringify({ email: fresh[1] }),
          JSON.stringify({ email: "nobody at all" }),
        ].join("\n");
        await page.getByLabel("NDJSON file").setInputFiles({
          name: "people.ndjson",
          mimeType: "application/x-ndjson",
          buffer: Buffer.from(file),
        });
        await page.getByRole("button", { name: "Import", exact: true }).click();
        await page.waitForURL((u) => /\/people\/import\/imp_/.test(u.pathname));
        await page.getByText("The import has finished.").waitFor();
        const errors = page.locator("section[aria-labelledby=errors] tbody tr");
        expect(await errors.count()).toBe(2);
        expect(await errors.nth(0).textContent()).toContain("not a JSON record");
        expect(await errors.nth(1).textContent()).toContain("email: not a valid address");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "people-import-job");
        for (const email of fresh) {
          const res = await adminApi(
            ctx.stack,
            "GET",
            `/tenants/${tenant.id}/users?email=${encodeURIComponent(email as string)}`,
          );
          expect(((await res.json()) as { users: unknown[] }).users, email).toHaveLength(1);
        }
        expect(cspErrors).toEqual([]);
      } finally {
        await context.close();
      }
    }, 180_000);

    it("an operator creates an organization, adds a member by address and changes their roles; in Arabic too", async () => {
      const tenant = await createE2ETenant(ctx.stack, "orgs");
      const who = await person(tenant.id, `member.${stamp()}@example.com`);
      const { page, context, cspErrors } = await operatorPage(ctx, {
        email: `orgs-op.${stamp()}@example.com`,
        tenant: tenant.id,
      });
      try {
        await page.goto(`${url()}/console/t/${tenant.id}/orgs`);
        await page.getByLabel("Name").fill("Acme Widgets");
        await page.getByRole("button", { name: "Create" }).click();
        await page.getByText("The organization was created.").waitFor();
        const orgUrl = page.url().split("?")[0] as string;
        const orgId = orgUrl.split("/").at(-1) as string;
        await page.getByLabel("Address or user id").fill(who.email);
        await page.locator("#member-roles").fill("admin, billing");
        await page.getByRole("button", { name: "Add", exact: true }).click();
        await page.getByText("The member was added.").waitFor();
        expect(await page.locator("main").textContent()).toContain(who.email);
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "orgs-organization");

        // A role template: the organization type's.
        await page.goto(`${url()}/console/t/${tenant.id}/orgs/roles`);
        await page.getByLabel("Role name").fill("editor");
        await page.getByLabel("Permissions (optional)").fill("docs:read docs:write");
        await page.getByRole("button", { name: "Save the role" }).click();
        await page.getByText("The role was saved.").waitFor();
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "orgs-role-template");

        // The member's roles now as boxes: the template's, and those held from before.
        await page.goto(orgUrl);
        const roles = page.getByRole("group", { name: `Roles of ${who.email}` });
        await roles.getByLabel("editor").check();
        await roles.getByLabel("admin").uncheck();
        await roles.getByLabel("billing").uncheck();
        await page.getByRole("button", { name: "Save roles" }).click();
        await page.getByText("The roles were saved.").waitFor();
        const members = (await (
          await adminApi(ctx.stack, "GET", `/tenants/${tenant.id}/organizations/${orgId}/members`)
        ).json()) as {
          members: { user_id: string; roles: string[] }[];
        };
        expect(members.members).toEqual([expect.objectContaining({ user_id: who.id, roles: ["editor"] })]);

        await page.goto(`${orgUrl}?lang=ar`);
        expect(await page.getAttribute("html", "dir")).toBe("rtl");
        expect(await page.locator("h2#members").textContent()).toBe("الأعضاء");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "orgs-organization-ar");
        await page.goto(`${url()}/console/t/${tenant.id}/people?lang=ar`);
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "people-ar");
        await page.goto(`${url()}/console/t/${tenant.id}/orgs?lang=en`);
        expect(cspErrors).toEqual([]);
      } finally {
        await context.close();
      }
    }, 180_000);

    it("an operator filters the audit trail by person and event, pages it, and downloads it as CSV", async () => {
      const tenant = await createE2ETenant(ctx.stack, "audit");
      const who = await person(tenant.id, `audited.${stamp()}@example.com`);
      // Admin changes are events of the tenant's trail, flushed to D1 a few seconds later.
      await adminApi(ctx.stack, "PATCH", `/tenants/${tenant.id}/users/${who.id}`, { name: "Audited Person" });
      await adminApi(ctx.stack, "POST", `/tenants/${tenant.id}/users/${who.id}/revoke`);
      await expect
        .poll(
          async () =>
            (
              (await (await adminApi(ctx.stack, "GET", `/tenants/${tenant.id}/audit?kind=admin_change`)).json()) as {
                events: unknown[];
              }
            ).events.length,
          { timeout: 60_000, interval: 1_000 },
        )
        .toBeGreaterThanOrEqual(3);
      const { page, context, cspErrors } = await operatorPage(ctx, {
        email: `audit-op.${stamp()}@example.com`,
        tenant: tenant.id,
      });
      try {
        await page.goto(`${url()}/console/t/${tenant.id}/audit`);
        await page.getByLabel("Event", { exact: true }).selectOption("admin_change");
        await page.getByRole("button", { name: "Show" }).click();
        await page.waitForURL((u) => u.searchParams.get("kind") === "admin_change");
        const rows = page.locator("section[aria-labelledby=events] tbody tr");
        expect(await rows.count()).toBeGreaterThanOrEqual(3);
        expect(await rows.first().textContent()).toContain("Admin change");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "audit");

        const download = page.waitForEvent("download");
        await page.getByRole("link", { name: "Download as CSV" }).click();
        const file = await download;
        expect(file.suggestedFilename()).toMatch(new RegExp(`^audit-${tenant.id}-\\d{8}-\\d{4}\\.csv$`));
        const csv = readFileSync((await file.path()) as string, "utf8")
          .split("\r\n")
          .filter(Boolean);
        expect(csv[0]).toBe("id,at,kind,user_id,email_key,client_id,ip,detail");
        expect(csv.length - 1).toBe(await rows.count());
        expect(csv.slice(1).every((r) => r.includes(",admin_change,"))).toBe(true);
        expect(cspErrors).toEqual([]);
      } finally {
        await context.close();
      }
    }, 180_000);
  });
}
