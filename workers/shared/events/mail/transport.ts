import type { MailLook } from "../../branding/branding";
import type { Config } from "../../config/config";
import type { MailConfig } from "../../config/mail-settings";
import { HttpTransport } from "./http";
import { MailError, type Mailer, type OtpMessage } from "./message";
import { SendEmailTransport } from "./send-email";
import { SmtpTransport } from "./smtp";

/**
 * Sending one message through the configured transport: what the first attempt (index.ts, in the
 * Worker) and the retries (the MailOutbox's alarm) share. A leaf module: the stores may import it.
 */

export interface MailEnv {
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
  /** The tenant's sender overrides and id (issue 23), when it is not the default tenant. */
  from?: string;
  from_name?: string;
  reply_to?: string;
  tenant?: string;
  /** The language and branding of the first attempt's mail (issue 26), so a retry reads the same. */
  look?: MailLook;
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
