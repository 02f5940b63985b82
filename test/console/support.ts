import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { expect } from "vitest";
import tokenApp from "../../workers/op-token/src/index";
import { admin, Browser, latestCode, type TestEnv } from "../support/harness";

/**
 * The operators' web console (issue 43): grants through the admin API, and the sign-in at /console
 * through Keyway's own /authorize, email code and token endpoint. op-mgmt reaches op-token by its
 * OP_TOKEN service binding, which the test env wires to op-token's real app.
 */
export const consoleEnv = {
  ...env,
  OP_TOKEN: {
    async fetch(input: RequestInfo | URL, init?: RequestInit) {
      const ctx = createExecutionContext();
      const res = await tokenApp.fetch(new Request(input, init), consoleEnv as never, ctx);
      await waitOnExecutionContext(ctx);
      return res;
    },
  },
} as unknown as TestEnv;

export const grant = (json: Record<string, unknown>) => admin("/operators", { method: "POST", json });

/** /console → /authorize → email code from the dev mailbox → /console/callback → /console. */
export async function signIn(email: string): Promise<{ browser: Browser; page: Response }> {
  const browser = new Browser({ env: consoleEnv });
  const start = await browser.fetch("/console");
  expect(start.status).toBe(302);
  const authorize = new URL(start.headers.get("location") as string);
  expect(authorize.pathname).toBe("/authorize");
  expect(authorize.searchParams.get("client_id")).toBe("keyway-console");
  expect(authorize.searchParams.get("code_challenge_method")).toBe("S256");
  const init = await browser.fetch(`${authorize.pathname}${authorize.search}`, {
    headers: { Accept: "application/json" },
  });
  expect(init.status, await init.clone().text()).toBe(200);
  const { tx } = (await init.json()) as { tx: string };
  const gen = await browser.postJson("/email-code/generate", { tx, email });
  expect(gen.status, await gen.clone().text()).toBe(200);
  const code = await latestCode(email, consoleEnv);
  const ver = await browser.postJson("/email-code/verify", { tx, email, code });
  expect(ver.status, await ver.clone().text()).toBe(200);
  const { redirect_to } = (await ver.json()) as { redirect_to: string };
  const fin = await browser.fetch(redirect_to);
  expect(fin.status, await fin.clone().text()).toBe(302);
  const back = new URL(fin.headers.get("location") as string);
  expect(back.pathname).toBe("/console/callback");
  const cb = await browser.fetch(`${back.pathname}${back.search}`);
  expect(cb.status, await cb.clone().text()).toBe(303);
  expect(new URL(cb.headers.get("location") as string).pathname).toBe("/console");
  const setCookie = cb.headers.getSetCookie().find((c) => c.startsWith("kw_console="));
  expect(setCookie).toMatch(/HttpOnly/);
  expect(setCookie).toMatch(/SameSite=Lax/);
  expect(setCookie).toMatch(/Path=\/console/);
  return { browser, page: await browser.fetch("/console") };
}

/** The CSRF token every console form carries, read from a page. */
export const csrfOf = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1] as string;
