import { auditEvent, emitAudit } from "../../../durable-objects/contract/audit-event";
import { randomToken, seal } from "../../../durable-objects/contract/crypto";
import { errorField, log } from "../../../durable-objects/contract/log";
import { outboxSealMaterial } from "../../../durable-objects/contract/mail-seal";
import type { MailLook } from "../branding/branding";
import type { Config } from "../config/config";
import type { Env } from "../platform/env";
import { type Routing, routeKey, shardAddress } from "../routing/shard-refs";
import { shardNamed } from "../routing/stores";
import { auditShardName } from "./audit";
import { MailError, type OtpMessage } from "./mail/message";
import { attempt, mailerFor, type SealedOtp } from "./mail/transport";

/** The MailOutbox shard of an address, by the HMAC of its email. */
export function outboxShardName(routing: Routing, region: string, emailKey: string): string {
  return shardAddress(routeKey(routing, "mail", emailKey, region));
}

/** The MailOutbox shard an address's retries go to. */
function outboxFor(env: Pick<Env, "MAIL_OUTBOX">, name: string) {
  return shardNamed(env, "mail", name);
}

/** The one-time-code message for `to`, as every transport renders it. */
export function otpMessage(config: Config, to: string, code: string, now: number, look?: MailLook): OtpMessage {
  const ttl = config.POLICY.otp_ttl_seconds;
  return {
    to,
    code,
    ...(look ? { look } : {}),
    expiresInSeconds: ttl,
    expiresAt: now + ttl * 1000,
    issuerName: config.ISSUER_NAME,
    issuer: config.ISSUER,
    // A tenant's mail settings are in its view of the config (tenants.ts); the default's are the transport's.
    ...(config.TENANT !== "default"
      ? { from: config.MAIL_FROM, fromName: config.MAIL_FROM_NAME, replyTo: config.MAIL_REPLY_TO }
      : {}),
  };
}

/**
 * Sends a one-time code through a real transport, after the response (`waitUntil`): one attempt here,
 * bounded by `mail_timeout_seconds`; if it fails and attempts remain, the message goes to the email's
 * MailOutbox shard, sealed under MAIL_OUTBOX_SECRET, and its alarm retries with backoff. The code is
 * never regenerated. The `code_sent` event was kept with the code; a failure is a `mail_failed` event,
 * and a retry that succeeds a `code_sent` with its attempt. Never throws. (Captured mail never comes
 * here: the ChallengeStore keeps it with the code, see captured-mail.ts.)
 */
export async function deliverOtp(
  env: Env,
  config: Config,
  m: { message: OtpMessage; emailKey: string; ip?: string | null; region: string },
): Promise<void> {
  const { message } = m;
  const id = randomToken(16);
  const auditShard = auditShardName(config, m.region, m.emailKey);
  const event = (kind: "mail_failed", detail: Record<string, unknown>) =>
    auditEvent(
      { kind, emailKey: m.emailKey, tenant: config.TENANT, detail: { transport: config.MAIL_TRANSPORT, ...detail } },
      m.ip ?? null,
    );
  const expiresAt = message.expiresAt ?? Date.now() + message.expiresInSeconds * 1000;
  const p = config.POLICY;
  let failure: MailError | null;
  try {
    failure = await attempt(mailerFor(env, config), message, p.mail_timeout_seconds * 1000, id);
  } catch (err) {
    failure = new MailError(err instanceof Error ? err.message : String(err));
  }
  // Its `code_sent` event went with the code (ChallengeStore.issueChallenge): a success writes nothing more.
  if (!failure) return;
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
      ...(message.from ? { from: message.from } : {}),
      ...(message.fromName ? { from_name: message.fromName } : {}),
      ...(message.replyTo ? { reply_to: message.replyTo } : {}),
      ...(config.TENANT !== "default" ? { tenant: config.TENANT } : {}),
      ...(message.look ? { look: message.look } : {}),
    };
    await outboxFor(env, outboxShardName(config, m.region, m.emailKey)).enqueue({
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
