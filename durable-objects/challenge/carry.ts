import { type CarriedLimits, LIMITS_CARRY_WINDOW_MS } from "../contract/verbs";
import { type Limits, readLimits, readSourceFailures, saveLimits, saveSourceFailures } from "./limits";

/**
 * An address's counts carried across a shard count change (issue 27 item 9): its first wrong code on a
 * shard of a new generation marks a carry (`carry_pending`), the store asks the address's shards in
 * the earlier generations for their counts (`countsToCarry` there) and adds them to its own
 * (`addCarried`). While `done` is 0, no code of the address is tried (locks.ts); once done, the row
 * stays for the carry window so the counts are carried once, never again after a sign-in.
 */

/** A carry that cannot reach the earlier shard holds the address's codes this long, then gives up (logged). */
export const CARRY_PENDING_MS = 60_000;

/** Whether the address's counts are being carried here, were carried, or neither (within the window). */
export function carryState(sql: SqlStorage, emailKey: string, now: number): "none" | "pending" | "done" {
  const row = sql
    .exec<{ done: number }>("SELECT done FROM carry_pending WHERE email_key = ? AND expires_at > ?", emailKey, now)
    .toArray()[0];
  return row ? (row.done ? "done" : "pending") : "none";
}

export function markCarry(sql: SqlStorage, emailKey: string, sources: string[], now: number): void {
  sql.exec(
    `INSERT INTO carry_pending (email_key, sources, done, expires_at) VALUES (?, ?, 0, ?)
     ON CONFLICT(email_key) DO UPDATE SET sources = excluded.sources, done = 0, expires_at = excluded.expires_at`,
    emailKey,
    JSON.stringify(sources),
    now + CARRY_PENDING_MS,
  );
}

/** The earlier shards an address's pending carry reads from (JSON, a list of addresses); null when none is pending. */
export function carrySources(sql: SqlStorage, emailKey: string): string | null {
  const pending = sql
    .exec<{ sources: string }>("SELECT sources FROM carry_pending WHERE email_key = ? AND done = 0", emailKey)
    .toArray()[0];
  return pending?.sources ?? null;
}

/** Addresses whose carry is pending, for the alarm (a hundred at a time). */
export function pendingCarries(sql: SqlStorage, now: number): string[] {
  return sql
    .exec<{ email_key: string }>("SELECT email_key FROM carry_pending WHERE done = 0 AND expires_at > ? LIMIT 100", now)
    .toArray()
    .map((r) => r.email_key);
}

/**
 * An address's counts on this shard, for its shard in a later generation to carry: the hourly and
 * in-a-row failures and every source's, while they last. Reads only.
 */
export function countsToCarry(sql: SqlStorage, emailKey: string, now: number): CarriedLimits | null {
  const l = sql
    .exec<Limits & Record<string, SqlStorageValue>>(
      `SELECT failures, failures_reset_at, consecutive, consecutive_until, sends, sends_reset_at, last_sent_at
       FROM email_limits WHERE email_key = ?`,
      emailKey,
    )
    .toArray()[0];
  const sources = sql
    .exec<{ source_key: string; failures: number; expires_at: number }>(
      "SELECT source_key, failures, expires_at FROM source_failures WHERE email_key = ? AND expires_at > ? LIMIT 200",
      emailKey,
      now,
    )
    .toArray();
  const carried = carryState(sql, emailKey, now) !== "none";
  if (!l && sources.length === 0 && !carried) return null;
  const live = (until: number, n: number) => (until > now ? n : 0);
  return {
    carried,
    failures: l ? live(l.failures_reset_at, l.failures) : 0,
    failures_reset_at: l?.failures_reset_at ?? 0,
    consecutive: l ? live(l.consecutive_until, l.consecutive) : 0,
    consecutive_until: l?.consecutive_until ?? 0,
    sources,
  };
}

/**
 * The earlier shards' counts (newest generation first) added to what was counted here since (the
 * failure that started the carry), and the carry marked done, inside the caller's transaction.
 */
export function addCarried(sql: SqlStorage, emailKey: string, carried: (CarriedLimits | null)[], now: number): void {
  const l = readLimits(sql, emailKey, now);
  // Newest generation first: a shard that itself carried from older ones already holds their
  // counts, so the older ones are not added twice.
  for (const c of carried) {
    if (!c) continue;
    if (c.failures > 0) {
      l.failures += c.failures;
      l.failures_reset_at = Math.max(l.failures_reset_at, c.failures_reset_at);
    }
    if (c.consecutive > 0) {
      l.consecutive += c.consecutive;
      l.consecutive_until = Math.max(l.consecutive_until, c.consecutive_until);
    }
    for (const s of c.sources) {
      const here = readSourceFailures(sql, emailKey, s.source_key, l, now);
      saveSourceFailures(sql, emailKey, s.source_key, {
        failures: here.failures + s.failures,
        until: Math.max(here.until, s.expires_at),
      });
    }
    if (c.carried) break;
  }
  saveLimits(sql, emailKey, l);
  // Carried once for the window: a later wrong code (after a sign-in, say) carries nothing again.
  sql.exec(
    "UPDATE carry_pending SET done = 1, expires_at = ? WHERE email_key = ?",
    now + LIMITS_CARRY_WINDOW_MS,
    emailKey,
  );
}
