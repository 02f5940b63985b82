/// <reference lib="dom" />
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { expect } from "vitest";
import type { E2EStack } from "../support.js";

/**
 * What the console's Chromium suites share (test/e2e/console-browser.test.ts runs them all against
 * one stack and one Chromium): the operator's sign-in with the dev mailbox's code, axe, screenshots.
 */
export interface ConsoleE2E {
  stack: E2EStack;
  browser: Browser;
}

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const ARTIFACTS = "test-artifacts/console";

/** A grant through the admin API (CONTRACT §11): the whole deployment, or one tenant. */
export async function grant(stack: E2EStack, json: { email: string; tenant?: string }): Promise<void> {
  const res = await fetch(`${stack.url}/admin/v1/operators`, {
    method: "POST",
    headers: { Authorization: `Bearer ${stack.adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify(json),
  });
  expect(res.status, await res.clone().text()).toBe(201);
}

/** An admin API call with the platform token, for a suite's set-up and its checks of stored state. */
export async function adminApi(stack: E2EStack, method: string, path: string, json?: unknown): Promise<Response> {
  return fetch(`${stack.url}/admin/v1${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${stack.adminToken}`,
      ...(json === undefined ? {} : { "Content-Type": "application/json" }),
    },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
  });
}

/** axe-core's serious and critical violations on the page as it is now. */
export async function blockingViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(
    // biome-ignore lint/suspicious/noExplicitAny: axe is the script just evaluated in the page.
    () => (globalThis as any).axe.run(document, { resultTypes: ["violations"] }).then((r: any) => r.violations),
  )) as { id: string; impact: string | null; help: string; nodes: { target: string[] }[] }[];
  return violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
}

/** A full-page screenshot into test-artifacts/console/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage: true });
}

/** /console → Keyway's own login page → the code from the dev mailbox → back at /console. */
export async function signIn(stack: E2EStack, page: Page, email: string): Promise<void> {
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

/**
 * A signed-in operator's page in a fresh browser context that records CSP violations; `done` closes
 * it. A suite asserts `cspErrors` is empty after its task.
 */
export async function operatorPage(
  ctx: ConsoleE2E,
  o: { email: string; tenant?: string },
): Promise<{ page: Page; context: BrowserContext; cspErrors: string[] }> {
  await grant(ctx.stack, o.tenant ? { email: o.email, tenant: o.tenant } : { email: o.email });
  const context = await ctx.browser.newContext();
  const page = await context.newPage();
  const cspErrors: string[] = [];
  page.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
  });
  await signIn(ctx.stack, page, o.email);
  return { page, context, cspErrors };
}
