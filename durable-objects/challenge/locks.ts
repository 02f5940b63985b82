import type { OtpPolicy } from "../contract/verbs";
import { carryState } from "./carry";
import type { HomeReport } from "./home-reports";
import type { Limits, SourceCount } from "./limits";

/**
 * Seconds until this source may try codes for the address again, or 0 when it may now: locked when
 * the source spent its hourly failures, when every source together spent theirs, or after a run of
 * consecutive failures. Where every count meets: the address's and the source's here (limits.ts), the
 * home's as it last answered (home-reports.ts), and a carry under way (carry.ts).
 */
export function lockedFor(
  sql: SqlStorage,
  l: Limits,
  source: SourceCount,
  p: OtpPolicy,
  now: number,
  home: HomeReport | null,
  emailKey: string | null = null,
): number {
  const secs = (ms: number) => Math.max(1, Math.ceil(ms / 1000));
  // A wrong code tried here is not counted at the home yet: nothing is tried until it is (the
  // report is retried by the alarm), so guesses cannot outrun the home's count.
  if (home && home.unreported > 0) return 1;
  // Nor while the address's counts from before a shard count change are being carried here.
  if (emailKey !== null && carryState(sql, emailKey, now) === "pending") return 1;
  const until = Math.max(
    source.failures >= p.email_failures_per_hour ? source.until : 0,
    l.failures >= p.email_failures_per_hour_all_sources ? l.failures_reset_at : 0,
    l.consecutive >= p.email_consecutive_failures ? l.consecutive_until : 0,
    // The home's counts, as it last answered: every region's wrong codes for the address.
    home && home.home_failures >= p.email_failures_per_hour_all_sources ? home.home_failures_until : 0,
    home && home.home_consecutive >= p.email_consecutive_failures ? home.home_consecutive_until : 0,
  );
  return until > now ? secs(until - now) : 0;
}
