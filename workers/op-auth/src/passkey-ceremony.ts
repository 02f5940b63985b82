import type { Context } from "hono";
import { base64url, base64urlDecode, seal, sha256, unseal } from "../../../durable-objects/contract/crypto";
import type { Config } from "../../shared/config/config";
import { cookieName, getCookie, setCookie } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { routeKey, routeKeyIn, type ShardRef } from "../../shared/routing/shard-refs";

/**
 * What the passkey endpoints (passkey.ts) and the code's verify (email-code.ts, for the offer) share
 * (issue 42): the relying party (the tenant's issuer host), the challenges, the user handle, and
 * whether to offer a passkey after an email-code sign-in.
 */

/** WebAuthn's RP id: the tenant issuer's host (a custom host included); its origin is the issuer's. */
export const rpIdOf = (config: Config) => new URL(config.ISSUER).hostname;
export const originOf = (config: Config) => new URL(config.ISSUER).origin;

/**
 * The sign-in challenge of a login transaction: SHA-256 of its id under a label of its own. Nothing is
 * stored to begin a login: the id is 128 random bits with a MAC, known only to the browser that holds
 * the transaction (the email page derives the same value from its hidden `tx`), and the store spends
 * the challenge with the credential's counter (ChallengeStore.passkeySignIn).
 */
export const signInChallenge = async (txId: string) => sha256(`webauthn.get:${txId}`);

/** The registration challenge of a verified login: its transaction's id under another label. */
export const registrationChallenge = async (txId: string) => sha256(`webauthn.create:${txId}`);

/**
 * The user handle (WebAuthn `user.id`, at most 64 bytes): where the person's passkeys are, with no
 * personal data: the ChallengeStore generation and region of the address's shard and the address's
 * HMAC (the shard's key), `<gen>.<region>.<email key>`. The authenticator gives it back with every
 * assertion of a discoverable credential, so a passkey sign-in goes straight to that shard.
 */
export function userHandleOf(config: Config, emailKey: string, region: string): { handle: string; ref: ShardRef } {
  const ref = routeKey(config, "challenge", emailKey, region);
  return { handle: base64url(new TextEncoder().encode(`${ref.gen}.${region}.${emailKey}`)), ref };
}

/** The shard and address key a user handle names; null for anything this config does not route. */
export function parseUserHandle(config: Config, value: unknown): { emailKey: string; ref: ShardRef } | null {
  if (typeof value !== "string" || value.length === 0 || value.length > 100) return null;
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(base64urlDecode(value));
  } catch {
    return null;
  }
  const m = /^(\d{1,4})\.([a-z0-9_-]{1,32})\.([A-Za-z0-9_-]{43})$/.exec(text);
  if (!m) return null;
  const [, gen, region, emailKey] = m as unknown as [string, string, string, string];
  const ref = routeKeyIn(config, "challenge", emailKey, Number(gen), region);
  return ref ? { emailKey, ref } : null;
}

/** "Not now", remembered in this browser (the tenant's cookie path) for 30 days. */
export const PASSKEY_LATER_COOKIE = "kw_passkey_later";
const LATER_SECONDS = 30 * 86_400;

export const laterCookie = (config: Config) =>
  setCookie(cookieName(PASSKEY_LATER_COOKIE, config), "1", {
    secure: config.secureCookies,
    path: config.cookiePath,
    maxAge: LATER_SECONDS,
  });

/**
 * Whether an email-code sign-in shows the passkey offer before `redirect_to`: the tenant's policy
 * (`passkey_offer`), "Not now" in this browser, and a person's browser navigating (a form post with
 * `Sec-Fetch-Dest: document`): a script or a client library posting the form gets CONTRACT §2's
 * `303` as before.
 */
export function offersPasskey(c: Context<AppEnv>): boolean {
  const config = c.get("config");
  const policy = config.POLICY.passkey_offer;
  if (policy === "off") return false;
  if (c.req.header("sec-fetch-dest") !== "document") return false;
  return policy === "always" || getCookie(c.req.raw, cookieName(PASSKEY_LATER_COOKIE, config)) === null;
}

/** The address a passkey's row keeps, sealed onto the address's key (the shard keeps none in the clear). */
const emailMaterial = (config: Config) => `passkey-email:${config.OTP_HMAC_SECRET}`;
export const sealEmail = (config: Config, email: string, emailKey: string) =>
  seal(emailMaterial(config), email, emailKey);
export const openEmail = (config: Config, sealed: string, emailKey: string) =>
  unseal(emailMaterial(config), sealed, emailKey);
