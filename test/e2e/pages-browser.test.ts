/// <reference lib="dom" />
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createE2ETenant, type E2EStack, startE2EStack } from "./support.js";

/**
 * The pages in a real browser (issue 26): Debian's Chromium driven by playwright-core through the
 * login (a wrong code, a resend after the countdown, "use another address", a code pasted with a
 * space), the device page and logout, in English and in Arabic (right to left). Every page is checked
 * by axe-core, which fails the test on any serious or critical violation, and by the browser's own
 * CSP reports (a blocked style or script fails it too). Screenshots are kept in test-artifacts/pages.
 * No Chromium is a failure, not a skip: .ci/run installs Debian's package.
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ARTIFACTS = join(process.cwd(), "test-artifacts", "pages");
const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

let stack: E2EStack;
let browser: Browser;
let assets: Server;
let assetOrigin: string;

/**
 * The tenant's own host for its logo (the page's CSP must name its origin) and the client's redirect
 * URI (loopback http, as a native app's would be).
 */
function startAssetServer(): Promise<Server> {
  const logo = `<svg xmlns="http://www.w3.org/2000/svg" width="120" height="32" viewBox="0 0 120 32"><rect width="32" height="32" rx="8" fill="#0b6e4f"/><text x="40" y="22" font-family="sans-serif" font-size="16" fill="#0b6e4f">ACME</text></svg>`;
  const server = createServer((req, res) => {
    if (req.url === "/logo.svg") res.writeHead(200, { "Content-Type": "image/svg+xml" }).end(logo);
    // The client's redirect URI: where the browser lands with its code.
    else if (req.url?.startsWith("/callback"))
      res.writeHead(200, { "Content-Type": "text/html" }).end("<!doctype html><title>RP</title><p>back at the RP");
    else res.writeHead(404).end();
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

async function admin(path: string, init: { method?: string; json?: unknown } = {}) {
  const res = await fetch(`${stack.url}/admin/v1${path}`, {
    method: init.method ?? "GET",
    headers: { Authorization: `Bearer ${stack.adminToken}`, "Content-Type": "application/json" },
    ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
  });
  expect(res.status, await res.clone().text()).toBeLessThan(300);
  return res.json() as Promise<Record<string, unknown>>;
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `Chromium is not at ${CHROMIUM}: install Debian's chromium package (.ci/run does) or set CHROMIUM_PATH`,
    );
  mkdirSync(ARTIFACTS, { recursive: true });
  assets = await startAssetServer();
  assetOrigin = `http://127.0.0.1:${(assets.address() as AddressInfo).port}`;
  stack = await startE2EStack();
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await stack?.dispose();
  await new Promise((r) => (assets ? assets.close(r) : r(undefined)));
}, 60_000);

/** A tenant with a brand and a client that signs people in, by browser and by device. */
async function brandedTenant(tag: string) {
  const tenant = await createE2ETenant(stack, tag);
  await admin(`/tenants/${tenant.id}`, {
    method: "PATCH",
    json: {
      name: "Acme",
      // The passkey offer after a code (issue 42) has its own test: passkeys-browser.test.ts.
      policy: { resend_interval_seconds: 10, passkey_offer: "off" },
      branding: {
        logo_uri: `${assetOrigin}/logo.svg`,
        primary_color: "#0b6e4f",
        support_uri: "mailto:help@acme.example",
      },
    },
  });
  const client = (await admin(`/tenants/${tenant.id}/clients`, {
    method: "POST",
    json: {
      client_name: "Acme Billing",
      redirect_uris: [`${assetOrigin}/callback`],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
    },
  })) as { client_id: string };
  return { ...tenant, clientId: client.client_id };
}

/** A page that records what the browser refused under the CSP. */
async function openPage(context: BrowserContext): Promise<{ page: Page; cspErrors: string[] }> {
  const page = await context.newPage();
  const cspErrors: string[] = [];
  page.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
  });
  return { page, cspErrors };
}

/** axe-core's serious and critical violations on the page as it is, as `id (impact): help at targets`. */
async function blockingViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(
    // biome-ignore lint/suspicious/noExplicitAny: axe is the script just evaluated in the page.
    () => (globalThis as any).axe.run(document, { resultTypes: ["violations"] }).then((r: any) => r.violations),
  )) as AxeViolation[];
  return violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
}

/** No serious or critical violation, nothing the CSP blocked; and a screenshot kept. */
async function audit(page: Page, name: string, cspErrors: string[]): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  expect(await blockingViolations(page), `${name}: axe-core`).toEqual([]);
  expect(cspErrors, `${name}: CSP`).toEqual([]);
}

async function latestCode(issuer: string, email: string): Promise<string> {
  const res = await fetch(`${issuer}/__dev/mailbox/${encodeURIComponent(email)}`);
  const { messages } = (await res.json()) as { messages: { code: string; subject: string }[] };
  expect(messages[0]?.code).toMatch(/^\d{6}$/);
  return messages[0]?.code as string;
}

/** The authorization request of a tenant's client, as its relying party would send the browser. */
function authorizationUrl(tenant: { issuer: string; clientId: string }, state: string): string {
  const url = new URL(`${tenant.issuer}/authorize`);
  for (const [k, v] of Object.entries({
    response_type: "code",
    client_id: tenant.clientId,
    redirect_uri: `${assetOrigin}/callback`,
    scope: "openid email",
    state,
    code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
    code_challenge_method: "S256",
  }))
    url.searchParams.set(k, v);
  return url.toString();
}

const LANGUAGES = [
  {
    lang: "en",
    dir: "ltr",
    locale: "en-US",
    heading: "Sign in to Acme Billing",
    wrongCode: "That code is not right",
    ready: "You can ask for a new code now.",
    sentAgain: "A new code is on its way.",
    deviceTitle: "Connect Acme Billing?",
    connected: "Device connected",
    signedOut: "Signed out",
  },
  {
    lang: "ar",
    dir: "rtl",
    locale: "ar-EG",
    heading: "تسجيل الدخول إلى Acme Billing",
    wrongCode: "هذا الرمز غير صحيح",
    ready: "يمكنك طلب رمز جديد الآن.",
    sentAgain: "رمز جديد في طريقه إليك.",
    deviceTitle: "ربط Acme Billing؟",
    connected: "تم ربط الجهاز",
    signedOut: "تم تسجيل الخروج",
  },
] as const;

describe("the pages in Chromium", () => {
  it("the audit can fail: a page without a language or a label has serious and critical violations", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    try {
      await page.setContent(
        "<!doctype html><html><head><title>x</title></head><body><main><input></main></body></html>",
      );
      const found = await blockingViolations(page);
      expect(found.some((v) => v.startsWith("html-has-lang (serious)"))).toBe(true);
      expect(found.some((v) => v.startsWith("label (critical)"))).toBe(true);
    } finally {
      await context.close();
    }
  }, 60_000);

  it("the CSP check can fail: an inline style attribute the page's policy blocks is reported", async () => {
    const context = await browser.newContext();
    const { page, cspErrors } = await openPage(context);
    try {
      await page.route("http://csp-self-check.test/", (route) =>
        route.fulfill({
          status: 200,
          headers: { "Content-Type": "text/html", "Content-Security-Policy": "style-src 'nonce-x'" },
          body: '<!doctype html><html lang="en"><title>x</title><main><p style="color:red">x</p></main></html>',
        }),
      );
      await page.goto("http://csp-self-check.test/");
      await page.waitForFunction(() => true);
      expect(cspErrors.join("\n")).toMatch(/Content Security Policy/);
    } finally {
      await context.close();
    }
  }, 60_000);

  it("signs in with JavaScript turned off: the forms alone do it", async () => {
    const tenant = await brandedTenant("pages-nojs");
    const context = await browser.newContext({ javaScriptEnabled: false });
    const { page, cspErrors } = await openPage(context);
    try {
      await page.goto(authorizationUrl(tenant, "st-nojs"));
      const email = `nojs.${Date.now()}@example.com`;
      await page.fill("#email", email);
      await page.click("button[type=submit]");
      await page.waitForSelector("#code");
      // Without the script the button is not held back; the text still says when it will work.
      expect(await page.locator("#resend").isDisabled()).toBe(false);
      await page.fill("#code", await latestCode(tenant.issuer, email));
      await Promise.all([
        page.waitForURL((u) => u.origin === assetOrigin),
        page.click("form[action$='/email-code/verify'] button"),
      ]);
      expect(new URL(page.url()).searchParams.get("state")).toBe("st-nojs");
      expect(cspErrors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);

  it("picks an organization (issue 24): a page listing the person's organizations, accessible, that ends the login", async () => {
    const tenant = await brandedTenant("pages-org");
    const email = `org.${Date.now()}@example.com`;
    const user = (await admin(`/tenants/${tenant.id}/users`, { method: "POST", json: { email } })) as { id: string };
    const orgs = [];
    for (const name of ["Acme Europe", "Acme Americas"]) {
      const org = (await admin(`/tenants/${tenant.id}/organizations`, { method: "POST", json: { name } })) as {
        id: string;
      };
      await admin(`/tenants/${tenant.id}/organizations/${org.id}/members`, {
        method: "POST",
        json: { user_id: user.id, roles: ["member"] },
      });
      orgs.push(org);
    }
    await admin(`/tenants/${tenant.id}/clients/${tenant.clientId}`, {
      method: "PATCH",
      json: { token_claims: { organization: "required" } },
    });
    // The page has no script of its own (its choices are a GET form); the audit runs axe in it.
    const context = await browser.newContext({ locale: "fr-FR" });
    const { page, cspErrors } = await openPage(context);
    try {
      await page.goto(authorizationUrl(tenant, "st-org"));
      await page.fill("#email", email);
      await page.click("button[type=submit]");
      await page.waitForSelector("#code");
      await page.fill("#code", await latestCode(tenant.issuer, email));
      await page.click("form[action$='/email-code/verify'] button");
      await page.waitForSelector("ul.choices button");
      expect(await page.locator("h1").textContent()).toBe("Choisissez une organisation");
      expect(await page.locator("ul.choices button").allTextContents()).toEqual(["Acme Americas", "Acme Europe"]);
      await audit(page, "org-picker", cspErrors);
      await Promise.all([
        page.waitForURL((u) => u.origin === assetOrigin),
        page.click(`button[value="${orgs[0]?.id}"]`),
      ]);
      const back = new URL(page.url());
      expect(back.searchParams.get("state")).toBe("st-org");
      expect(back.searchParams.get("code")).toBeTruthy();
    } finally {
      await context.close();
    }
  }, 60_000);

  for (const L of LANGUAGES) {
    it(`${L.lang}: sign in with a wrong code, a resend, another address and a pasted code; connect a device; sign out`, async () => {
      const tenant = await brandedTenant(`pages-${L.lang}`);
      const context = await browser.newContext({ locale: L.locale });
      const { page, cspErrors } = await openPage(context);
      const name = (step: string) => `${L.lang}-${step}`;
      try {
        // 1. The authorization request: the address page, branded, in the browser's language.
        await page.goto(authorizationUrl(tenant, "st-browser"));
        expect(await page.locator("html").getAttribute("lang")).toBe(L.lang);
        expect(await page.locator("html").getAttribute("dir")).toBe(L.dir);
        expect(await page.locator("h1").textContent()).toBe(L.heading);
        // The logo came from the tenant's host, allowed by the CSP's img-src.
        expect(await page.locator(".brand img").evaluate((img: HTMLImageElement) => img.naturalWidth)).toBeGreaterThan(
          0,
        );
        expect(await page.evaluate(() => document.activeElement?.id)).toBe("email");
        await audit(page, name("1-email"), cspErrors);

        // 2. A mistyped address, then the code page with its countdown.
        const typo = `ada.${L.lang}.${Date.now()}@exmaple.com`;
        await page.fill("#email", typo);
        await page.click("button[type=submit]");
        await page.waitForSelector("#code");
        expect(await page.locator("#resend").isDisabled()).toBe(true);
        const first = await page.locator("#resend-time").textContent();
        await page.waitForFunction((t) => document.getElementById("resend-time")?.textContent !== t, first, {
          timeout: 5_000,
        });
        expect(await page.evaluate(() => document.activeElement?.id)).toBe("code");
        await audit(page, name("2-code"), cspErrors);

        // 3. A wrong code: the message says so, the field is marked and focused.
        await page.fill("#code", "000000");
        await page.click("form[action$='/email-code/verify'] button");
        await page.waitForSelector("#msg [role=alert]");
        expect(await page.locator("#msg").textContent()).toContain(L.wrongCode);
        expect(await page.locator("#code").getAttribute("aria-invalid")).toBe("true");
        expect(await page.evaluate(() => document.activeElement?.id)).toBe("code");
        await audit(page, name("3-wrong-code"), cspErrors);

        // 4. The countdown ends without a request: the button is enabled and the region says so; a resend.
        await page.waitForFunction(() => !(document.getElementById("resend") as HTMLButtonElement).disabled, null, {
          timeout: 15_000,
        });
        expect(await page.locator("#msg").textContent()).toContain(L.ready);
        await page.click("#resend");
        await page.waitForSelector("#msg .info");
        expect(await page.locator("#msg").textContent()).toContain(L.sentAgain);
        await audit(page, name("4-resent"), cspErrors);

        // 5. "Use another address": the address page again, with the typo to fix, for the same request.
        await page.click("form[action$='/email-code/restart'] button");
        await page.waitForSelector("#email");
        expect(await page.inputValue("#email")).toBe(typo);
        await audit(page, name("5-another-address"), cspErrors);
        const email = typo.replace("@exmaple.com", "@example.com");
        await page.fill("#email", email);
        await page.click("button[type=submit]");
        await page.waitForSelector("#code");

        // 6. The code pasted as the mail might show it, with a space: back at the client with a code.
        const code = await latestCode(tenant.issuer, email);
        await page.fill("#code", `${code.slice(0, 3)} ${code.slice(3)}`);
        await Promise.all([
          page.waitForURL((u) => u.origin === assetOrigin),
          page.click("form[action$='/email-code/verify'] button"),
        ]);
        const back = new URL(page.url());
        expect(back.searchParams.get("state")).toBe("st-browser");
        expect(back.searchParams.get("code")).toBeTruthy();
        expect(cspErrors).toEqual([]);

        // 7. A device asks; the person, signed in, types its code on the device page and allows it.
        const started = await fetch(`${tenant.issuer}/device_authorization`, {
          method: "POST",
          headers: { "Content-Type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ client_id: tenant.clientId, scope: "openid email" }),
        });
        expect(started.status).toBe(200);
        const { user_code } = (await started.json()) as { user_code: string };
        await page.goto(`${tenant.issuer}/device`);
        expect(await page.locator("html").getAttribute("dir")).toBe(L.dir);
        await audit(page, name("6-device-code"), cspErrors);
        await page.fill("#user_code", user_code);
        await page.click("button[type=submit]");
        await page.waitForSelector("form[action$='/device/decision']");
        expect(await page.locator("h1").textContent()).toBe(L.deviceTitle);
        await audit(page, name("7-device-consent"), cspErrors);
        await page.locator("button.primary").click();
        await page.waitForSelector("h1");
        expect(await page.locator("h1").textContent()).toBe(L.connected);
        await audit(page, name("8-device-connected"), cspErrors);

        // 8. Sign out: the session ends here, in the same language.
        await page.goto(`${tenant.issuer}/logout`);
        expect(await page.locator("h1").textContent()).toBe(L.signedOut);
        await audit(page, name("9-signed-out"), cspErrors);
      } finally {
        await context.close();
      }
    }, 120_000);
  }
});
