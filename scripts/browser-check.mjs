// Signs in to the demo app with a real (headless) Chromium, the way a person would: /demo, "Sign in
// with Keyway", email, code from the dev mailbox, and back on the demo's claims page.
//
// playwright-core is deliberately not a dependency of the repo; install it anywhere and point here:
//   npm install --prefix /tmp/pw playwright-core
//   PLAYWRIGHT_CORE=/tmp/pw/node_modules/playwright-core node scripts/browser-check.mjs
// Environment: BASE (default http://127.0.0.1:${PORT:-8787}), CHROMIUM (default /usr/bin/chromium),
// SCREENSHOT (default /tmp/keyway-demo.png).
import { createRequire } from "node:module";
import { issuerFor, parsePort } from "./lib/local.mjs";

const base = process.env.BASE ?? issuerFor(parsePort(process.env.PORT));
const screenshot = process.env.SCREENSHOT ?? "/tmp/keyway-demo.png";
const playwrightPath = process.env.PLAYWRIGHT_CORE;
if (!playwrightPath) {
  console.error("Set PLAYWRIGHT_CORE to an installed playwright-core package directory.");
  process.exit(2);
}
/** @type {any} playwright-core's API; its types are not available to this repo. */
const { chromium } = createRequire(import.meta.url)(playwrightPath);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
try {
  const email = `browser.${Date.now().toString(36)}@example.com`;

  await page.goto(`${base}/demo`);
  await page.getByRole("link", { name: "Sign in with Keyway" }).click();

  // Keyway's login page (op-auth): email first.
  await page.waitForSelector('input[name="email"]', { timeout: 10_000 });
  console.log(`login page: ${page.url()}`);
  await page.fill('input[name="email"]', email);
  await page.click('button[type="submit"]');

  // Then the code, which the dev mailbox transport keeps for us.
  await page.waitForSelector('input[name="code"]', { timeout: 10_000 });
  const mailbox = await fetch(`${base}/__dev/mailbox/${encodeURIComponent(email)}`);
  const { messages } = /** @type {{ messages: { code: string }[] }} */ (await mailbox.json());
  const code = messages[0]?.code;
  if (!code) throw new Error(`no code in the dev mailbox for ${email}`);
  await page.fill('input[name="code"]', code);
  await page.getByRole("button", { name: "Sign in" }).click();

  // 303 to the authorization endpoint, 302 to /demo/callback, which renders the claims.
  await page.waitForSelector("#claims", { timeout: 10_000 });
  const claims = JSON.parse(await page.textContent("#claims"));
  const userinfo = JSON.parse(await page.textContent("#userinfo"));
  await page.screenshot({ path: screenshot, fullPage: true });
  if (claims.email !== email || userinfo.email !== email) throw new Error("the claims page shows someone else");
  console.log(`signed in as ${email}; ended on ${page.url()} ("${await page.title()}")`);
  console.log(`ID token claims: ${JSON.stringify(claims)}`);
  console.log(`userinfo: ${JSON.stringify(userinfo)}`);
  console.log(`screenshot: ${screenshot}`);

  // RP-initiated logout lands back on the demo's home page.
  await page.getByRole("link", { name: "Sign out" }).click();
  await page.waitForURL(`${base}/demo`, { timeout: 10_000 });
  console.log(`signed out; back on ${page.url()}`);
} catch (err) {
  // Keep the evidence: where the browser was and what it showed.
  const failed = screenshot.replace(/(\.png)?$/, "-failed.png");
  await page.screenshot({ path: failed, fullPage: true }).catch(() => {});
  console.error(`failed on ${page.url()}: ${(await page.textContent("body").catch(() => ""))?.trim().slice(0, 500)}`);
  console.error(`screenshot of the failure: ${failed}`);
  throw err;
} finally {
  await browser.close();
}
