import { expect } from "vitest";
import { SoftAuthenticator, signInChallengeOf } from "../support/authenticator";
import {
  type AuthorizeExtra,
  Browser,
  ISSUER,
  latestCode,
  pkce,
  redeem,
  type TestClient,
  type TestEnv,
  type Tokens,
} from "../support/harness";

/** The issuer a browser at `base` (`/t/<tenant>` or "") talks to: its origin and WebAuthn RP id. */
export const ORIGIN = new URL(ISSUER).origin;
export const RP_ID = new URL(ISSUER).hostname;

const unescapeHtml = (s: string) => s.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));
const field = (html: string, name: string) =>
  unescapeHtml(new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1] ?? "");

/** What a person's browser sends with a form it navigates with (the offer depends on it). */
export const NAVIGATE = { "Sec-Fetch-Dest": "document", "Sec-Fetch-Mode": "navigate", Origin: ORIGIN };

export interface Offer {
  browser: Browser;
  tx: string;
  done: string;
  verifier: string;
  html: string;
  options: {
    rp: { id: string; name: string };
    user: { id: string; name: string };
    challenge: string;
    authenticatorSelection: Record<string, unknown>;
    attestation: string;
  };
}

/** An email-code sign-in from a person's browser (a form post that navigates): the passkey offer page. */
export async function codeSignInToOffer(
  client: TestClient,
  email: string,
  o: { env?: TestEnv; base?: string; extra?: AuthorizeExtra; browser?: Browser } = {},
): Promise<Offer> {
  const browser = o.browser ?? new Browser({ ...(o.env ? { env: o.env } : {}), base: o.base ?? "" });
  const { verifier, challenge } = await pkce();
  const tx = await browser.startLogin(client, challenge, o.extra);
  expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
  const code = await latestCode(email, browser.env, browser.base);
  const res = await browser.postForm("/email-code/verify", { tx, email, code }, NAVIGATE);
  const html = await res.text();
  expect(res.status, html).toBe(200);
  const options = JSON.parse(unescapeHtml(/data-options="([^"]*)"/.exec(html)?.[1] ?? "null"));
  return { browser, tx, done: field(html, "done"), verifier, html, options };
}

/** The offer answered with a new passkey: the login goes on to `redirect_to` (a 303). */
export async function enrol(
  offer: Offer,
  origin = ORIGIN,
): Promise<{ authenticator: SoftAuthenticator; res: Response }> {
  const authenticator = await SoftAuthenticator.create();
  const credential = await authenticator.register({
    challenge: offer.options.challenge,
    origin,
    rpId: offer.options.rp.id,
    userHandle: offer.options.user.id,
  });
  const res = await offer.browser.postForm(
    "/passkey/register",
    { tx: offer.tx, done: offer.done, credential: JSON.stringify(credential) },
    NAVIGATE,
  );
  return { authenticator, res };
}

/** A client's whole login with a passkey and no mail: tokens, or the refusal of /passkey/verify. */
export async function passkeyLogin(
  client: TestClient,
  authenticator: SoftAuthenticator,
  o: {
    env?: TestEnv;
    base?: string;
    extra?: AuthorizeExtra;
    /** Changes the assertion (a wrong origin, flags, counter...) before it is sent. */
    assertion?: Partial<Parameters<SoftAuthenticator["assert"]>[0]>;
  } = {},
) {
  const browser = new Browser({ ...(o.env ? { env: o.env } : {}), base: o.base ?? "" });
  const { verifier, challenge } = await pkce();
  const tx = await browser.startLogin(client, challenge, o.extra);
  const credential = await authenticator.assert({
    challenge: await signInChallengeOf(tx),
    origin: ORIGIN,
    rpId: RP_ID,
    ...o.assertion,
  });
  const verify = await browser.postJson("/passkey/verify", { tx, credential });
  return { browser, tx, verifier, credential, verify };
}

/** Steps 4 and 5 after a verified sign-in: the code at the client's redirect, then the tokens. */
export async function finish(browser: Browser, client: TestClient, redirectTo: string, verifier: string) {
  const fin = await browser.fetch(redirectTo);
  expect(fin.status, await fin.clone().text()).toBe(302);
  const redirect = new URL(fin.headers.get("location") as string);
  const code = redirect.searchParams.get("code") as string;
  expect(code).toBeTruthy();
  const res = await redeem(client, code, verifier, {}, browser.env, browser.base);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as Tokens;
}

export const claimsOf = (jwt: string) =>
  JSON.parse(atob((jwt.split(".")[1] as string).replace(/-/g, "+").replace(/_/g, "/"))) as Record<string, unknown>;
