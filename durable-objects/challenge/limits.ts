import { LIMITS_CARRY_WINDOW_MS } from "../contract/verbs";

/**
 * An address's counts in its shard: the codes sent and the wrong codes tried in the hour, the wrong
 * codes in a row across hours (`email_limits`), and each source's wrong codes in the hour
 * (`source_failures`, so that one source cannot lock a person out: issue 15). Called inside the verb's
 * transaction; locks.ts says what the counts lock.
 */

export interface Limits {
  failures: number;
  failures_reset_at: number;
  /** Wrong codes in a row, across hourly windows; a success clears it, so does a day without one. */
  consecutive: number;
  consecutive_until: number;
  sends: number;
  sends_reset_at: number;
  last_sent_at: number;
  /**
   * Issue 44: the row's carried `code_sent` events as stored (challenge/sent-events.ts), read with the
   * limits (the same row: one statement, not two). Never written back from here.
   */
  audit?: string | null;
}

/** A source's wrong codes for an address, and when its count ends. */
export interface SourceCount {
  failures: number;
  until: number;
}

const HOUR = 3_600_000;
/** How long a run of consecutive failures is remembered after its last failure. */
export const CONSECUTIVE_FAILURES_WINDOW_MS = LIMITS_CARRY_WINDOW_MS;

export function readLimits(sql: SqlStorage, emailKey: string, now: number): Limits {
  const row = sql
    .exec<Limits & Record<string, number | string | null>>(
      `SELECT failures, failures_reset_at, sends, sends_reset_at, last_sent_at, consecutive, consecutive_until, audit
       FROM email_limits WHERE email_key = ?`,
      emailKey,
    )
    .toArray()[0];
  const l: Limits = row ?? {
    failures: 0,
    failures_reset_at: 0,
    sends: 0,
    sends_reset_at: 0,
    last_sent_at: 0,
    consecutive: 0,
    consecutive_until: 0,
  };
  // Fixed one-hour windows that start at the first event after the previous window ended.
  if (l.failures_reset_at <= now) Object.assign(l, { failures: 0, failures_reset_at: now + HOUR });
  if (l.sends_reset_at <= now) Object.assign(l, { sends: 0, sends_reset_at: now + HOUR });
  if (l.consecutive_until <= now) Object.assign(l, { consecutive: 0, consecutive_until: 0 });
  return l;
}

export function saveLimits(
  sql: SqlStorage,
  emailKey: string,
  l: Limits,
  /** Issue 44: the address's carried `code_sent` events (sent-events.ts), written in the same statement. */
  audit?: { json: string; due: number },
): void {
  const carried = audit
    ? {
        cols: ", audit, audit_due",
        vals: ", ?, ?",
        set: ", audit = excluded.audit, audit_due = MAX(COALESCE(audit_due, 0), excluded.audit_due)",
      }
    : { cols: "", vals: "", set: "" };
  sql.exec(
    // An upsert, not INSERT OR REPLACE: a replace deletes and reinserts, writing every index twice.
    `INSERT INTO email_limits (email_key, failures, failures_reset_at, sends, sends_reset_at, last_sent_at, expires_at,
       consecutive, consecutive_until${carried.cols})
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?${carried.vals})
     ON CONFLICT(email_key) DO UPDATE SET failures = excluded.failures, failures_reset_at = excluded.failures_reset_at,
       sends = excluded.sends, sends_reset_at = excluded.sends_reset_at, last_sent_at = excluded.last_sent_at,
       expires_at = excluded.expires_at, consecutive = excluded.consecutive,
       consecutive_until = excluded.consecutive_until${carried.set}`,
    emailKey,
    l.failures,
    l.failures_reset_at,
    l.sends,
    l.sends_reset_at,
    l.last_sent_at,
    Math.max(l.failures_reset_at, l.sends_reset_at, l.consecutive_until),
    l.consecutive,
    l.consecutive_until,
    ...(audit ? [audit.json, audit.due] : []),
  );
}

/**
 * This source's wrong codes for the address in the address's current hour: a source's row expires
 * when that hour ends, so every source's count starts over with the address's own.
 */
export function readSourceFailures(
  sql: SqlStorage,
  emailKey: string,
  sourceKey: string,
  l: Limits,
  now: number,
): SourceCount {
  const row = sql
    .exec<{ failures: number; expires_at: number }>(
      "SELECT failures, expires_at FROM source_failures WHERE email_key = ? AND source_key = ? AND expires_at > ?",
      emailKey,
      sourceKey,
      now,
    )
    .toArray()[0];
  return row ? { failures: row.failures, until: row.expires_at } : { failures: 0, until: l.failures_reset_at };
}

export function saveSourceFailures(sql: SqlStorage, emailKey: string, sourceKey: string, s: SourceCount): void {
  sql.exec(
    `INSERT INTO source_failures (email_key, source_key, failures, expires_at) VALUES (?, ?, ?, ?)
     ON CONFLICT(email_key, source_key) DO UPDATE SET failures = excluded.failures, expires_at = excluded.expires_at`,
    emailKey,
    sourceKey,
    s.failures,
    s.until,
  );
}

/** A source's wrong codes for the address are forgotten (its sign-in); other sources' stay until their hour ends. */
export function clearSourceFailures(sql: SqlStorage, emailKey: string, sourceKey: string): void {
  sql.exec("DELETE FROM source_failures WHERE email_key = ? AND source_key = ?", emailKey, sourceKey);
}
