import type { Config } from "../config";

/** A message in the capture table (`dev_mailbox`): the dev mailbox, or mail to the load-test domain. */
export interface CapturedMail {
  to: string;
  subject: string;
  text: string;
  code: string;
  sent_at: string;
}

/** Newest first, as CONTRACT §7 shows them. */
export async function capturedMail(db: D1Database, email: string): Promise<CapturedMail[]> {
  const { results } = await db
    .prepare("SELECT email, subject, text, code, sent_at FROM dev_mailbox WHERE email = ? ORDER BY id DESC LIMIT 50")
    .bind(email)
    .all<{ email: string; subject: string; text: string; code: string; sent_at: number }>();
  return results.map((m) => ({
    to: m.email,
    subject: m.subject,
    text: m.text,
    code: m.code,
    sent_at: new Date(m.sent_at).toISOString(),
  }));
}

/** Whether mail to `email` is captured for a load test instead of sent. */
export function isLoadTestAddress(config: Pick<Config, "LOADTEST_EMAIL_DOMAIN">, email: string): boolean {
  const domain = config.LOADTEST_EMAIL_DOMAIN;
  return domain !== undefined && email.endsWith(`@${domain}`);
}
