import { MailError, type Mailer, type MailSettings, type OtpMessage, renderOtpMail, type SendOptions } from "./message";

/**
 * Cloudflare Email Service through a `send_email` binding named SEND_EMAIL (the structured
 * `send({from, to, subject, text, html})` form). The binding has no abort signal: a slow call is
 * abandoned by the caller's timeout and retried from the outbox.
 */
export class SendEmailTransport implements Mailer {
  constructor(
    private readonly binding: SendEmail,
    private readonly settings: MailSettings,
  ) {}

  async send(message: OtpMessage, opts: SendOptions = {}): Promise<void> {
    const mail = renderOtpMail(this.settings, message);
    try {
      await this.binding.send({
        from: { email: mail.from, name: mail.fromName },
        to: mail.to,
        subject: mail.subject,
        text: mail.text,
        html: mail.html,
        ...(mail.replyTo ? { replyTo: mail.replyTo } : {}),
        headers: { "Auto-Submitted": "auto-generated", "X-Auto-Response-Suppress": "All" },
      });
    } catch (err) {
      const text = err instanceof Error ? err.message : String(err);
      if (opts.signal?.aborted) throw new MailError("send_email: timed out");
      // A refused sender or recipient will be refused again; anything else may pass on a retry.
      throw new MailError(`send_email: ${text.slice(0, 300)}`, /not (allowed|verified)|invalid/i.test(text));
    }
  }
}
