import { type Mailer, type MailSettings, type OtpMessage, renderOtpMail } from "./message";

/**
 * The dev mailbox (CONTRACT §7): messages land in D1's `dev_mailbox`, readable at
 * `GET /__dev/mailbox/{email}`. Config refuses this transport in production.
 */
export class DevMailbox implements Mailer {
  constructor(
    private readonly db: D1Database,
    private readonly settings: MailSettings,
  ) {}

  async send(message: OtpMessage): Promise<void> {
    const mail = renderOtpMail(this.settings, message);
    await this.db
      .prepare("INSERT INTO dev_mailbox (email, subject, text, html, code, sent_at) VALUES (?, ?, ?, ?, ?, ?)")
      .bind(mail.to, mail.subject, mail.text, mail.html, message.code, Date.now())
      .run();
  }
}
