import { verifyRegistrationResponse } from "@simplewebauthn/server";
import type { Context } from "hono";
import { z } from "zod";
import { base64url, sha256, timingSafeEqualString } from "../../../durable-objects/contract/crypto";
import { OAuthError } from "../../shared/platform/errors";
import { json, NO_STORE } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { takeIpQuota } from "../../shared/request/ip-quota";
import { shard } from "../../shared/routing/stores";
import { answerVerified, type LoginPost, loginPost, passkeyOfferPage, readLoginPost } from "./email-code";
import { pageError } from "./errors";
import { openVerifiedLogin, type VerifiedLogin } from "./login-tx";
import { txPageUi } from "./pages/ui";
import {
  laterCookie,
  openEmail,
  originOf,
  parseUserHandle,
  registrationChallenge,
  rpIdOf,
  sealEmail,
  signInChallenge,
  userHandleOf,
} from "./passkey-ceremony";
import { sessionCookie } from "./sessions";

/**
 * Passkeys (issue 42): sign-in with a discoverable credential from the email page, and the creation
 * of one after an email-code sign-in. A passkey sign-in is one store call (the credential's shard
 * checks the assertion, spends the transaction's challenge and moves the counter) and then continues
 * exactly where a verified code does (email-code.ts answerVerified): the same session, `redirect_to`,
 * code, tokens and claims.
 */

const b64u = z
  .string()
  .regex(/^[A-Za-z0-9_-]*$/)
  .max(16_384);
const assertion = z.object({
  id: b64u.min(1).max(1_400),
  rawId: b64u.min(1).max(1_400),
  type: z.literal("public-key"),
  response: z.object({
    clientDataJSON: b64u.min(1),
    authenticatorData: b64u.min(1),
    signature: b64u.min(1),
    userHandle: b64u.min(1).max(100),
  }),
  clientExtensionResults: z.record(z.string(), z.unknown()).default({}),
  authenticatorAttachment: z.string().max(32).optional(),
});
const attestation = z.object({
  id: b64u.min(1).max(1_400),
  rawId: b64u.min(1).max(1_400),
  type: z.literal("public-key"),
  response: z.object({
    clientDataJSON: b64u.min(1),
    attestationObject: b64u.min(1),
    transports: z.array(z.string().max(32)).max(10).optional(),
  }),
  clientExtensionResults: z.record(z.string(), z.unknown()).default({}),
  authenticatorAttachment: z.string().max(32).optional(),
});

/** A credential as posted: the page's form field carries it as JSON, a JSON caller as an object. */
function credentialOf<T extends z.ZodType>(schema: T, value: unknown): z.output<T> | null {
  let v = value;
  if (typeof v === "string") {
    if (v.length > 32_768) return null;
    try {
      v = JSON.parse(v);
    } catch {
      return null;
    }
  }
  const parsed = schema.safeParse(v);
  return parsed.success ? parsed.data : null;
}

const refused = () =>
  new OAuthError("invalid_request", "the passkey could not sign in", {
    headers: NO_STORE,
    notice: "login.passkey_failed",
  });

/**
 * PasskeyVerify `POST /passkey/verify` {tx, credential}: answers as `/email-code/verify` does (200
 * `{redirect_to}` and the session cookie, or 303 from the form). The user handle names the shard
 * (passkey-ceremony.ts); the credential must be this tenant's and the address's; the assertion is
 * checked there against the challenge of this transaction, the issuer's origin and host.
 */
export const verifyPasskey = loginPost("generate", async (c, post) => {
  const config = c.get("config");
  const credential = credentialOf(assertion, post.body.credential);
  if (!credential) throw refused();
  await takeIpQuota(c, "verify");
  const route = parseUserHandle(config, credential.response.userHandle);
  if (!route) throw refused();
  const now = Date.now();
  const store = shard(c.env, "challenge", route.ref);
  const result = await store.passkeySignIn({
    credentialId: credential.id,
    emailKey: route.emailKey,
    tenant: config.TENANT,
    response: credential,
    challenge: await signInChallenge(post.tx.id.id),
    origin: originOf(config),
    rpId: rpIdOf(config),
    txExp: post.tx.expiresAt,
    now,
    ip: c.req.header("cf-connecting-ip") ?? null,
  });
  if (result.status !== "ok") throw refused();
  const email = await openEmail(config, result.sealedEmail, route.emailKey);
  if (!email) throw refused();
  return answerVerified(c, post, {
    email,
    emailKey: route.emailKey,
    known: result.user,
    now,
    method: "passkey",
    remember: (known) => store.rememberUser(route.emailKey, known, now),
    // The passkey's user must still be the address's (a user deleted and made again has none).
    expectUser: result.userId,
    refuse: refused,
  });
});

/**
 * The verified login the offer's forms carry (`done`, what `redirect_to` carries), of this
 * transaction, in the browser that verified it (the session cookie whose hash it sealed).
 */
async function offeredLogin(c: Context<AppEnv>, post: LoginPost): Promise<{ done: string; login: VerifiedLogin }> {
  const config = c.get("config");
  const login = await openVerifiedLogin(config, post.body.done, Date.now());
  if (!login || login.id.id !== post.tx.id.id) {
    if (post.form) throw pageError("err.expired.title", "err.expired.link_invalid");
    throw new OAuthError("invalid_request", "done is not this transaction's verified login", { headers: NO_STORE });
  }
  const session = sessionCookie(config, c.req.raw);
  const hash = session ? await sha256(session.id) : null;
  if (hash === null || !timingSafeEqualString(hash, login.sessionHash)) {
    if (post.form) throw pageError("err.expired.title", "err.expired.other_browser");
    throw new OAuthError("invalid_request", "the session cookie is not this login's", { headers: NO_STORE });
  }
  return { done: post.body.done as string, login };
}

const goOn = (post: LoginPost, redirectTo: string, headers: Record<string, string> = {}) =>
  post.form
    ? new Response(null, { status: 303, headers: { Location: redirectTo, ...headers, ...NO_STORE } })
    : json({ redirect_to: redirectTo }, 200, { ...headers, ...NO_STORE });

/**
 * PasskeyRegister `POST /passkey/register` {tx, done, credential}: the attestation (format `none`)
 * verified against the verified login's challenge, the issuer's origin and host, with user
 * verification; the credential stored in the address's shard (its `passkey_created` event in the same
 * transaction); then the login goes on to `redirect_to`. A failure shows the offer again.
 */
export async function registerPasskey(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  const post = await readLoginPost(c);
  const { done, login } = await offeredLogin(c, post);
  const redirectTo = `${config.ISSUER}/authorize?tx=${encodeURIComponent(done)}`;
  try {
    const credential = credentialOf(attestation, post.body.credential);
    if (!credential) throw refused();
    const v = await verifyRegistrationResponse({
      response: credential as Parameters<typeof verifyRegistrationResponse>[0]["response"],
      expectedChallenge: await registrationChallenge(login.id.id),
      expectedOrigin: originOf(config),
      expectedRPID: rpIdOf(config),
      expectedType: "webauthn.create",
      requireUserVerification: true,
    }).catch(() => ({ verified: false as const }));
    if (!v.verified) throw refused();
    const info = v.registrationInfo;
    const now = Date.now();
    const { ref } = userHandleOf(config, login.emailKey, post.tx.id.ref.place.region);
    await shard(c.env, "challenge", ref).addPasskey({
      credentialId: info.credential.id,
      emailKey: login.emailKey,
      tenant: config.TENANT,
      userId: login.session.sub,
      publicKey: base64url(info.credential.publicKey),
      counter: info.credential.counter,
      transports: (info.credential.transports ?? []).map(String),
      aaguid: info.aaguid,
      backedUp: info.credentialBackedUp,
      sealedEmail: await sealEmail(config, login.session.email, login.emailKey),
      now,
      ip: c.req.header("cf-connecting-ip") ?? null,
    });
  } catch (err) {
    if (!(err instanceof OAuthError) || !post.form) throw err;
    const ui = txPageUi(c, post.tx.ui);
    return passkeyOfferPage(c, post, {
      done,
      email: login.session.email,
      emailKey: login.emailKey,
      message: { kind: "error", html: ui.t.html("passkey.failed") },
      status: 400,
      headers: { ...NO_STORE },
    });
  }
  return goOn(post, redirectTo);
}

/** "Not now" `POST /passkey/later` {tx, done}: remembered in this browser for 30 days; the login goes on. */
export async function passkeyLater(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  const post = await readLoginPost(c);
  const { done } = await offeredLogin(c, post);
  return goOn(post, `${config.ISSUER}/authorize?tx=${encodeURIComponent(done)}`, { "Set-Cookie": laterCookie(config) });
}
