import { escapeHtml } from "../http";

/** A one-time-code message. The code is the only secret in it; it is never logged. */
export interface OtpMessage {
  to: string;
  code: string;
  /** The code's lifetime in seconds, from when it was requested. */
  expiresInSeconds: number;
  /** When the code stops working (ms). Set, the mail also names that time, so every attempt renders the same. */
  expiresAt?: number;
  issuerName: string;
  issuer: string;
  /** A tenant's own sender, display name and Reply-To (issue 23); the transport's settings otherwise. */
  from?: string | undefined;
  fromName?: string | undefined;
  replyTo?: string | undefined;
}

export interface RenderedMail {
  to: string;
  from: string;
  /** The display name for From (header-safe). */
  fromName: string;
  replyTo?: string | undefined;
  subject: string;
  text: string;
  html: string;
}

/** A delivery attempt that failed. `permanent` failures (a rejected address) are not retried. */
export class MailError extends Error {
  override name = "MailError";
  constructor(
    message: string,
    readonly permanent = false,
  ) {
    super(message);
  }
}

export interface Mailer {
  /** Delivers one message or throws (`MailError` for what the provider said; any error counts as a failure). */
  send(message: OtpMessage, opts?: SendOptions): Promise<void>;
}

export interface SendOptions {
  /** Aborts the attempt (a slow provider); the outbox retries. */
  signal?: AbortSignal;
  /** A stable id for this message across attempts, for providers that deduplicate retries. */
  idempotencyKey?: string;
}

export interface MailSettings {
  MAIL_FROM: string;
  MAIL_FROM_NAME?: string | undefined;
}

/**
 * A value for a header line: no CR/LF or other control characters (no header injection whatever an
 * operator or a user typed), single spaces, bounded length.
 */
export function headerSafe(value: string, max = 200): string {
  return value
    .replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, " ")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, max);
}

/**
 * The one-time-code mail: the code prominent (first in the subject, large in the HTML), the issuer's
 * name, when it expires, and what to do if the reader did not ask for it. Every value that reaches a
 * header is header-safe; every value in the HTML is escaped.
 */
export function renderOtpMail(settings: MailSettings, m: OtpMessage): RenderedMail {
  const issuerName = headerSafe(m.issuerName, 100) || "Keyway";
  const code = m.code.replace(/[^0-9]/g, "");
  const minutes = Math.max(1, Math.ceil(m.expiresInSeconds / 60));
  const lifetime = minutes === 1 ? "1 minute" : `${minutes} minutes`;
  // The same words on every attempt (a retry is byte-for-byte the first mail, for idempotent providers).
  const expiry =
    m.expiresAt === undefined
      ? `It expires in ${lifetime} and works once.`
      : `It expires ${lifetime} after it was requested, at ${new Date(m.expiresAt).toISOString().slice(11, 16)} UTC, and works once.`;
  const host = hostOf(m.issuer);
  const subject = `${code} is your ${issuerName} sign-in code`;
  const text = [
    `Your ${issuerName} sign-in code is:`,
    "",
    `    ${code}`,
    "",
    expiry,
    "",
    `If you did not try to sign in to ${host}, you did not request this code: you can ignore this email. Someone typed your address, and nothing happens without the code. Never share it with anyone.`,
    "",
    `-- ${issuerName} (${m.issuer})`,
  ].join("\n");
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escapeHtml(subject)}</title></head>
<body style="margin:0;padding:24px;background:#f4f5f7;font-family:system-ui,-apple-system,'Segoe UI',sans-serif;color:#1a1a1a">
<div style="max-width:480px;margin:0 auto;background:#fff;border-radius:12px;padding:32px">
<p style="margin:0 0 12px;font-size:16px">Your ${escapeHtml(issuerName)} sign-in code is:</p>
<p style="margin:0 0 16px;font-size:36px;font-weight:700;letter-spacing:8px;font-family:ui-monospace,Menlo,monospace">${escapeHtml(code)}</p>
<p style="margin:0 0 16px;font-size:15px">${escapeHtml(expiry)}</p>
<p style="margin:0;color:#666;font-size:13px">If you did not try to sign in to ${escapeHtml(host)}, you did not request this code: you can ignore this email. Nothing happens without the code. Never share it with anyone.</p>
</div></body></html>`;
  return {
    to: m.to,
    from: m.from ?? settings.MAIL_FROM,
    fromName: headerSafe(m.fromName ?? settings.MAIL_FROM_NAME ?? issuerName, 100),
    ...(m.replyTo ? { replyTo: m.replyTo } : {}),
    subject: headerSafe(subject, 200),
    text,
    html,
  };
}

function hostOf(issuer: string): string {
  try {
    return new URL(issuer).host;
  } catch {
    return headerSafe(issuer, 100);
  }
}
