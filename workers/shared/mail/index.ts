import { auditEvent, auditShardName, emitAudit } from "../audit";
import type { Config, MailConfig } from "../config";
import { randomToken, seal } from "../crypto";
import type { Env } from "../env";
import { errorField, log } from "../log";
import { HttpTransport } from "./http";
import { MailError, type Mailer, type OtpMessage } from "./message";
import { outboxFor, outboxSealMaterial, outboxShardName } from "./outbox";
import { SendEmailTransport } from "./send-email";
import { SmtpTransport } from "./smtp";

export { MailError, type Mailer, type OtpMessage, type RenderedMail, renderOtpMail } from "./message";
export { outboxFor, outboxSealMaterial, outboxShardName } from "./outbox";

interface MailEnv {
  SEND_EMAIL?: SendEmail;
}

/** The transport config chose. Config has checked each transport's settings (and its binding) at start-up. */
export function mailerFor(env: MailEnv, config: MailConfig | Config): Mailer {
  switch (config.MAIL_TRANSPORT) {
    case "dev":
      // deliverOtp captures dev mail before it would reach a transport; nothing sends it.
      throw new MailError("the dev transport captures mail in the MailOutbox; it sends nothing", true);
    case "send_email":
      if (!env.SEND_EMAIL) throw new MailError("the send_email binding SEND_EMAIL is missing", true);
      return new SendEmailTransport(env.SEND_EMAIL, config);
    case "http":
      return new HttpTransport(config);
    case "smtp":
      return new SmtpTransport(config);
  }
}

/** What waits in the MailOutbox, sealed: enough to render the same mail again, with the same code. */
export interface SealedOtp {
  to: string;
  code: string;
  /** When the code stops working (ms): a retry after that is pointless. */
  expires_at: number;
  /** The code's lifetime, as the first attempt's mail said it. */
  ttl_seconds: number;
  issuer_name: string;
  issuer: string;
}

/** One attempt, abandoned after `timeoutMs`. Resolves to null on success, else the failure. */
export async function attempt(
  mailer: Mailer,
  message: OtpMessage,
  timeoutMs: number,
  idempotencyKey: string,
): Promise<MailError | null> {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new MailError(`timed out after ${timeoutMs} ms`));
    }, timeoutMs);
  });
  try {
    await Promise.race([mailer.send(message, { signal: controller.signal, idempotencyKey }), timeout]);
    return null;
  } catch (err) {
    return err instanceof MailError ? err : new MailError(err instanceof Error ? err.message : String(err));
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}

/** The one-time-code message for `to`, as every transport renders it. */
export function otpMessage(config: Config, to: string, code: string, now: number): OtpMessage {
  const ttl = config.POLICY.otp_ttl_seconds;
  return {
    to,
    code,
    expiresInSeconds: ttl,
    expiresAt: now + ttl * 1000,
    issuerName: config.ISSUER_NAME,
    issuer: config.ISSUER,
  };
}

/**
 * Sends a one-time code through a real transport, after the response (`waitUntil`): one attempt here,
 * bounded by `mail_timeout_seconds`; if it fails and attempts remain, the message goes to the email's
 * MailOutbox shard, sealed under MAIL_OUTBOX_SECRET, and its alarm retries with backoff. The code is
 * never regenerated; each outcome is an audit event. Never throws. (Captured mail never comes here:
 * the ChallengeStore keeps it with the code, see captured.ts.)
 */
export async function deliverOtp(
  env: Env,
  config: Config,
  m: { message: OtpMessage; emailKey: string; ip?: string | null },
): Promise<void> {
  const { message } = m;
  const id = randomToken(16);
  const auditShard = auditShardName(config.SHARDS, m.emailKey);
  const event = (kind: "code_sent" | "mail_failed", detail: Record<string, unknown>) =>
    auditEvent({ kind, emailKey: m.emailKey, detail: { transport: config.MAIL_TRANSPORT, ...detail } }, m.ip ?? null);
  const expiresAt = message.expiresAt ?? Date.now() + message.expiresInSeconds * 1000;
  const p = config.POLICY;
  let failure: MailError | null;
  try {
    failure = await attempt(mailerFor(env, config), message, p.mail_timeout_seconds * 1000, id);
  } catch (err) {
    failure = new MailError(err instanceof Error ? err.message : String(err));
  }
  if (!failure) {
    await emitAudit(env, auditShard, [event("code_sent", { attempt: 1 })]);
    return;
  }
  const nextAt = Date.now() + p.mail_retry_seconds * 1000;
  const retry = !failure.permanent && p.mail_attempts > 1 && nextAt < expiresAt;
  await emitAudit(env, auditShard, [event("mail_failed", { attempt: 1, error: failure.message, retry })]);
  if (!retry) return;
  try {
    const sealed: SealedOtp = {
      to: message.to,
      code: message.code,
      expires_at: expiresAt,
      ttl_seconds: message.expiresInSeconds,
      issuer_name: config.ISSUER_NAME,
      issuer: config.ISSUER,
    };
    await outboxFor(env, outboxShardName(config.SHARDS, m.emailKey)).enqueue({
      key: m.emailKey,
      id,
      sealed: await seal(outboxSealMaterial(config.MAIL_OUTBOX_SECRET), JSON.stringify(sealed)),
      attempts: 1,
      max_attempts: p.mail_attempts,
      retry_ms: p.mail_retry_seconds * 1000,
      timeout_ms: p.mail_timeout_seconds * 1000,
      next_at: nextAt,
      expires_at: expiresAt,
      audit_shard: auditShard,
    });
  } catch (err) {
    log("error", "mail outbox: could not enqueue", { error: errorField(err) });
  }
}
