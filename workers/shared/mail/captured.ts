import type { AuditEvent } from "../audit";
import { auditEmailKey } from "../audit";
import type { Config } from "../config";
import { seal, unseal } from "../crypto";
import type { Env } from "../env";
import { type OtpMessage, renderOtpMail } from "./message";
import { outboxFor, outboxSealMaterial, outboxShardName } from "./outbox";

/**
 * Captured mail: what the dev transport "sends" (CONTRACT §7, `GET /__dev/mailbox/{email}`), and mail
 * to the load-test domain (`GET /admin/v1/test-mailbox/{email}`). It is kept, sealed, in the email's
 * MailOutbox shard for an hour, and written in one transaction with its `code_sent` audit event.
 */
export interface CapturedMail {
  to: string;
  subject: string;
  text: string;
  code: string;
  sent_at: string;
}

type Sealed = Omit<CapturedMail, "sent_at">;

/** Whether mail to `email` is captured for a load test instead of sent. */
export function isLoadTestAddress(config: Pick<Config, "LOADTEST_EMAIL_DOMAIN">, email: string): boolean {
  const domain = config.LOADTEST_EMAIL_DOMAIN;
  return domain !== undefined && email.endsWith(`@${domain}`);
}

/** Whether mail to `email` is captured rather than sent: the dev transport, or a load-test address. */
export function isCaptured(config: Pick<Config, "LOADTEST_EMAIL_DOMAIN" | "MAIL_TRANSPORT">, email: string): boolean {
  return config.MAIL_TRANSPORT === "dev" || isLoadTestAddress(config, email);
}

export async function captureMail(
  env: Pick<Env, "MAIL_OUTBOX">,
  config: Config,
  emailKey: string,
  message: OtpMessage,
  sent: AuditEvent,
): Promise<void> {
  const mail = renderOtpMail(config, message);
  const content: Sealed = { to: mail.to, subject: mail.subject, text: mail.text, code: message.code };
  const sealed = await seal(outboxSealMaterial(config.MAIL_OUTBOX_SECRET), JSON.stringify(content));
  await outboxFor(env, outboxShardName(config.SHARDS, emailKey)).capture(
    { key: emailKey, sealed, sent_at: Date.now() },
    sent,
  );
}

/** The captured mail of a normalized address, newest first. */
export async function capturedMail(
  env: Pick<Env, "MAIL_OUTBOX">,
  config: Config,
  email: string,
): Promise<CapturedMail[]> {
  const emailKey = await auditEmailKey(config, email);
  const rows = await outboxFor(env, outboxShardName(config.SHARDS, emailKey)).captured(emailKey, Date.now());
  const material = outboxSealMaterial(config.MAIL_OUTBOX_SECRET);
  const out: CapturedMail[] = [];
  for (const row of rows) {
    const opened = await unseal(material, row.sealed);
    // Sealed under another MAIL_OUTBOX_SECRET (rotated since): unreadable, so not shown.
    if (opened === null) continue;
    const m = JSON.parse(opened) as Sealed;
    out.push({
      to: m.to,
      subject: m.subject,
      text: m.text,
      code: m.code,
      sent_at: new Date(row.sent_at).toISOString(),
    });
  }
  return out;
}
