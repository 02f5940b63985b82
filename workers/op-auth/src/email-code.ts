import type { Context } from "hono";
import { auditEvent } from "../../../durable-objects/contract/audit-event";
import { hmac, randomDigits, randomToken, sha256 } from "../../../durable-objects/contract/crypto";
import { errorField, log } from "../../../durable-objects/contract/log";
import {
  type AuditEvent,
  type ClaimsSnapshot,
  type KnownUser,
  type KnownUserFound,
  LIMITS_CARRY_WINDOW_MS,
  type OtpPolicy,
} from "../../../durable-objects/contract/verbs";
import { mailLookOf } from "../../shared/branding/branding";
import type { MessageKey } from "../../shared/branding/i18n/index";
import type { Config } from "../../shared/config/config";
import { audit, auditEmailKey } from "../../shared/events/audit";
import { isCaptured, sealCapturedMail } from "../../shared/events/captured-mail";
import { deliverOtp, otpMessage } from "../../shared/events/otp-mail";
import { type Projection, projectClaims } from "../../shared/oauth/token-claims";
import { normalizeEmail } from "../../shared/people/email";
import { currentClaims } from "../../shared/people/entity-claims";
import { findOrCreateUser, findUserByEmail } from "../../shared/people/users";
import { OAuthError } from "../../shared/platform/errors";
import {
  clearCookie,
  cookieName,
  getCookie,
  isForm,
  json,
  NO_STORE,
  readJsonOrForm,
  setCookie,
} from "../../shared/platform/http";
import { loginEnded } from "../../shared/request/admission";
import type { AppEnv } from "../../shared/request/context";
import { sourceKeyOf, takeIpQuota } from "../../shared/request/ip-quota";
import { issueId } from "../../shared/routing/ids";
import { recentEarlierShards, routeKey, routeKeyIn, shardAddress } from "../../shared/routing/shard-refs";
import { shard } from "../../shared/routing/stores";
import { authorizationResponse } from "./authorization-response";
import { pageError } from "./errors";
import { type LoginOutcome, type LoginTx, openLoginTx, type SignInMethod, sealVerifiedLogin } from "./login-tx";
import type { PageMessage } from "./pages/layout";
import { codeStep, emailStep } from "./pages/login";
import { passkeyOffer } from "./pages/passkey";
import { type PageUi, txPageUi } from "./pages/ui";
import { offersPasskey, registrationChallenge, rpIdOf, userHandleOf } from "./passkey-ceremony";
import { SESSION_COOKIE, sessionCookie, TX_COOKIE } from "./sessions";

const OTP_DIGITS = 6;

export interface LoginPost {
  form: boolean;
  /** The `tx` value as posted (the page's hidden field carries it on). */
  txValue: string;
  tx: LoginTx;
  body: Record<string, unknown>;
}

export const fail = (code: "invalid_request" | "invalid_code", description: string, notice: MessageKey) =>
  new OAuthError(code, description, { headers: NO_STORE, notice });
export const invalidCode = () => fail("invalid_code", "the code is wrong, expired or already used", "error.wrong_code");

/**
 * The checks every login-page POST shares: same-origin (checklist E4), body within limits, and a
 * `tx` that opens as a live transaction whose id matches this browser's transaction cookie (CSRF
 * binding).
 */
export async function readLoginPost(c: Context<AppEnv>): Promise<LoginPost> {
  const config = c.get("config");
  const origin = c.req.header("origin");
  if (
    (origin !== undefined && origin !== new URL(config.ISSUER).origin) ||
    c.req.header("sec-fetch-site") === "cross-site"
  ) {
    if (isForm(c.req.raw))
      throw pageError("err.refused.title", "err.refused.cross_site", { status: 403, code: "forbidden" });
    throw new OAuthError("forbidden", "cross-origin request refused", { headers: NO_STORE });
  }
  const { body, form } = await readJsonOrForm(c.req.raw);
  const tx = await openLoginTx(config, body.tx, Date.now());
  if (!tx || getCookie(c.req.raw, cookieName(TX_COOKIE, config), (v) => v === tx.id.id) === null) {
    if (form) throw pageError("err.expired.title", "err.expired.start_again");
    throw new OAuthError(
      "invalid_request",
      "the login transaction is missing, unknown, expired or not this browser's",
      {
        headers: NO_STORE,
      },
    );
  }
  return { form, txValue: body.tx as string, tx, body };
}

/**
 * Runs a login-page POST. JSON callers get errors as OAuth JSON; a browser posting the form gets
 * the same status on the page it was on again (the code page for a code or a resend), with what went
 * wrong and what to do next in the page's message region.
 */
export function loginPost(
  step: "generate" | "verify",
  handler: (c: Context<AppEnv>, post: LoginPost) => Promise<Response>,
) {
  return async (c: Context<AppEnv>): Promise<Response> => {
    let post: LoginPost | undefined;
    try {
      post = await readLoginPost(c);
      return await handler(c, post);
    } catch (err) {
      // Errors that are pages already, JSON callers' errors and unexpected ones: rendered by errors.ts.
      if (!(err instanceof OAuthError) || !post?.form || err.options.page) throw err;
      const ui = txPageUi(c, post.tx.ui);
      const retry = err.options.retryAfter;
      const key = (err.options.notice ?? (err.status === 429 ? "error.locked" : "error.generic")) as MessageKey;
      const message: PageMessage = { kind: "error", html: ui.t.html(key, { wait: ui.t.duration(retry ?? 60) }) };
      const common = {
        tx: post.txValue,
        message,
        status: err.status,
        headers: { ...NO_STORE, ...(retry ? { "Retry-After": String(retry) } : {}) },
        // A new code asked for too soon: the countdown runs to when the store will take one.
        ...(err.code === "slow_down" && retry ? { resendAt: Date.now() + retry * 1000 } : {}),
      };
      const email = normalizeEmail(post.body.email);
      const onCodePage = step === "verify" || post.body.resend === "1";
      return onCodePage && email
        ? codeStepFor(c, ui, post, email, common)
        : // The address as typed, so a slip can be fixed.
          emailStep(ui, {
            ...common,
            email: typeof post.body.email === "string" ? post.body.email.slice(0, 254) : undefined,
          });
    }
  };
}

/**
 * The code page of a login: the resend countdown runs to the time the page was given (a new code
 * sets it; the page's hidden `resend_at` carries it on, for display only: the store enforces it).
 */
function codeStepFor(
  c: Context<AppEnv>,
  ui: PageUi,
  post: LoginPost,
  email: string,
  o: { tx: string; message?: PageMessage; status?: number; headers?: Record<string, string>; resendAt?: number },
): Response {
  const p = c.get("config").POLICY;
  const now = Date.now();
  const posted = Number(post.body.resend_at);
  const resendAt =
    o.resendAt ??
    (Number.isFinite(posted) ? Math.min(Math.max(posted, now), now + p.resend_interval_seconds * 1000) : now);
  return codeStep(ui, { ...o, email, codeTtlSeconds: p.otp_ttl_seconds, resendAt, now });
}

const codeMacOf = (config: Config, emailKey: string, code: string) =>
  hmac(config.OTP_HMAC_SECRET, `otp:${emailKey}:${code}`);

/**
 * The email's ChallengeStore shard in the login's region (where its first request was placed), in
 * the generation the login began in.
 */
function challengeRef(c: Context<AppEnv>, post: LoginPost, emailKey: string) {
  const config = c.get("config");
  const ref = routeKeyIn(config, "challenge", emailKey, post.tx.challengeGen, post.tx.id.ref.place.region);
  // A sealed generation the config lacks: only a config that dropped a generation gets here.
  if (!ref) throw fail("invalid_request", "the login transaction is unknown or expired", "err.expired.start_again");
  return ref;
}

const carryFrom = <K extends string>(key: K, shards: string[]) =>
  (shards.length ? { [key]: shards } : {}) as Partial<Record<K, string[]>>;

const challengeShard = (c: Context<AppEnv>, post: LoginPost, emailKey: string) =>
  shard(c.env, "challenge", challengeRef(c, post, emailKey));

function otpPolicy(config: Config): OtpPolicy {
  const p = config.POLICY;
  return {
    otp_ttl_seconds: p.otp_ttl_seconds,
    otp_max_attempts: p.otp_max_attempts,
    email_failures_per_hour: p.email_failures_per_hour,
    email_failures_per_hour_all_sources: p.email_failures_per_hour_all_sources,
    email_consecutive_failures: p.email_consecutive_failures,
    resend_interval_seconds: p.resend_interval_seconds,
    sends_per_email_per_hour: p.sends_per_email_per_hour,
  };
}

function requireEmail(post: LoginPost): string {
  const email = normalizeEmail(post.body.email);
  if (!email) throw fail("invalid_request", "email must be one valid address", "error.email_invalid");
  return email;
}

/**
 * EmailCodeGenerate (CONTRACT §2.2): the same answer whether or not the address has an account. One
 * store call: the email's ChallengeStore shard checks its limits and keeps the code (and, for captured
 * mail, the message and its `code_sent` event) in one transaction. Real mail goes out after the response.
 */
export const generateCode = loginPost("generate", async (c, post) => {
  const config = c.get("config");
  const email = requireEmail(post);
  await takeIpQuota(c, "generate");
  const now = Date.now();
  const emailKey = await auditEmailKey(config, email);

  // Invite-only: an unknown address gets a challenge no code can match and no mail, so the answer
  // (status, body, headers, and the limits that apply) is the same as for a known one.
  const deliver = config.SIGNUP === "open" || (await findUserByEmail(c.env, config.TENANT, email)) !== null;
  const code = randomDigits(OTP_DIGITS);
  const mac = deliver ? await codeMacOf(config, emailKey, code) : `unmatchable:${randomToken(16)}`;
  const ip = c.req.header("cf-connecting-ip") ?? null;
  const ui = txPageUi(c, post.tx.ui);
  const message = otpMessage(config, email, code, now, mailLookOf(ui.look, ui.t.locale));
  const captured =
    deliver && isCaptured(config, email) ? { sealed: await sealCapturedMail(config, message) } : undefined;
  // Recorded with the code, in the same call (issue 28): the code is issued and handed to the
  // transport. A first attempt that fails adds `mail_failed`; a retry that succeeds, `code_sent` again.
  const sent = deliver
    ? auditEvent(
        {
          kind: "code_sent",
          emailKey,
          tenant: config.TENANT,
          detail: { transport: config.MAIL_TRANSPORT, attempt: 1 },
        },
        ip,
      )
    : undefined;
  const issued = await challengeShard(c, post, emailKey).issueChallenge({
    emailKey,
    sourceKey: await sourceKeyOf(c),
    txHash: post.tx.hash,
    codeMac: mac,
    now,
    policy: otpPolicy(config),
    ...(captured ? { captured } : {}),
    ...(sent ? { sent } : {}),
  });
  if (!issued.ok)
    throw new OAuthError(issued.error, "too many codes requested for this address", {
      retryAfter: issued.retry_after,
      headers: NO_STORE,
      notice: issued.error === "slow_down" ? "error.resend_too_soon" : "error.too_many_codes",
    });

  // After the response: one attempt, then bounded retries from the MailOutbox (same code, never a new one).
  if (deliver && !captured)
    c.executionCtx.waitUntil(deliverOtp(c.env, config, { message, emailKey, ip, region: post.tx.id.ref.place.region }));
  if (post.form)
    return codeStepFor(c, ui, post, email, {
      tx: post.txValue,
      resendAt: now + issued.resend_after * 1000,
      ...(post.body.resend === "1" ? { message: { kind: "info", html: ui.t.html("code.sent_again") } } : {}),
    });
  return json({ sent: true, expires_in: issued.expires_in, resend_after: issued.resend_after }, 200, NO_STORE);
});

/**
 * EmailCodeVerify (CONTRACT §2.3): a right code ends the login transaction in a new session. Two store
 * calls in a row: the email's ChallengeStore shard (the code, and the user it knows for the address),
 * then the transaction's SessionStore shard (the session, its `sign_in` event and the authorization
 * request for `redirect_to`, in one transaction). D1 is read only for an address the shard does not know.
 */
export const verifyCode = loginPost("verify", async (c, post) => {
  const config = c.get("config");
  const email = requireEmail(post);
  // A code pasted from the mail may carry spaces or a dash ("123 456"); the digits are the code.
  const code = typeof post.body.code === "string" ? post.body.code.replace(/[\s-]/g, "") : undefined;
  if (code === undefined || !/^[0-9]{6}$/.test(code))
    throw fail("invalid_code", "the code is wrong, expired or already used", "error.code_format");
  await takeIpQuota(c, "verify");

  const now = Date.now();
  const emailKey = await auditEmailKey(config, email);
  const regional = challengeRef(c, post, emailKey);
  const challenges = shard(c.env, "challenge", regional);
  const home = routeKey(config, "challenge", emailKey, config.REGIONS.home);
  const codeMac = await codeMacOf(config, emailKey, code);
  // A person who has gone (the client gave up waiting) spends no code: nothing would reach them.
  const signal = c.req.raw.signal;
  if (signal.aborted) throw new OAuthError("temporarily_unavailable", "the request was cancelled", { retryAfter: 1 });
  const result = await challenges.verifyChallenge({
    emailKey,
    sourceKey: await sourceKeyOf(c),
    txHash: post.tx.hash,
    codeMac,
    now,
    policy: otpPolicy(config),
    // Outside the address's home region, wrong codes are counted at its home shard too (issue 12).
    ...(shardAddress(home) !== shardAddress(regional) ? { home: shardAddress(home) } : {}),
    // After a shard count change, the counts on the address's earlier shards are carried (issue 27 item 9).
    ...carryFrom("carryFrom", recentEarlierShards(config, regional, emailKey, LIMITS_CARRY_WINDOW_MS, now)),
    ...carryFrom("homeCarryFrom", recentEarlierShards(config, home, emailKey, LIMITS_CARRY_WINDOW_MS, now)),
  });
  // One audit row per wrong code counted against a live code (the one that locks is `lockout`); a try
  // with no live code, or at an address already locked, writes nothing (issue 27 item 10).
  if (result.status === "invalid" && result.counted !== false)
    audit(c, { kind: result.locks ? "lockout" : "code_failed", emailKey }, regional.place.region);
  if (result.status === "locked")
    throw new OAuthError("too_many_attempts", "too many wrong codes for this address", {
      retryAfter: result.retry_after,
      headers: NO_STORE,
      notice: "error.locked",
    });
  if (result.status === "invalid") throw invalidCode();
  // Issue 38 item 12d: should the person go before the answer is made (a client's timeout under load,
  // a lost connection), the code is put back for this login, so trying it again signs in instead of
  // finding it used. Platform: `request.signal` aborts on a client's disconnect with the
  // `enable_request_signal` flag (op-auth's wrangler.toml), and `waitUntil` outlives the request.
  const restore = () =>
    c.executionCtx.waitUntil(
      Promise.resolve(
        challenges.restoreCode({ emailKey, txHash: post.tx.hash, codeMac, spent: result.spent, now: Date.now() }),
      ).catch((err: unknown) => log("warn", "verify: a spent code could not be put back", { error: errorField(err) })),
    );
  if (signal.aborted) restore();
  else signal.addEventListener("abort", restore, { once: true });
  try {
    return await answerVerified(c, post, {
      email,
      emailKey,
      known: result.user,
      now,
      method: "email_code",
      remember: (known) => challenges.rememberUser(emailKey, known, now),
      // Issue 44: the login's `code_sent` events go on with it, to its session and family.
      ...(result.carried ? { audit: JSON.parse(result.carried) as AuditEvent[] } : {}),
    });
  } catch (err) {
    // A failure of ours after the spend (D1 overloaded: a 503) puts it back too, so the retry works.
    if (!(err instanceof OAuthError) || err.status >= 500) restore();
    throw err;
  } finally {
    signal.removeEventListener("abort", restore);
  }
});

/**
 * The rest of a verified sign-in, a right code's or a passkey's (issue 42, passkey.ts): the user, the
 * claims, the session and `redirect_to`, the same for both. A code may sign a person up; a passkey
 * signs in only the user it was made for (`expectUser`).
 */
export async function answerVerified(
  c: Context<AppEnv>,
  post: LoginPost,
  v: {
    email: string;
    emailKey: string;
    /** The user the address's shard knows, if it does. */
    known: KnownUserFound | null;
    now: number;
    method: SignInMethod;
    /** Tells the address's shard the user read from D1 (after the response). */
    remember: (known: KnownUser) => Promise<unknown>;
    expectUser?: string;
    /** The refusal when the address has no user (or not `expectUser`): a code's, unless given. */
    refuse?: () => OAuthError;
    /** Issue 44: the login's events so far, carried on sealed in `redirect_to`. */
    audit?: AuditEvent[];
  },
): Promise<Response> {
  const config = c.get("config");
  const { email, emailKey, now } = v;

  // The user of the address: known to its shard after the first sign-in, else read (or created) in D1
  // and remembered there after the response. Its email is the normalized address itself.
  let userId = v.known?.id;
  // The user's grants as the shard last had them pushed (issue 24): no call of their own.
  let snapshot: ClaimsSnapshot | undefined = v.known?.claims_json
    ? (JSON.parse(v.known.claims_json) as ClaimsSnapshot)
    : undefined;
  // Signed up by this very code (for the `user.created` webhook, from the sign_in event).
  let created = false;
  if (!userId) {
    const found =
      config.SIGNUP === "open" && v.method === "email_code"
        ? await findOrCreateUser(c.env, config.TENANT, email, now)
        : { user: await findUserByEmail(c.env, config.TENANT, email), created: false };
    if (!found.user) throw (v.refuse ?? invalidCode)();
    created = found.created;
    // A user with grants, unknown to this shard (a new generation, or residency): read them where they live.
    snapshot = await currentClaims(c.env, config, found.user);
    const known = snapshot ? { id: found.user.id, claims: snapshot } : { id: found.user.id };
    userId = known.id;
    c.executionCtx.waitUntil(Promise.resolve(v.remember(known)).catch(() => undefined));
  }
  if (v.expectUser !== undefined && v.expectUser !== userId) throw (v.refuse ?? invalidCode)();
  const user = { id: userId, email };
  const claims = loginOutcome(
    projectClaims(snapshot, post.tx.template ?? null, post.tx.request.organization, now / 1000),
  );

  // A new session every time, in the transaction's shard, stored when `redirect_to` is followed (it
  // carries the login sealed: login-tx.ts). Any session cookie the browser brought is replaced, never
  // reused (no fixation). Its id is a MAC of the transaction's, so the SessionStore's key alone makes
  // one transaction one session (issue 28: no second index); it is as unguessable as a random one.
  const seed = await hmac(config.OTP_HMAC_SECRET, `session-of:${post.tx.id.id}`);
  const { id: sessionId } = issueId(config, "session", { onto: post.tx.id.ref }, seed);
  const { id: sid } = issueId(config, "sid", { region: post.tx.id.ref.place.region });
  const ttl = config.POLICY.session_ttl_seconds;
  const done = await sealVerifiedLogin(config, post.tx, {
    session: { sid, sub: user.id, email: user.email, auth_time: Math.floor(now / 1000), expires_at: now + ttl * 1000 },
    sessionHash: await sha256(sessionId),
    emailKey,
    created,
    claims,
    method: v.method,
    audit: v.audit,
  });
  endReplacedSession(c, sessionId);

  const redirectTo = `${config.ISSUER}/authorize?tx=${encodeURIComponent(done)}`;
  const cookie = setCookie(cookieName(SESSION_COOKIE, config), sessionId, {
    secure: config.secureCookies,
    path: config.cookiePath,
    maxAge: ttl,
  });
  // Issue 42: a person's browser is offered a passkey before it goes on (passkey-ceremony.ts offersPasskey).
  if (post.form && v.method === "email_code" && offersPasskey(c))
    return passkeyOfferPage(c, post, { done, email, emailKey, headers: { "Set-Cookie": cookie, ...NO_STORE } });
  if (post.form)
    return new Response(null, { status: 303, headers: { Location: redirectTo, "Set-Cookie": cookie, ...NO_STORE } });
  return json({ redirect_to: redirectTo }, 200, { "Set-Cookie": cookie, ...NO_STORE });
}

/**
 * The passkey offer (pages/passkey.ts) with its creation options (WebAuthn §5.4): the tenant's host as
 * the RP, the user handle naming the address's shard, a challenge of the verified login, a
 * discoverable credential with user verification, attestation `none`.
 */
export async function passkeyOfferPage(
  c: Context<AppEnv>,
  post: LoginPost,
  o: {
    done: string;
    email: string;
    emailKey: string;
    message?: PageMessage;
    status?: number;
    headers: Record<string, string>;
  },
): Promise<Response> {
  const config = c.get("config");
  const { handle } = userHandleOf(config, o.emailKey, post.tx.id.ref.place.region);
  const options = {
    rp: { id: rpIdOf(config), name: config.ISSUER_NAME },
    user: { id: handle, name: o.email, displayName: o.email },
    challenge: await registrationChallenge(post.tx.id.id),
    // ES256, EdDSA, RS256 (WebAuthn §5.4 recommends listing ES256 and RS256).
    pubKeyCredParams: [-7, -8, -257].map((alg) => ({ type: "public-key", alg })),
    authenticatorSelection: { residentKey: "required", requireResidentKey: true, userVerification: "required" },
    attestation: "none",
    timeout: 300_000,
  };
  return passkeyOffer(txPageUi(c, post.tx.ui), {
    tx: post.txValue,
    done: o.done,
    options,
    headers: o.headers,
    ...(o.message ? { message: o.message } : {}),
    ...(o.status ? { status: o.status } : {}),
  });
}

/** A projection as the verified login seals it: claims, a picker, or a refusal (sent to the client at step 4). */
function loginOutcome(p: Projection): LoginOutcome | undefined {
  if (p.status === "pick") return { pick: true };
  if (p.status === "denied") return { denied: p.reason };
  return p.claims ? { claims: p.claims } : undefined;
}

/**
 * The session cookie a browser brought to a new login is ended after the response, unless it is the
 * session this transaction already made (a second code for it): that one stands, and keeps the
 * transaction from making another.
 */
function endReplacedSession(c: Context<AppEnv>, next: string): void {
  const config = c.get("config");
  const old = sessionCookie(config, c.req.raw);
  if (!old || old.id === next) return;
  c.executionCtx.waitUntil(
    sha256(old.id)
      .then((hash) => shard(c.env, "session", old.ref).endSession(hash))
      .then(() => undefined)
      .catch(() => undefined),
  );
}

/**
 * "Use another address" (issue 26): the address page again, for the same login transaction, with the
 * address as typed so a slip can be fixed. Nothing is stored; the authorization request is kept.
 */
export const restartLogin = loginPost("generate", async (c, post) => {
  if (!post.form) throw fail("invalid_request", "post the address to /email-code/generate", "error.generic");
  return emailStep(txPageUi(c, post.tx.ui), {
    tx: post.txValue,
    email: normalizeEmail(post.body.email) ?? undefined,
    headers: NO_STORE,
  });
});

/**
 * "Cancel" on the login's pages: the person declines to sign in, and the client hears it as
 * `access_denied` (RFC 6749 §4.1.2.1) at its redirect URI, with its state and `iss`. Nothing is stored;
 * the transaction's cookie is cleared. A device's login goes back to the device page, where the
 * request can be denied.
 */
export const cancelLogin = loginPost("generate", async (c, post) => {
  if (!post.form) throw fail("invalid_request", "cancel is a form post of the login page", "error.generic");
  // A login cancelled is no longer under way (admission.ts).
  loginEnded();
  const config = c.get("config");
  const clearTx = { "Set-Cookie": clearCookie(cookieName(TX_COOKIE, config), config.secureCookies, config.cookiePath) };
  const request = post.tx.request;
  if (request.device_user_code)
    return new Response(null, {
      status: 303,
      headers: {
        Location: `${config.ISSUER}/device?user_code=${encodeURIComponent(request.device_user_code)}`,
        ...NO_STORE,
        ...clearTx,
      },
    });
  return authorizationResponse(
    request.redirect_uri,
    config.ISSUER,
    { error: "access_denied", error_description: "the person cancelled the sign-in", state: request.state },
    request.response_mode === "form_post" ? "form_post" : "query",
    clearTx,
  );
});
