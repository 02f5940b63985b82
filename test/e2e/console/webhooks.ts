import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, describe, expect, it } from "vitest";
import { createE2ETenant } from "../support.js";
import { adminApi, blockingViolations, type ConsoleE2E, operatorPage, screenshot } from "./support.js";

/**
 * The webhooks pages in Chromium (issue 43): a tenant operator adds an endpoint (its secret shown
 * once), sends a test event and watches the delivery log (the receiver below refuses the first try,
 * then accepts), replays the delivered message, makes a new secret with an overlap, disables and
 * enables the endpoint, and deletes it; axe clean in English and Arabic, no CSP report. The receiver
 * is a small node:http server on a free port, as test/e2e/webhooks-restart.test.ts has.
 */
export function webhooksSuite(ctx: ConsoleE2E): void {
  let receiver: Server | undefined;
  afterAll(async () => {
    await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
  });

  describe("console webhooks in Chromium", () => {
    it("adds an endpoint, sends a test event, reads the delivery log, replays, rotates, disables, deletes", async () => {
      const deliveries: { id: string; body: string; headers: Record<string, string> }[] = [];
      let requests = 0;
      receiver = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          // The first try is refused, so the log shows a failed attempt and then its retry.
          if (++requests === 1) return void res.writeHead(500).end();
          deliveries.push({
            id: String(req.headers["webhook-id"]),
            body: Buffer.concat(chunks).toString("utf8"),
            headers: {
              "webhook-id": String(req.headers["webhook-id"]),
              "webhook-timestamp": String(req.headers["webhook-timestamp"]),
              "webhook-signature": String(req.headers["webhook-signature"]),
            },
          });
          res.writeHead(200).end();
        });
      });
      await new Promise<void>((r) => receiver?.listen(0, "127.0.0.1", () => r()));
      const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;

      const tenant = await createE2ETenant(ctx.stack, "hooks");
      const { page, context, cspErrors } = await operatorPage(ctx, {
        email: `hooks.${Date.now()}@example.com`,
        tenant: tenant.id,
      });
      const base = `${ctx.stack.url}/console/t/${tenant.id}/webhooks`;
      const stored = async (id: string) => {
        const res = await adminApi(ctx.stack, "GET", `/tenants/${tenant.id}/webhooks/${id}`);
        return { status: res.status, hook: (await res.json()) as Record<string, unknown> };
      };
      try {
        await page.goto(base);
        expect(await page.locator("h1").textContent()).toBe("Webhooks");
        await page.getByLabel("URL").fill(hookUrl);
        await page.getByLabel("Description").fill("Billing receiver");
        await page.getByLabel("webhook.test").check();
        await page.getByLabel("user.created").check();
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "webhooks-list");
        await page.getByRole("button", { name: "Add the endpoint" }).click();
        await page.waitForSelector("#signing-secret");
        const secret = (await page.locator("#signing-secret").textContent()) as string;
        expect(secret).toMatch(/^whsec_/);
        expect(page.url()).not.toContain(secret);
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "webhooks-added");
        await page.getByRole("link", { name: "Go to the endpoint" }).click();
        await page.waitForURL(/\/webhooks\/kwh_/);
        const id = new URL(page.url()).pathname.split("/").at(-1) as string;
        const here = `${base}/${id}`;
        expect((await stored(id)).hook).toMatchObject({ url: hookUrl, events: ["user.created", "webhook.test"] });

        await page.getByRole("button", { name: "Send a test event" }).click();
        await page.waitForSelector("text=A test event was queued.");
        // The first try refused (500), its retry about 5 s later accepted (200): both in the log.
        await expect
          .poll(
            async () => {
              await page.goto(`${here}?status=delivered`);
              return page
                .locator("table.attempts")
                .textContent()
                .catch(() => "");
            },
            { timeout: 40_000, interval: 1_000 },
          )
          .toMatch(/200[\s\S]*500/);
        expect(deliveries).toHaveLength(1);
        const event = new Webhook(secret).verify(deliveries[0]?.body as string, deliveries[0]?.headers ?? {}) as {
          type: string;
        };
        expect(event.type).toBe("webhook.test");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "webhooks-endpoint");

        // Replay the delivered message from its row.
        await page.getByRole("button", { name: /^Replay msg_/ }).click();
        await page.waitForSelector("text=Queued again");
        await expect.poll(() => deliveries.length, { timeout: 30_000, interval: 500 }).toBe(2);
        expect(deliveries[1]?.id).toBe(deliveries[0]?.id);

        await page.goto(`${here}?lang=ar`);
        expect(await page.getAttribute("html", "dir")).toBe("rtl");
        expect(await blockingViolations(page)).toEqual([]);
        await screenshot(page, "webhooks-endpoint-ar");
        await page.goto(`${here}?lang=en`);

        await page.getByRole("link", { name: "Make a new secret…" }).click();
        await page.getByLabel("The old secret also signs for").selectOption("3600");
        expect(await blockingViolations(page)).toEqual([]);
        await page.getByRole("button", { name: "Make a new secret" }).click();
        await page.waitForSelector("#signing-secret");
        const fresh = (await page.locator("#signing-secret").textContent()) as string;
        expect(fresh).not.toBe(secret);
        expect((await stored(id)).hook.secret_rotation_ends).not.toBeNull();

        await page.goto(here);
        await page.getByRole("link", { name: "Disable…" }).click();
        await page.getByRole("button", { name: "Disable the endpoint" }).click();
        await page.waitForSelector("text=The endpoint is disabled.");
        expect((await stored(id)).hook.enabled).toBe(false);
        await page.getByRole("button", { name: "Enable", exact: true }).click();
        await page.waitForSelector("text=The endpoint is enabled.");
        expect((await stored(id)).hook.enabled).toBe(true);

        await page.getByRole("link", { name: "Delete…" }).click();
        expect(await blockingViolations(page)).toEqual([]);
        await page.getByRole("button", { name: "Delete the endpoint" }).click();
        await page.waitForSelector("text=The endpoint was deleted.");
        expect((await stored(id)).status).toBe(404);
        expect(cspErrors).toEqual([]);
      } finally {
        await context.close();
      }
    }, 180_000);
  });
}
