/// <reference lib="dom" />
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createE2ETenant, type E2EStack, startE2EStack } from "./support.js";

/**
 * The operators' web console in Chromium (issue 43): an operator granted through the admin API signs
 * in at /console with the code from the dev mailbox and finds the tenants by name; axe-core finds no
 * serious or critical violation and the CSP blocks nothing. An address without a grant sees no tenant.
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

let stack: E2EStack;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium is not at ${CHROMIUM}: install Debian's chromium package`);
  // The deployment's defaults: after a first code the login offers a passkey (issue 42), declined here.
  stack = await startE2EStack();
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await stack?.dispose();
}, 60_000);

async function grant(json: Record<string, unknown>) {
  const res = await fetch(`${stack.url}/admin/v1/operators`, {
    method: "POST",
    headers: { Authorization: `Bearer ${stack.adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify(json),
  });
  expect(res.status, await res.clone().text()).toBe(201);
}

async function blockingViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(
    // biome-ignore lint/suspicious/noExplicitAny: axe is the script just evaluated in the page.
    () => (globalThis as any).axe.run(document, { resultTypes: ["violations"] }).then((r: any) => r.violations),
  )) as { id: string; impact: string | null; help: string }[];
  return violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help}`);
}

/** /console → Keyway's own login page → the code from the dev mailbox → back at /console. */
async function signIn(page: Page, email: string): Promise<void> {
  await page.goto(`${stack.url}/console`);
  await page.fill("#email", email);
  await page.click("button[type=submit]");
  await page.waitForSelector("#code");
  const res = await fetch(`${stack.url}/__dev/mailbox/${encodeURIComponent(email)}`);
  const { messages } = (await res.json()) as { messages: { code: string }[] };
  await page.fill("#code", messages[0]?.code as string);
  await page.click("form[action$='/email-code/verify'] button[type=submit]");
  const notNow = page.getByRole("button", { name: "Not now" });
  await Promise.race([page.waitForURL((u) => u.pathname === "/console"), notNow.waitFor()]);
  if (new URL(page.url()).pathname !== "/console")
    await Promise.all([page.waitForURL((u) => u.pathname === "/console"), notNow.click()]);
}

describe("the console in Chromium", () => {
  it("an operator finds the tenants by name, axe clean; an address without a grant sees none", async () => {
    const tenant = await createE2ETenant(stack, "console");
    const email = `operator.${Date.now()}@example.com`;
    await grant({ email });
    const context = await browser.newContext();
    const page = await context.newPage();
    const cspErrors: string[] = [];
    page.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
    });
    try {
      await signIn(page, email);
      await expect.poll(() => page.locator("main").textContent()).toContain(`E2E console`);
      expect(await page.locator("main").textContent()).toContain(tenant.id);
      expect(await page.locator("h1").count()).toBe(1);
      expect(await blockingViolations(page)).toEqual([]);
      expect(cspErrors).toEqual([]);
      await page.click("nav button[type=submit]");
      await page.waitForSelector("text=You have signed out");
      expect(await blockingViolations(page)).toEqual([]);
    } finally {
      await context.close();
    }

    const stranger = await browser.newContext();
    const other = await stranger.newPage();
    try {
      await signIn(other, `stranger.${Date.now()}@example.com`);
      const text = (await other.locator("main").textContent()) ?? "";
      expect(text).toContain("no access");
      expect(text).not.toContain(tenant.id);
      expect(text).not.toContain("E2E console");
      expect(await blockingViolations(other)).toEqual([]);
    } finally {
      await stranger.close();
    }
  }, 120_000);
});
