import { countVerbCalls, ShardStore } from "./shard-store";

/**
 * One-time email codes and the per-email limits that guard them, in the shard of the email (keyed by
 * an HMAC of the normalized address, so no address or code is stored in the clear). A code is stored
 * only as an HMAC computed by the Worker under the OTP secret; comparison is constant-time.
 */

export interface OtpPolicy {
  otp_ttl_seconds: number;
  otp_max_attempts: number;
  email_failures_per_hour: number;
  resend_interval_seconds: number;
  sends_per_email_per_hour: number;
}

export type IssueResult =
  | { ok: true; expires_in: number; resend_after: number }
  | { ok: false; error: "slow_down" | "too_many_requests"; retry_after: number };

export type VerifyResult = { status: "ok" } | { status: "invalid" } | { status: "locked"; retry_after: number };

interface Limits {
  failures: number;
  failures_reset_at: number;
  sends: number;
  sends_reset_at: number;
  last_sent_at: number;
}

const HOUR = 3_600_000;
const encoder = new TextEncoder();

export class ChallengeStore extends ShardStore {
  protected schema(): string[] {
    return [
      `CREATE TABLE IF NOT EXISTS challenges (
        email_key TEXT PRIMARY KEY,
        tx_hash TEXT NOT NULL,
        code_mac TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        expires_at INTEGER NOT NULL)`,
      "CREATE INDEX IF NOT EXISTS challenges_exp ON challenges(expires_at)",
      `CREATE TABLE IF NOT EXISTS email_limits (
        email_key TEXT PRIMARY KEY,
        failures INTEGER NOT NULL,
        failures_reset_at INTEGER NOT NULL,
        sends INTEGER NOT NULL,
        sends_reset_at INTEGER NOT NULL,
        last_sent_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL)`,
      "CREATE INDEX IF NOT EXISTS email_limits_exp ON email_limits(expires_at)",
      `CREATE TABLE IF NOT EXISTS ip_quota (
        bucket TEXT PRIMARY KEY,
        used INTEGER NOT NULL,
        expires_at INTEGER NOT NULL)`,
      "CREATE INDEX IF NOT EXISTS ip_quota_exp ON ip_quota(expires_at)",
    ];
  }

  protected expiringTables(): string[] {
    return ["challenges", "email_limits", "ip_quota"];
  }

  #limits(emailKey: string, now: number): Limits {
    const row = this.sql
      .exec<Limits & Record<string, number>>(
        "SELECT failures, failures_reset_at, sends, sends_reset_at, last_sent_at FROM email_limits WHERE email_key = ?",
        emailKey,
      )
      .toArray()[0];
    const l: Limits = row ?? { failures: 0, failures_reset_at: 0, sends: 0, sends_reset_at: 0, last_sent_at: 0 };
    // Fixed one-hour windows that start at the first event after the previous window ended.
    if (l.failures_reset_at <= now) Object.assign(l, { failures: 0, failures_reset_at: now + HOUR });
    if (l.sends_reset_at <= now) Object.assign(l, { sends: 0, sends_reset_at: now + HOUR });
    return l;
  }

  #saveLimits(emailKey: string, l: Limits): void {
    this.sql.exec(
      `INSERT OR REPLACE INTO email_limits (email_key, failures, failures_reset_at, sends, sends_reset_at, last_sent_at, expires_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
      emailKey,
      l.failures,
      l.failures_reset_at,
      l.sends,
      l.sends_reset_at,
      l.last_sent_at,
      Math.max(l.failures_reset_at, l.sends_reset_at),
    );
  }

  /**
   * Stores a new code for an email, replacing (voiding) any older one, unless the resend interval,
   * the hourly send quota or the hourly failure limit says no. A refused request stores nothing.
   */
  async issueChallenge(
    emailKey: string,
    txHash: string,
    codeMac: string,
    now: number,
    p: OtpPolicy,
  ): Promise<IssueResult> {
    const l = this.#limits(emailKey, now);
    const secs = (ms: number) => Math.max(1, Math.ceil(ms / 1000));
    if (l.failures >= p.email_failures_per_hour)
      return { ok: false, error: "too_many_requests", retry_after: secs(l.failures_reset_at - now) };
    const resendAt = l.last_sent_at + p.resend_interval_seconds * 1000;
    if (resendAt > now) return { ok: false, error: "slow_down", retry_after: secs(resendAt - now) };
    if (l.sends >= p.sends_per_email_per_hour)
      return { ok: false, error: "too_many_requests", retry_after: secs(l.sends_reset_at - now) };

    const expiresAt = now + p.otp_ttl_seconds * 1000;
    this.ctx.storage.transactionSync(() => {
      this.sql.exec(
        "INSERT OR REPLACE INTO challenges (email_key, tx_hash, code_mac, attempts, expires_at) VALUES (?, ?, ?, 0, ?)",
        emailKey,
        txHash,
        codeMac,
        expiresAt,
      );
      l.sends += 1;
      l.last_sent_at = now;
      this.#saveLimits(emailKey, l);
    });
    await this.expireAt(expiresAt);
    return { ok: true, expires_in: p.otp_ttl_seconds, resend_after: p.resend_interval_seconds };
  }

  /**
   * Takes one unit of an IP's quota for `action` in a fixed one-minute and a fixed one-hour window;
   * refused when either is spent, with Retry-After until that window ends.
   */
  async takeIpQuota(ipKey: string, action: "generate" | "verify", limits: IpLimits, now: number): Promise<QuotaResult> {
    let refusedUntil = 0;
    for (const [windowMs, limit] of [
      [60_000, limits.perMinute],
      [3_600_000, limits.perHour],
    ] as const) {
      const windowStart = now - (now % windowMs);
      const expiresAt = windowStart + windowMs;
      const { used } = this.sql
        .exec<{ used: number }>(
          `INSERT INTO ip_quota (bucket, used, expires_at) VALUES (?, 1, ?)
           ON CONFLICT(bucket) DO UPDATE SET used = used + 1 RETURNING used`,
          `${action}:${windowMs}:${ipKey}:${windowStart}`,
          expiresAt,
        )
        .one();
      if (used === 1) await this.expireAt(expiresAt);
      if (used > limit) refusedUntil = Math.max(refusedUntil, expiresAt);
    }
    if (refusedUntil) return { ok: false, retry_after: Math.max(1, Math.ceil((refusedUntil - now) / 1000)) };
    return { ok: true };
  }

  /**
   * Checks a code for an email within the login transaction that requested it. A wrong code counts
   * an attempt on the challenge and a failure for the email; the challenge dies after the allowed
   * attempts (even the right code then fails). Success consumes the challenge and clears failures.
   */
  verifyChallenge(emailKey: string, txHash: string, codeMac: string, now: number, p: OtpPolicy): VerifyResult {
    return this.ctx.storage.transactionSync((): VerifyResult => {
      const l = this.#limits(emailKey, now);
      if (l.failures >= p.email_failures_per_hour)
        return { status: "locked", retry_after: Math.max(1, Math.ceil((l.failures_reset_at - now) / 1000)) };

      const c = this.sql
        .exec<{ tx_hash: string; code_mac: string; attempts: number; expires_at: number }>(
          "SELECT tx_hash, code_mac, attempts, expires_at FROM challenges WHERE email_key = ?",
          emailKey,
        )
        .toArray()[0];
      const live = c !== undefined && c.expires_at > now && c.attempts < p.otp_max_attempts;
      if (live && c.tx_hash === txHash && equal(c.code_mac, codeMac)) {
        this.sql.exec("DELETE FROM challenges WHERE email_key = ?", emailKey);
        l.failures = 0;
        this.#saveLimits(emailKey, l);
        return { status: "ok" };
      }
      if (live && c.tx_hash === txHash)
        this.sql.exec("UPDATE challenges SET attempts = attempts + 1 WHERE email_key = ?", emailKey);
      l.failures += 1;
      this.#saveLimits(emailKey, l);
      return { status: "invalid" };
    });
  }
}
countVerbCalls(ChallengeStore);

/**
 * Per-IP quotas live in the ChallengeStore shard of the IP (keyed by an HMAC of the address), so the
 * limiter is sharded like everything else: no single global object on the login path.
 */
export type QuotaResult = { ok: true } | { ok: false; retry_after: number };
export interface IpLimits {
  perMinute: number;
  perHour: number;
}

function equal(a: string, b: string): boolean {
  const ab = encoder.encode(a);
  const bb = encoder.encode(b);
  return ab.byteLength === bb.byteLength && crypto.subtle.timingSafeEqual(ab, bb);
}
