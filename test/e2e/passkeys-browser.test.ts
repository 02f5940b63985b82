/// <reference lib="dom" />
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { type Browser, type BrowserContext, type CDPSession, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createE2ETenant, type E2EStack, startE2EStack } from "./support.js";

/**
 * Passkeys in a real browser (issue 42): Debian's Chromium with a virtual authenticator (the DevTools
 * protocol's `WebAuthn.addVirtualAuthenticator`: CTAP2, internal, resident keys, user verification),
 * against the built Workers on an issuer at `localhost` (WebAuthn takes a domain as RP id, never an
 * IP address). In English and Arabic: enrol after a code, sign in with no mail, a second passkey on
 * a second device, a removed passkey refused, another tenant refused. Each page is checked by axe-core
 * and the CSP, as the other pages are (pages-browser.test.ts).
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ARTIFACTS = join(process.cwd(), "test-artifacts", "pages");
const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
/** The PKCE verifier of every authorization request below, and its S256 challenge. */
const VERIFIER = randomBytes(32).toString("base64url");
const CHALLENGE = createHash("sha256").update(VERIFIER).digest("base64url");

let stack: E2EStack;
let browser: Browser;
let callbacks: Server;
let rpOrigin: string;

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  callbacks = createServer((req, res) => {
    if (req.url?.startsWith("/callback"))
      res.writeHead(200, { "Content-Type": "text/html" }).end("<!doctype html><title>RP</title><p>back at the RP");
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => callbacks.listen(0, "127.0.0.1", () => resolve()));
  rpOrigin = `http://127.0.0.1:${(callbacks.address() as AddressInfo).port}`;
  stack = await startE2EStack({}, { localhost: true });
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
  await new Promise((r) => (callbacks ? callbacks.close(r) : r(undefined)));
}, 60_000);

async function admin(path: string, init: { method?: string; json?: unknown } = {}): Promise<Response> {
  return fetch(`${stack.url}/admin/v1${path}`, {
    method: init.method ?? "GET",
    headers: { Authorization: `Bearer ${stack.adminToken}`, "Content-Type": "application/json" },
    ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
  });
}

async function tenantWithClient(tag: string) {
  const tenant = await createE2ETenant(stack, tag);
  // A second code for the address (the second device) 10 s after the first, not 60.
  const patched = await admin(`/tenants/${tenant.id}`, {
    method: "PATCH",
    json: { policy: { resend_interval_seconds: 10 } },
  });
  expect(patched.status, await patched.clone().text()).toBe(200);
  const res = await admin(`/tenants/${tenant.id}/clients`, {
    method: "POST",
    json: { client_name: "Acme Notes", redirect_uris: [`${rpOrigin}/callback`], token_endpoint_auth_method: "none" },
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return { ...tenant, clientId: ((await res.json()) as { client_id: string }).client_id };
}

function authorizationUrl(t: { issuer: string; clientId: string }, state: string, prompt?: string): string {
  const url = new URL(`${t.issuer}/authorize`);
  for (const [k, v] of Object.entries({
    response_type: "code",
    client_id: t.clientId,
    redirect_uri: `${rpOrigin}/callback`,
    scope: "openid email",
    state,
    code_challenge: CHALLENGE,
    code_challenge_method: "S256",
    ...(prompt ? { prompt } : {}),
  }))
    url.searchParams.set(k, v);
  return url.toString();
}

async function mails(issuer: string, email: string): Promise<{ code: string }[]> {
  const res = await fetch(`${issuer}/__dev/mailbox/${encodeURIComponent(email)}`);
  return ((await res.json()) as { messages: { code: string }[] }).messages;
}

/** The code at the client's redirect, redeemed: the ID token's claims. */
async function redeem(t: { issuer: string; clientId: string }, callback: string): Promise<Record<string, unknown>> {
  const code = new URL(callback).searchParams.get("code");
  expect(code).toBeTruthy();
  const res = await fetch(`${t.issuer}/token`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: code as string,
      redirect_uri: `${rpOrigin}/callback`,
      client_id: t.clientId,
      code_verifier: VERIFIER,
    }),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  const { id_token } = (await res.json()) as { id_token: string };
  return JSON.parse(Buffer.from(id_token.split(".")[1] as string, "base64url").toString());
}

/** A browser profile on a device with a platform authenticator that verifies its user. */
async function device(
  locale: string,
  /** A browser without passkey autofill: its sign-ins go by the button. */
  noAutofill = false,
): Promise<{
  context: BrowserContext;
  page: Page;
  cdp: CDPSession;
  authenticatorId: string;
  cspErrors: string[];
}> {
  const context = await browser.newContext({ locale });
  if (noAutofill)
    await context.addInitScript(() => {
      // biome-ignore lint/suspicious/noExplicitAny: the page's own WebAuthn object, in the page.
      (window as any).PublicKeyCredential.isConditionalMediationAvailable = async () => false;
    });
  const page = await context.newPage();
  const cspErrors: string[] = [];
  page.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
  });
  // A script error on a page fails the test as a CSP report does.
  page.on("pageerror", (e) => cspErrors.push(`script error: ${e.message}`));

  const cdp = await context.newCDPSession(page);
  await cdp.send("WebAuthn.enable");
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return { context, page, cdp, authenticatorId, cspErrors };
}

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

async function audit(page: Page, name: string, cspErrors: string[]): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(
    // biome-ignore lint/suspicious/noExplicitAny: axe is the script just evaluated in the page.
    () => (globalThis as any).axe.run(document, { resultTypes: ["violations"] }).then((r: any) => r.violations),
  )) as AxeViolation[];
  const blocking = violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
  expect(blocking, `${name}: axe-core`).toEqual([]);
  expect(cspErrors, `${name}: CSP`).toEqual([]);
}

/** An email-code sign-in up to the passkey offer. */
async function codeToOffer(page: Page, t: { issuer: string; clientId: string }, email: string, state: string) {
  await page.goto(authorizationUrl(t, state, "login"));
  await page.fill("#email", email);
  await page.click("form[action$='/email-code/generate'] button[type=submit]");
  await page.waitForSelector("#code", { timeout: 10_000 }).catch(async (err) => {
    throw new Error(
      `no code page at ${page.url()}: ${(await page.content()).replace(/<style[\s\S]*<\/style>/, "").slice(0, 3000)}`,
      { cause: err },
    );
  });
  const [latest] = await mails(t.issuer, email);
  await page.fill("#code", latest?.code as string);
  await page.click("form[action$='/email-code/verify'] button");
  await page.waitForSelector("#passkey-create");
}

const LANGUAGES = [
  {
    lang: "en",
    locale: "en-US",
    create: "Create a passkey",
    signIn: "Sign in with a passkey",
    failed: "That passkey could not sign you in here.",
    offerHeading: "Sign in faster next time",
  },
  {
    lang: "ar",
    locale: "ar-EG",
    create: "إنشاء مفتاح مرور",
    signIn: "سجّل الدخول باستخدام مفتاح مرور",
    failed: "تعذّر تسجيل دخولك هنا بمفتاح المرور هذا.",
    offerHeading: "سجّل الدخول بسرعة أكبر في المرة القادمة",
  },
] as const;

describe("passkeys in Chromium with a virtual authenticator", () => {
  for (const L of LANGUAGES) {
    it(`${L.lang}: enrol, sign in without mail, a second passkey, a removed passkey refused, another tenant refused`, async () => {
      const t = await tenantWithClient(`pk-${L.lang}`);
      const other = await tenantWithClient(`pk-other-${L.lang}`);
      const email = `pk.${L.lang}.${Date.now()}@example.com`;
      const name = (step: string) => `passkey-${L.lang}-${step}`;
      const one = await device(L.locale);
      const two = await device(L.locale, true);
      try {
        // 1. A code sign-in, then the offer: a button named for a passkey, in the page's language.
        await codeToOffer(one.page, t, email, "st-enrol");
        const firstCodeAt = Date.now();
        expect(await one.page.locator("html").getAttribute("lang")).toBe(L.lang);
        expect(await one.page.locator("h1").textContent()).toBe(L.offerHeading);
        expect(await one.page.getByRole("button", { name: L.create }).count()).toBe(1);
        await audit(one.page, name("1-offer"), one.cspErrors);
        await Promise.all([
          one.page.waitForURL((u) => u.origin === rpOrigin),
          one.page.getByRole("button", { name: L.create }).click(),
        ]);
        const enrolled = await redeem(t, one.page.url());
        const { credentials } = (await one.cdp.send("WebAuthn.getCredentials", {
          authenticatorId: one.authenticatorId,
        })) as { credentials: { credentialId: string; isResidentCredential: boolean; rpId: string }[] };
        expect(credentials).toHaveLength(1);
        expect(credentials[0]).toMatchObject({ isResidentCredential: true, rpId: "localhost" });

        // 2. Autofill (conditional mediation, which the virtual authenticator answers at once): the
        // email page signs in with one touch, and no mail is sent.
        const mailsBefore = (await mails(t.issuer, email)).length;
        await Promise.all([
          one.page.waitForURL((u) => u.origin === rpOrigin && u.searchParams.get("state") === "st-autofill"),
          one.page.goto(authorizationUrl(t, "st-autofill", "login")),
        ]);
        const signedIn = await redeem(t, one.page.url());
        expect(signedIn.sub).toBe(enrolled.sub);
        expect(signedIn.email).toBe(email);
        expect((await mails(t.issuer, email)).length).toBe(mailsBefore);

        // 3. A second device, without autofill: its own passkey after a code; both are listed.
        await new Promise((r) => setTimeout(r, Math.max(0, firstCodeAt + 10_500 - Date.now())));
        await codeToOffer(two.page, t, email, "st-second");
        await Promise.all([
          two.page.waitForURL((u) => u.origin === rpOrigin),
          two.page.getByRole("button", { name: L.create }).click(),
        ]);
        const user = (
          (await (await admin(`/tenants/${t.id}/users?email=${encodeURIComponent(email)}`)).json()) as {
            users: { id: string }[];
          }
        ).users[0] as { id: string };
        const listed = (await (await admin(`/tenants/${t.id}/users/${user.id}/passkeys`)).json()) as {
          passkeys: { id: string }[];
        };
        expect(listed.passkeys).toHaveLength(2);

        // 4. "Sign in with a passkey" on the email page (with autofill's field): one touch, no mail.
        await two.page.goto(authorizationUrl(t, "st-button", "login"));
        expect(await two.page.locator("#email").getAttribute("autocomplete")).toBe("username webauthn");
        await two.page.getByRole("button", { name: L.signIn }).waitFor();
        await audit(two.page, name("2-email"), two.cspErrors);
        await Promise.all([
          two.page.waitForURL((u) => u.origin === rpOrigin),
          two.page.getByRole("button", { name: L.signIn }).click(),
        ]);
        expect(new URL(two.page.url()).searchParams.get("state")).toBe("st-button");
        expect((await redeem(t, two.page.url())).sub).toBe(enrolled.sub);
        expect((await mails(t.issuer, email)).length).toBe(mailsBefore + 1);

        // 5. The first device's passkey removed: it no longer signs in, and the page says so.
        const firstId = Buffer.from(credentials[0]?.credentialId as string, "base64").toString("base64url");
        expect(listed.passkeys.map((p) => p.id)).toContain(firstId);
        expect(
          (await admin(`/tenants/${t.id}/users/${user.id}/passkeys/${firstId}`, { method: "DELETE" })).status,
        ).toBe(204);
        await one.page.goto(authorizationUrl(t, "st-removed", "login"));
        await one.page.waitForSelector("#msg [role=alert]");
        expect(await one.page.locator("#msg").textContent()).toContain(L.failed);
        expect(new URL(one.page.url()).origin).toBe(new URL(t.issuer).origin);
        await audit(one.page, name("3-removed"), one.cspErrors);

        // 6. Another tenant on the same host: the browser offers the passkey (same RP id), Keyway refuses it.
        await two.page.goto(authorizationUrl(other, "st-other", "login"));
        await two.page.getByRole("button", { name: L.signIn }).click();
        await two.page.waitForSelector("#msg [role=alert]");
        expect(await two.page.locator("#msg").textContent()).toContain(L.failed);
        expect(new URL(two.page.url()).origin).toBe(new URL(other.issuer).origin);
        await audit(two.page, name("4-other-tenant"), two.cspErrors);
      } finally {
        await one.context.close();
        await two.context.close();
      }
    }, 180_000);
  }
});
