import type { HomeCounts } from "../contract/verbs";
import { CONSECUTIVE_FAILURES_WINDOW_MS, readLimits, readSourceFailures, saveSourceFailures } from "./limits";

/**
 * Outside an address's home region, what is owed to, and was last heard from, its home shard
 * (`home_reports`, issue 12): wrong codes tried here that the home has not counted yet, a sign-in here
 * that has yet to clear the home's counts, and the home's counts as it last answered. The store calls
 * the home (`countAtHome`) and settles the report with its answer; the alarm retries what is owed.
 */

/**
 * What a shard outside an address's home keeps of its reports there (issue 12): the home's address,
 * wrong codes tried here that the home has not counted yet, whether a sign-in here has yet to clear
 * the home's counts, and the home's counts as it last answered.
 */
export interface HomeReport {
  home: string;
  unreported: number;
  /** The source of the unreported failures (one at most: nothing is tried while a failure is owed). */
  source: string | null;
  reset: number;
  /** The source whose sign-in owes the reset. */
  reset_source: string | null;
  /** The home's shards in recent earlier generations (JSON), for the home to carry counts from. */
  carry_from: string | null;
  home_failures: number;
  home_failures_until: number;
  home_consecutive: number;
  home_consecutive_until: number;
}

/** A report to the home shard that failed (or was cut off) is retried by the alarm this soon. */
export const REPORT_RETRY_MS = 5_000;

/** Nothing owed to `home` yet, and nothing heard from it. */
export function emptyReport(home: string): HomeReport {
  return {
    home,
    unreported: 0,
    source: null,
    reset: 0,
    reset_source: null,
    carry_from: null,
    home_failures: 0,
    home_failures_until: 0,
    home_consecutive: 0,
    home_consecutive_until: 0,
  };
}

export function readHomeReport(sql: SqlStorage, emailKey: string): HomeReport | null {
  return (
    sql
      .exec<HomeReport & Record<string, SqlStorageValue>>(
        `SELECT home, unreported, source, reset, reset_source, carry_from, home_failures, home_failures_until,
           home_consecutive, home_consecutive_until FROM home_reports WHERE email_key = ?`,
        emailKey,
      )
      .toArray()[0] ?? null
  );
}

export function saveHomeReport(sql: SqlStorage, emailKey: string, r: HomeReport, now: number): void {
  sql.exec(
    `INSERT INTO home_reports (email_key, home, unreported, source, reset, reset_source, carry_from, home_failures,
       home_failures_until, home_consecutive, home_consecutive_until, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT(email_key) DO UPDATE SET home = excluded.home, unreported = excluded.unreported,
       source = excluded.source, reset = excluded.reset, reset_source = excluded.reset_source,
       carry_from = excluded.carry_from,
       home_failures = excluded.home_failures,
       home_failures_until = excluded.home_failures_until, home_consecutive = excluded.home_consecutive,
       home_consecutive_until = excluded.home_consecutive_until, expires_at = excluded.expires_at`,
    emailKey,
    r.home,
    r.unreported,
    r.source,
    r.reset,
    r.reset_source,
    r.carry_from,
    r.home_failures,
    r.home_failures_until,
    r.home_consecutive,
    r.home_consecutive_until,
    // Kept while anything is owed to the home, and while the home's counts can still lock.
    Math.max(r.home_failures_until, r.home_consecutive_until, now + CONSECUTIVE_FAILURES_WINDOW_MS),
  );
}

/**
 * The home's answer to what `owed` reported, kept (inside the caller's transaction): the source's
 * count as the home has it, and the home's counts; what was sent is no longer owed.
 */
export function settleReport(
  sql: SqlStorage,
  emailKey: string,
  owed: HomeReport,
  counts: HomeCounts,
  now: number,
): void {
  // The source's count in every region, as the home has it, stands for it here too.
  if (owed.source && counts.source_failures !== undefined && counts.source_failures_until !== undefined) {
    const l = readLimits(sql, emailKey, now);
    const here = readSourceFailures(sql, emailKey, owed.source, l, now);
    if (counts.source_failures > here.failures)
      saveSourceFailures(sql, emailKey, owed.source, {
        failures: counts.source_failures,
        until: Math.max(here.until, counts.source_failures_until),
      });
  }
  const r = readHomeReport(sql, emailKey) ?? owed;
  saveHomeReport(
    sql,
    emailKey,
    {
      ...r,
      // Only what was sent is settled: nothing else can have been added meanwhile, since no
      // code is tried while anything is owed.
      unreported: Math.max(0, r.unreported - owed.unreported),
      source: r.unreported > owed.unreported ? r.source : null,
      reset: 0,
      reset_source: null,
      home_failures: counts.failures,
      home_failures_until: counts.failures_until,
      home_consecutive: counts.consecutive,
      home_consecutive_until: counts.consecutive_until,
    },
    now,
  );
}

/** Addresses with something owed to their home, for the alarm (a hundred at a time). */
export function owedReports(sql: SqlStorage): string[] {
  return sql
    .exec<{ email_key: string }>("SELECT email_key FROM home_reports WHERE unreported > 0 OR reset > 0 LIMIT 100")
    .toArray()
    .map((r) => r.email_key);
}

/** What the alarm has still to retry: reports owed to homes, and carries not done (carry.ts). */
export function retriesLeft(sql: SqlStorage): number {
  return sql
    .exec<{ n: number }>(
      `SELECT (SELECT COUNT(*) FROM home_reports WHERE unreported > 0 OR reset > 0)
         + (SELECT COUNT(*) FROM carry_pending WHERE done = 0) AS n`,
    )
    .one().n;
}
