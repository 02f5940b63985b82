import type { Context } from "hono";
import type { OtpPolicy } from "../../../durable-objects/challenge-store";
import type { AppEnv } from "../../shared/app";
import { audit, requestAuditEvent } from "../../shared/audit";
import type { Config } from "../../shared/config";
import { hmac, randomDigits, randomToken, sha256 } from "../../shared/crypto";
import { normalizeEmail } from "../../shared/email";
import { OAuthError } from "../../shared/errors";
import { cookieName, getCookie, isForm, json, NO_STORE, readJsonOrForm, setCookie } from "../../shared/http";
import { deliverOtp } from "../../shared/mailer";
import { issueId, type ParsedId, parseId, routeKey } from "../../shared/sharding";
import { routeFromString, routeToString, shard } from "../../shared/stores";
import { findOrCreateUser, findUserByEmail } from "../../shared/users";
import { takeIpQuota } from "./ip-quota";
import { codeStep, emailStep, errorPage } from "./login-page";
import { SESSION_COOKIE, TX_COOKIE } from "./sessions";

const OTP_DIGITS = 6;

interface LoginPost {
  form: boolean;
  tx: ParsedId;
  txHash: string;
  body: Record<string, unknown>;
}

const fail = (code: "invalid_request" | "invalid_code", description: string) =>
  new OAuthError(code, description, { headers: NO_STORE });
const invalidCode = () => fail("invalid_code", "the code is wrong, expired or already used");

/**
 * The checks every login-page POST shares: same-origin (checklist E4), body within limits, and a
 * `tx` that names a transaction and matches this browser's transaction cookie (CSRF binding).
 */
async function readLoginPost(c: Context<AppEnv>): Promise<LoginPost> {
  const config = c.get("config");
  const origin = c.req.header("origin");
  if (
    (origin !== undefined && origin !== new URL(config.ISSUER).origin) ||
    c.req.header("sec-fetch-site") === "cross-site"
  ) {
    if (isForm(c.req.raw))
      throw new PageResponse(errorPage("Request refused", "This form was posted from another site.", 403, NO_STORE));
    throw new OAuthError("forbidden", "cross-origin request refused", { headers: NO_STORE });
  }
  const { body, form } = await readJsonOrForm(c.req.raw);
  const cookie = getCookie(c.req.raw, cookieName(TX_COOKIE, config.secureCookies));
  const tx = parseId(config.SHARDS, "tx", body.tx);
  if (!tx || cookie !== tx.id) {
    const err = fail("invalid_request", "the login transaction is missing, unknown or not this browser's");
    if (form) throw new PageResponse(errorPage("Sign-in expired", "Start again from the application.", 400, NO_STORE));
    throw err;
  }
  return { form, tx, txHash: await sha256(tx.id), body };
}

/** A finished page to answer with (form posts), carried out of the shared checks. */
class PageResponse extends Error {
  constructor(readonly response: Response) {
    super("page response");
  }
}

/**
 * Runs a login-page POST. JSON callers get errors as OAuth JSON; a browser posting the form gets
 * the same status on the login page again, with a message and the step it was on.
 */
function loginPost(step: "generate" | "verify", handler: (c: Context<AppEnv>, post: LoginPost) => Promise<Response>) {
  return async (c: Context<AppEnv>): Promise<Response> => {
    let post: LoginPost | undefined;
    try {
      post = await readLoginPost(c);
      return await handler(c, post);
    } catch (err) {
      if (err instanceof PageResponse) return err.response;
      if (!(err instanceof OAuthError) || !post?.form) throw err;
      const config = c.get("config");
      const retry = err.options.retryAfter;
      const message =
        err.code === "invalid_code"
          ? "That code is not right, or it has expired."
          : err.status === 429
            ? `Too many tries. Wait ${retry ?? 60} seconds and try again.`
            : (err.description ?? "Something went wrong.");
      const common = {
        issuerName: config.ISSUER_NAME,
        tx: post.tx.id,
        error: message,
        status: err.status,
        headers: { ...NO_STORE, ...(retry ? { "Retry-After": String(retry) } : {}) },
      };
      const email = normalizeEmail(post.body.email);
      return step === "verify" && email ? codeStep({ ...common, email }) : emailStep(common);
    }
  };
}

const emailKeyOf = (config: Config, email: string) => hmac(config.OTP_HMAC_SECRET, `email:${email}`);
const codeMacOf = (config: Config, emailKey: string, code: string) =>
  hmac(config.OTP_HMAC_SECRET, `otp:${emailKey}:${code}`);

function otpPolicy(config: Config): OtpPolicy {
  const p = config.POLICY;
  return {
    otp_ttl_seconds: p.otp_ttl_seconds,
    otp_max_attempts: p.otp_max_attempts,
    email_failures_per_hour: p.email_failures_per_hour,
    resend_interval_seconds: p.resend_interval_seconds,
    sends_per_email_per_hour: p.sends_per_email_per_hour,
  };
}

function requireEmail(post: LoginPost): string {
  const email = normalizeEmail(post.body.email);
  if (!email) throw fail("invalid_request", "email must be one valid address");
  return email;
}

/** EmailCodeGenerate (CONTRACT §2.2): the same answer whether or not the address has an account. */
export const generateCode = loginPost("generate", async (c, post) => {
  const config = c.get("config");
  const email = requireEmail(post);
  const now = Date.now();
  const emailKey = await emailKeyOf(config, email);
  const challengeRef = routeKey(config.SHARDS, "challenge", emailKey);

  const [bound] = await Promise.all([
    shard(c.env, "session", post.tx.ref).bindEmail(post.txHash, emailKey, routeToString(challengeRef), now),
    takeIpQuota(c, "generate"),
  ]);
  if (!bound) throw fail("invalid_request", "the login transaction is unknown or expired");

  // Invite-only: an unknown address gets a challenge no code can match and no mail, so the answer
  // (status, body, headers, and the limits that apply) is the same as for a known one.
  const deliver = config.SIGNUP === "open" || (await findUserByEmail(c.env, email)) !== null;
  const code = randomDigits(OTP_DIGITS);
  const mac = deliver ? await codeMacOf(config, emailKey, code) : `unmatchable:${randomToken(16)}`;
  const issued = await shard(c.env, "challenge", challengeRef).issueChallenge(
    emailKey,
    post.txHash,
    mac,
    now,
    otpPolicy(config),
  );
  if (!issued.ok)
    throw new OAuthError(issued.error, "too many codes requested for this address", {
      retryAfter: issued.retry_after,
      headers: NO_STORE,
    });

  // After the response: one attempt, then bounded retries from the MailOutbox (same code, never a new one).
  if (deliver)
    c.executionCtx.waitUntil(
      deliverOtp(c.env, config, {
        to: email,
        code,
        expiresInSeconds: issued.expires_in,
        emailKey,
        ip: c.req.header("cf-connecting-ip") ?? null,
      }),
    );
  if (post.form) return codeStep({ issuerName: config.ISSUER_NAME, tx: post.tx.id, email });
  return json({ sent: true, expires_in: issued.expires_in, resend_after: issued.resend_after }, 200, NO_STORE);
});

/** EmailCodeVerify (CONTRACT §2.3): a right code ends the login transaction in a new session. */
export const verifyCode = loginPost("verify", async (c, post) => {
  const config = c.get("config");
  const email = requireEmail(post);
  const code = post.body.code;
  if (typeof code !== "string" || !/^[0-9]{6}$/.test(code)) throw invalidCode();

  const now = Date.now();
  const sessions = shard(c.env, "session", post.tx.ref);
  const [pending] = await Promise.all([sessions.pendingLogin(post.txHash, now), takeIpQuota(c, "verify")]);
  // A finished or expired transaction means its code was used or has expired: CONTRACT §2.3 gives
  // one answer, invalid_code, for wrong, expired and already used codes (checklist A6).
  if (!pending) throw invalidCode();
  const emailKey = await emailKeyOf(config, email);
  const route = routeFromString(pending.challenge_route);
  if (pending.email !== emailKey || !route) throw invalidCode();

  const mac = await codeMacOf(config, emailKey, code);
  const result = await shard(c.env, "challenge", route).verifyChallenge(
    emailKey,
    post.txHash,
    mac,
    now,
    otpPolicy(config),
  );
  if (result.status !== "ok") audit(c, { kind: result.status === "locked" ? "lockout" : "code_failed", emailKey });
  if (result.status === "locked")
    throw new OAuthError("too_many_attempts", "too many wrong codes for this address", {
      retryAfter: result.retry_after,
      headers: NO_STORE,
    });
  if (result.status === "invalid") throw invalidCode();

  const user =
    config.SIGNUP === "open" ? await findOrCreateUser(c.env, email, now) : await findUserByEmail(c.env, email);
  if (!user) throw invalidCode();

  // A new session every time, in the transaction's shard, so finishing the login is one atomic call.
  // Any session cookie the browser brought is replaced, never reused (no fixation).
  const { id: sessionId } = issueId(config.SHARDS, "session", post.tx.ref);
  const { id: sid } = issueId(config.SHARDS, "sid");
  const ttl = config.POLICY.session_ttl_seconds;
  const done = await sessions.completeLogin(
    post.txHash,
    await sha256(sessionId),
    { sid, sub: user.id, email: user.email, auth_time: Math.floor(now / 1000), expires_at: now + ttl * 1000 },
    now,
    requestAuditEvent(c, { kind: "sign_in", user: user.id, emailKey, detail: { sid } }),
  );
  if (!done) throw fail("invalid_request", "the login transaction is already finished");
  endReplacedSession(c);

  const redirectTo = `${config.ISSUER}/authorize?tx=${encodeURIComponent(post.tx.id)}`;
  const cookie = setCookie(cookieName(SESSION_COOKIE, config.secureCookies), sessionId, {
    secure: config.secureCookies,
    maxAge: ttl,
  });
  if (post.form)
    return new Response(null, { status: 303, headers: { Location: redirectTo, "Set-Cookie": cookie, ...NO_STORE } });
  return json({ redirect_to: redirectTo }, 200, { "Set-Cookie": cookie, ...NO_STORE });
});

/** The session cookie a browser brought to a new login is ended after the response. */
function endReplacedSession(c: Context<AppEnv>): void {
  const config = c.get("config");
  const old = parseId(config.SHARDS, "session", getCookie(c.req.raw, cookieName(SESSION_COOKIE, config.secureCookies)));
  if (!old) return;
  c.executionCtx.waitUntil(
    sha256(old.id)
      .then((hash) => shard(c.env, "session", old.ref).endSession(hash))
      .then(() => undefined)
      .catch(() => undefined),
  );
}
