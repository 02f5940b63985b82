import { expect } from "vitest";
import { type Browser, ISSUER, latestCode, uniqueEmail } from "./harness";

/** `/authorize` asked for JSON (the login transaction instead of the page). */
export const startJson = (browser: Browser, q: string) =>
  browser.fetch(`/authorize?${q}`, { headers: { Accept: "application/json" } });

/** Signs a person in to the transaction `tx` and follows `redirect_to`: the client's redirect URI with its answer. */
export async function finishLogin(browser: Browser, tx: string, email = uniqueEmail()): Promise<URL> {
  expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
  const code = await latestCode(email);
  const ver = await browser.postJson("/email-code/verify", { tx, email, code });
  expect(ver.status, await ver.clone().text()).toBe(200);
  const fin = await browser.fetch(((await ver.json()) as { redirect_to: string }).redirect_to);
  expect(fin.status).toBe(302);
  return new URL(fin.headers.get("location") as string);
}

/** An authorization error redirected to `uri` (RFC 6749 §4.1.2.1, with RFC 9207's `iss`), and no code. */
export function expectRedirectError(res: Response, uri: string, error: string, state: string | null) {
  expect(res.status, `${res.headers.get("location")}`).toBe(302);
  const loc = new URL(res.headers.get("location") as string);
  expect(`${loc.origin}${loc.pathname}`).toBe(uri);
  expect(loc.searchParams.get("error"), loc.searchParams.get("error_description") ?? "").toBe(error);
  expect(loc.searchParams.get("state")).toBe(state);
  expect(loc.searchParams.get("iss")).toBe(ISSUER);
  expect(loc.searchParams.get("code")).toBeNull();
  return loc;
}
