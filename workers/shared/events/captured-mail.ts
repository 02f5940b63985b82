import { seal, unseal } from "../../../durable-objects/contract/crypto";
import { outboxSealMaterial } from "../../../durable-objects/contract/mail-seal";
import type { Config } from "../config/config";
import type { Env } from "../platform/env";
import { keyShardsEverywhere } from "../routing/shard-refs";
import { shard } from "../routing/stores";
import { auditEmailKey } from "./audit";
import { type OtpMessage, renderOtpMail } from "./mail/message";

/**
 * Captured mail: what the dev transport "sends" (CONTRACT §7, `GET /__dev/mailbox/{email}`), and mail
 * to the load-test domain (`GET /admin/v1/test-mailbox/{email}`). It is kept, sealed, in the email's
 * ChallengeStore shard for an hour, written in the transaction that keeps its code, with its
 * `code_sent` audit event.
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

/** The captured message, sealed under MAIL_OUTBOX_SECRET, for the ChallengeStore to keep with its code. */
export async function sealCapturedMail(config: Config, message: OtpMessage): Promise<string> {
  const mail = renderOtpMail(config, message, "text");
  const content: Sealed = { to: mail.to, subject: mail.subject, text: mail.text, code: message.code };
  return seal(outboxSealMaterial(config.MAIL_OUTBOX_SECRET), JSON.stringify(content));
}

/**
 * The captured mail of a normalized address, newest first. It lives in the email's ChallengeStore
 * shard of the region and generation its login began in, so the address's shard in every region and
 * generation is read.
 */
export async function capturedMail(
  env: Pick<Env, "CHALLENGES">,
  config: Config,
  email: string,
): Promise<CapturedMail[]> {
  const emailKey = await auditEmailKey(config, email);
  const now = Date.now();
  const rows = (
    await Promise.all(
      keyShardsEverywhere(config, "challenge", emailKey).map((ref) =>
        shard(env as Env, "challenge", ref).capturedMail(emailKey, now),
      ),
    )
  )
    .flat()
    .sort((a, b) => b.sent_at - a.sent_at);
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
