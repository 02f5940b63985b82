// The OpenID Foundation conformance suite, driven through its REST API (the API its own
// run-test-plan.py uses: /api/plan, /api/runner, /api/info, /api/log), and the person at the browser
// its front-channel tests wait for. Nothing of the suite is in this repository: these speak to a suite
// already running (`CONFORMANCE_SERVER`), built and started as ../shared/CONFORMANCE.md says.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));

/**
 * @param {string} method @param {string} url @param {unknown} [body]
 * @param {Record<string, string>} [headers]
 * @returns {Promise<{ status: number, json: any, text: string, bytes?: Buffer }>}
 */
export async function api(method, url, body, headers = {}) {
  const res = await fetch(url, {
    method,
    headers: {
      Accept: "application/json",
      ...(body !== undefined && typeof body !== "string" ? { "Content-Type": "application/json" } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

/**
 * Tests whose screenshot for review is the last login page: of their second authorization
 * (prompt=login, max_age=1), or the one that shows the client's logo, privacy policy or terms.
 */
const RELOGIN_TESTS = new Set([
  "oidcc-prompt-login",
  "oidcc-max-age-1",
  "oidcc-registration-logo-uri",
  "oidcc-registration-policy-uri",
  "oidcc-registration-tos-uri",
]);

/** A test module's states (TestModule.Status in the suite). */
const DONE = new Set(["FINISHED", "INTERRUPTED"]);

export class Suite {
  /** @param {string} base the suite's URL, e.g. https://localhost.emobix.co.uk:8443 */
  constructor(base) {
    this.base = base.replace(/\/$/, "");
  }

  async available() {
    const r = await api("GET", `${this.base}/api/runner/available`).catch(() => ({ status: 0 }));
    return r.status === 200;
  }

  /** @param {string} name @param {Record<string, string>|undefined} variant @param {object} config */
  async createPlan(name, variant, config) {
    const q = new URLSearchParams({ planName: name });
    if (variant) q.set("variant", JSON.stringify(variant));
    const r = await api("POST", `${this.base}/api/plan?${q}`, config);
    if (r.status !== 201) throw new Error(`the suite refused plan ${name}: ${r.status} ${r.text.slice(0, 300)}`);
    return /** @type {{ id: string, modules: { testModule: string, variant?: Record<string, string> }[] }} */ (r.json);
  }

  /** @param {string} planId @param {string} module @param {Record<string, string>|undefined} variant */
  async createModule(planId, module, variant) {
    const q = new URLSearchParams({ test: module, plan: planId });
    if (variant) q.set("variant", JSON.stringify(variant));
    const r = await api("POST", `${this.base}/api/runner?${q}`);
    if (r.status !== 201) throw new Error(`the suite refused test ${module}: ${r.status} ${r.text.slice(0, 300)}`);
    return /** @type {string} */ (r.json.id);
  }

  /** @param {string} id */
  async info(id) {
    return (await api("GET", `${this.base}/api/info/${id}`)).json ?? {};
  }

  /** @param {string} id */
  async log(id) {
    return (await api("GET", `${this.base}/api/log/${id}`)).json ?? [];
  }

  /** @param {string} id */
  async start(id) {
    await api("POST", `${this.base}/api/runner/${id}`);
  }

  /**
   * Waits until the module is in one of `states` (or done), up to `timeoutMs`; returns its status.
   * @param {string} id @param {string[]} states @param {number} timeoutMs
   */
  async waitFor(id, states, timeoutMs) {
    const until = Date.now() + timeoutMs;
    let status = "";
    while (Date.now() < until) {
      status = (await this.info(id)).status ?? "";
      if (states.includes(status) || DONE.has(status)) return status;
      await sleep(1000);
    }
    return status;
  }

  /** @param {string} planId */
  async plan(planId) {
    return (await api("GET", `${this.base}/api/plan/${planId}`)).json;
  }

  /** The plan's HTML export (a zip of the suite's own logs), written to `file`. @param {string} planId @param {string} file */
  async exportHtml(planId, file) {
    const res = await fetch(`${this.base}/api/plan/exporthtml/${planId}`, { signal: AbortSignal.timeout(120_000) });
    if (res.status !== 200) return false;
    writeFileSync(file, Buffer.from(await res.arrayBuffer()));
    return true;
  }

  /**
   * The person at the browser: every front-channel URL a running test publishes is opened in a
   * headless Chromium (one browser context per test, so each test has its own cookies), a Keyway
   * login page gets a fresh address and the code from the dev mailbox, a logout confirmation is
   * confirmed, and any other page (an error page, usually) is screenshotted and uploaded where the
   * test waits for one. Returns a stop function.
   * @param {{ keyway: string[], mailbox: (email: string) => Promise<{ code: string, sent_at: string }[]>, shots: string, tag: string, log: (...a: unknown[]) => void, mine?: Set<string> }} options
   * `mine`: the tests of this run; others the suite still lists (from a run cut short) are left alone.
   */
  async person({ keyway, mailbox, shots, tag, log, mine }) {
    const { chromium } = await import("playwright-core");
    mkdirSync(shots, { recursive: true });
    const browser = await chromium.launch({
      executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--ignore-certificate-errors",
        "--no-first-run",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
    /** @type {Map<string, { ctx: import("playwright-core").BrowserContext, email: string, lastLoginShot?: Buffer }>} */
    const contexts = new Map();
    /** @type {Map<string, number>} */
    const handled = new Map();
    let people = 0;
    let stopped = false;
    const origins = new Set(keyway.map((u) => new URL(u).origin));
    const loop = (async () => {
      while (!stopped) {
        /** @type {string[]} */
        let running = [];
        try {
          running = (await api("GET", `${this.base}/api/runner/running`)).json ?? [];
        } catch {
          await sleep(2000);
          continue;
        }
        for (const [id, c] of contexts)
          if (!running.includes(id)) {
            contexts.delete(id);
            await c.ctx.close().catch(() => {});
          }
        for (const id of running) {
          if (mine && !mine.has(id)) continue;
          const br = await api("GET", `${this.base}/api/runner/browser/${id}`).catch(() => ({ status: 0, json: null }));
          if (br.status !== 200) continue;
          // `urls` holds what the test still wants opened: visiting moves a URL to `visited`, and a
          // test may ask for the same URL again (FAPI 2.0's reuse of a request_uri). A cap per URL
          // keeps a URL the suite never marks visited from being opened for ever.
          for (const url of br.json.urls ?? []) {
            const key = `${id} ${url}`;
            const times = handled.get(key) ?? 0;
            if (times >= 3) continue;
            handled.set(key, times + 1);
            await api("POST", `${this.base}/api/runner/browser/${id}/visit?url=${encodeURIComponent(url)}`).catch(
              () => {},
            );
            let c = contexts.get(id);
            if (!c) {
              c = {
                ctx: await browser.newContext({ ignoreHTTPSErrors: true }),
                email: `conformance+${tag}-${++people}@example.com`,
              };
              contexts.set(id, c);
            }
            await this.#visit(id, c, url, { origins, mailbox, shots, log }).catch((e) =>
              log(`${id}: visit failed: ${e instanceof Error ? e.message : e}`),
            );
          }
        }
        await sleep(1000);
      }
    })();
    return async () => {
      stopped = true;
      await loop;
      await browser.close().catch(() => {});
    };
  }

  /**
   * @param {string} id
   * @param {{ ctx: import("playwright-core").BrowserContext, email: string, lastLoginShot?: Buffer }} c
   * @param {string} url
   * @param {{ origins: Set<string>, mailbox: (email: string) => Promise<{ code: string, sent_at: string }[]>, shots: string, log: (...a: unknown[]) => void }} o
   */
  async #visit(id, c, url, { origins, mailbox, shots, log }) {
    const page = await c.ctx.newPage();
    const nav = (/** @type {() => Promise<unknown>} */ action) =>
      Promise.all([page.waitForNavigation({ waitUntil: "load", timeout: 30_000 }).catch(() => {}), action()]);
    try {
      await page.goto(url, { waitUntil: "load", timeout: 30_000 }).catch((e) => log(`${id}: goto: ${e.message}`));
      const started = Date.now();
      while (Date.now() - started < 150_000) {
        const here = new URL(page.url());
        if (here.origin === this.base) {
          // The suite's callback page posts what it got back, then shows #submission_complete; a test
          // that stopped on what it got never shows it, so stop waiting once the test has moved on.
          for (let i = 0; i < 40; i++) {
            if (await page.$("#submission_complete").catch(() => null)) break;
            if (DONE.has((await this.info(id)).status)) break;
            await sleep(500);
          }
          // oidcc-prompt-login and oidcc-max-age-1 then wait for a screenshot of the second login page
          // (other tests wait for the page Keyway shows at their next URL: never this one).
          const test = (await this.info(id)).testName;
          if (c.lastLoginShot && RELOGIN_TESTS.has(test)) await this.#uploadScreenshot(id, c.lastLoginShot, log, 4);
          return;
        }
        const atKeyway = origins.has(here.origin);
        if (atKeyway && (await page.$("input#email"))) {
          // A test of the person declining (FAPI 2.0's user-rejects-authentication): Cancel.
          if (/user-rejects-authentication/.test((await this.info(id)).testName)) {
            await nav(() => page.click('form[action$="/email-code/cancel"] button[type=submit]'));
            continue;
          }
          c.lastLoginShot = await page.screenshot({
            path: join(shots, `${id}-login-${Date.now()}.png`),
            fullPage: true,
          });
          const before = new Set((await mailbox(c.email)).map((m) => `${m.sent_at} ${m.code}`));
          await page.fill("input#email", c.email);
          await nav(() => page.click('form[action$="/email-code/generate"] button[type=submit]'));
          if (!(await page.$("input#code"))) {
            log(`${id}: no code page after the address; waiting 10 s`);
            await sleep(10_000);
            continue;
          }
          let code;
          for (let i = 0; i < 40 && !code; i++) {
            code = (await mailbox(c.email)).find((m) => !before.has(`${m.sent_at} ${m.code}`))?.code;
            if (!code) await sleep(250);
          }
          if (!code) throw new Error(`no code arrived for ${c.email}`);
          await page.fill("input#code", code);
          await nav(() => page.click('form[action$="/email-code/verify"] button[type=submit]'));
          continue;
        }
        // CONTRACT §10: after an email code, a browser is offered a passkey; the suite's tests are not
        // about passkeys, so the person declines ("Not now") and the login goes on.
        if (atKeyway && (await page.$('form[action$="/passkey/later"] button[type=submit]'))) {
          await nav(() => page.click('form[action$="/passkey/later"] button[type=submit]'));
          continue;
        }
        if (atKeyway && (await page.$('form[action$="/logout"] button.primary'))) {
          await nav(() => page.click('form[action$="/logout"] button.primary'));
          continue;
        }
        // Any other page Keyway shows instead of redirecting (an error page): kept for review.
        const png = await page.screenshot({ path: join(shots, `${id}-${Date.now()}.png`), fullPage: true });
        const text = ((await page.textContent("body").catch(() => "")) || "").replace(/\s+/g, " ").trim();
        log(`${id}: stopped at ${here.origin}${here.pathname}: ${text.slice(0, 120)}`);
        await this.#uploadScreenshot(id, png, log);
        return;
      }
      log(`${id}: gave up after 150 s at ${page.url()}`);
    } finally {
      await page.close().catch(() => {});
    }
  }

  /** @param {string} id @param {Buffer} png @param {(...a: unknown[]) => void} log */
  async #uploadScreenshot(id, png, log, tries = 20) {
    const data = `data:image/png;base64,${png.toString("base64")}`;
    for (let i = 0; i < tries; i++) {
      /** @type {{ upload?: string }[]} */
      const entries = await this.log(id);
      const placeholders = entries.filter((e) => e.upload).map((e) => e.upload);
      if (placeholders.length) {
        for (const p of placeholders)
          await api("POST", `${this.base}/api/log/${id}/images/${p}`, data, { "Content-Type": "text/plain" });
        log(`${id}: uploaded a screenshot for review`);
        return;
      }
      if (DONE.has((await this.info(id)).status)) return;
      await sleep(1000);
    }
  }
}
