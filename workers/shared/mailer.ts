import type { Config } from "./config";
import type { Env } from "./env";

/** A one-time code message. Built once, rendered by the transport. */
export interface OtpMessage {
  to: string;
  code: string;
  expiresInSeconds: number;
  issuerName: string;
  issuer: string;
}

export interface RenderedMail {
  to: string;
  from: string;
  subject: string;
  text: string;
  html: string;
}

export interface Mailer {
  /** Delivers a message. Called from `waitUntil`, after the response: it must not throw. */
  send(message: OtpMessage): Promise<void>;
}

export function renderOtpMail(config: Config, m: OtpMessage): RenderedMail {
  const minutes = Math.round(m.expiresInSeconds / 60);
  const subject = `${m.code} is your ${m.issuerName} sign-in code`;
  const text = [
    `Your ${m.issuerName} sign-in code is:`,
    "",
    `    ${m.code}`,
    "",
    `It expires in ${minutes} minutes and works once.`,
    "",
    `If you did not try to sign in to ${m.issuer}, you can ignore this email: someone typed your address by mistake, and nothing happens without the code.`,
  ].join("\n");
  const esc = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
  const html = `<!doctype html><html><body style="font-family:system-ui,sans-serif;color:#1a1a1a">
<p>Your ${esc(m.issuerName)} sign-in code is:</p>
<p style="font-size:32px;font-weight:700;letter-spacing:6px;font-family:ui-monospace,monospace">${esc(m.code)}</p>
<p>It expires in ${minutes} minutes and works once.</p>
<p style="color:#666;font-size:13px">If you did not try to sign in to ${esc(m.issuer)}, you can ignore this email: nothing happens without the code.</p>
</body></html>`;
  return { to: m.to, from: config.MAIL_FROM, subject, text, html };
}

/**
 * The dev mailbox (CONTRACT §7): messages land in D1's `dev_mailbox`, readable at
 * `GET /__dev/mailbox/{email}`. Config refuses this transport in production.
 */
export class DevMailbox implements Mailer {
  constructor(
    private readonly env: Env,
    private readonly config: Config,
  ) {}

  async send(message: OtpMessage): Promise<void> {
    const mail = renderOtpMail(this.config, message);
    try {
      await this.env.DB.prepare(
        "INSERT INTO dev_mailbox (email, subject, text, html, code, sent_at) VALUES (?, ?, ?, ?, ?, ?)",
      )
        .bind(mail.to, mail.subject, mail.text, mail.html, message.code, Date.now())
        .run();
    } catch (err) {
      console.error("dev mailbox write failed", err instanceof Error ? err.message : err);
    }
  }
}

export function mailerFor(env: Env, config: Config): Mailer {
  switch (config.MAIL_TRANSPORT) {
    case "dev":
      return new DevMailbox(env, config);
  }
}
