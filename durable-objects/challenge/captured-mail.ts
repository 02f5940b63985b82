import type { CapturedRow } from "../contract/verbs";

/**
 * The mail the dev and load-test transports capture instead of sending (`captured`), still sealed,
 * kept in the same transaction as the code it carries; workers/shared/events/captured-mail.ts seals
 * and opens it.
 */

const HOUR = 3_600_000;
/** A captured message stays readable this long; the newest this many per address are returned. */
export const CAPTURED_MAIL_TTL_MS = HOUR;
export const CAPTURED_MAIL_LIMIT = 50;

export function keepCaptured(sql: SqlStorage, emailKey: string, sealed: string, now: number): void {
  sql.exec(
    "INSERT INTO captured (email_key, sealed, sent_at, expires_at) VALUES (?, ?, ?, ?)",
    emailKey,
    sealed,
    now,
    now + CAPTURED_MAIL_TTL_MS,
  );
}

/** The captured messages of an address, newest first (still sealed). */
export function readCaptured(sql: SqlStorage, emailKey: string, now: number): CapturedRow[] {
  return sql
    .exec<CapturedRow & Record<string, SqlStorageValue>>(
      "SELECT sealed, sent_at FROM captured WHERE email_key = ? AND expires_at > ? ORDER BY seq DESC LIMIT ?",
      emailKey,
      now,
      CAPTURED_MAIL_LIMIT,
    )
    .toArray();
}
