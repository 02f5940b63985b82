import { MailError, type Mailer, type MailSettings, type OtpMessage, renderOtpMail, type SendOptions } from "./message";

export interface HttpMailSettings extends MailSettings {
  MAIL_HTTP_PROVIDER: "resend";
  MAIL_HTTP_URL?: string | undefined;
  MAIL_API_KEY?: string | undefined;
}

/** Resend's "Send Email" endpoint. */
export const RESEND_URL = "https://api.resend.com/emails";

/**
 * An email API over `fetch`: Resend's `POST /emails` (JSON `{from, to, subject, html, text}`,
 * `Authorization: Bearer <API key>`). Every attempt for one message carries the same
 * `Idempotency-Key`, so a retry after a timeout that did reach the provider sends nothing twice.
 * 429, 409 (a concurrent request with the key) and 5xx are retried; other 4xx answers are not.
 */
export class HttpTransport implements Mailer {
  constructor(private readonly settings: HttpMailSettings) {}

  async send(message: OtpMessage, opts: SendOptions = {}): Promise<void> {
    const s = this.settings;
    if (!s.MAIL_API_KEY) throw new MailError("MAIL_API_KEY is not set", true);
    const mail = renderOtpMail(s, message);
    const headers: Record<string, string> = {
      Authorization: `Bearer ${s.MAIL_API_KEY}`,
      "Content-Type": "application/json",
      Accept: "application/json",
      "User-Agent": "keyway",
    };
    if (opts.idempotencyKey) headers["Idempotency-Key"] = opts.idempotencyKey.slice(0, 256);
    let res: Response;
    try {
      res = await fetch(s.MAIL_HTTP_URL ?? RESEND_URL, {
        method: "POST",
        headers,
        body: JSON.stringify({
          from: `${quoteName(mail.fromName)} <${mail.from}>`,
          to: [mail.to],
          subject: mail.subject,
          text: mail.text,
          html: mail.html,
          ...(mail.replyTo ? { reply_to: mail.replyTo } : {}),
          headers: { "Auto-Submitted": "auto-generated", "X-Auto-Response-Suppress": "All" },
        }),
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
    } catch (err) {
      throw new MailError(
        opts.signal?.aborted ? "mail API: timed out" : `mail API: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    const body = (await res.text().catch(() => "")).slice(0, 300).replace(/[^\x20-\x7e]/g, "?");
    if (res.ok) return;
    const retryable = res.status === 409 || res.status === 429 || res.status === 408 || res.status >= 500;
    throw new MailError(`mail API: ${res.status} ${body}`, !retryable);
  }
}

/** `"Name" <addr>` as RFC 5322 wants it: the name quoted, its quotes and backslashes escaped. */
function quoteName(name: string): string {
  return `"${name.replace(/["\\]/g, (c) => `\\${c}`)}"`;
}
