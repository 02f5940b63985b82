import { timingSafeEqualString } from "./contract/crypto";
import { errorField, log } from "./contract/log";
import { stubAt } from "./contract/shard-address";
import {
  type CapturedRow,
  type CarriedLimits,
  type ClaimsSnapshot,
  type CountAtHome,
  type HomeCounts,
  type IssueChallenge,
  type IssueResult,
  type KnownUser,
  type KnownUserFound,
  LIMITS_CARRY_WINDOW_MS,
  type OtpPolicy,
  type RestoreCode,
  type VerifyChallenge,
  type VerifyResult,
} from "./contract/verbs";
import { countVerbCalls, ShardStore, type StoreEnv } from "./shard-store";

/**
 * Everything of one email address that a login needs, in the email's shard (keyed by an HMAC of the
 * normalized address, so no address or code is stored in the clear): its one-time code, the
 * per-email limits that guard it, the captured mail of the dev and load-test transports, and which
 * user the address belongs to (a cache of D1, which stays the source of truth). A code is stored only
 * as an HMAC computed by the Worker under the OTP secret; comparison is constant-time.
 */

interface Limits {
  failures: number;
  failures_reset_at: number;
  /** Wrong codes in a row, across hourly windows; a success clears it, so does a day without one. */
  consecutive: number;
  consecutive_until: number;
  sends: number;
  sends_reset_at: number;
  last_sent_at: number;
}

/**
 * What a shard outside an address's home keeps of its reports there (issue 12): the home's address,
 * wrong codes tried here that the home has not counted yet, whether a sign-in here has yet to clear
 * the home's counts, and the home's counts as it last answered.
 */
interface HomeReport {
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

const HOUR = 3_600_000;
/** A report to the home shard that failed (or was cut off) is retried by the alarm this soon. */
export const REPORT_RETRY_MS = 5_000;
/** How long a run of consecutive failures is remembered after its last failure. */
export const CONSECUTIVE_FAILURES_WINDOW_MS = LIMITS_CARRY_WINDOW_MS;
/** A carry that cannot reach the earlier shard holds the address's codes this long, then gives up (logged). */
export const CARRY_PENDING_MS = 60_000;
/** A captured message stays readable this long; the newest this many per address are returned. */
export const CAPTURED_MAIL_TTL_MS = HOUR;
export const CAPTURED_MAIL_LIMIT = 50;
/**
 * How long the shard trusts its copy of an address's user before reading D1 again. Every way a user
 * stops being the address's (an admin delete) tells the shard at once (`forgetUser`), so the copy only
 * bounds drift; a sign-in that finds it older than KNOWN_USER_EXTEND_AFTER_MS extends it in the same
 * transaction, so a returning user reads no D1 however long ago the last sign-in was (issue 28).
 */
export const KNOWN_USER_TTL_MS = 400 * 24 * HOUR;
/**
 * A copy written longer ago than this is extended when a sign-in reads it: one row, at most twice a
 * year per address, so a user who signs in monthly writes none for it (issue 28).
 */
export const KNOWN_USER_EXTEND_AFTER_MS = 180 * 24 * HOUR;

/** A challenge shard reaches other challenge shards: an address's home (issue 12). */
interface ChallengeEnv extends StoreEnv {
  CHALLENGES: DurableObjectNamespace<ChallengeStore>;
}

export class ChallengeStore extends ShardStore<ChallengeEnv> {
  protected schema(): string[] {
    return [
      // One live code per address and login: a new code voids the older one of the same login, never
      // another login's (someone else's resend must not void a person's own code).
      `CREATE TABLE IF NOT EXISTS otp_codes (
        email_key TEXT NOT NULL,
        tx_hash TEXT NOT NULL,
        code_mac TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (email_key, tx_hash)) WITHOUT ROWID`,
      // No index on expires_at (issue 28: one billed row less per code): the table holds minutes of
      // codes, and the alarm's sweep reads it whole, a few hundred rows at most.
      "DROP INDEX IF EXISTS otp_codes_exp",
      // Codes were one per address before; those in flight at the upgrade are dropped (a resend fixes it).
      "DROP TABLE IF EXISTS challenges",
      `CREATE TABLE IF NOT EXISTS email_limits (
        email_key TEXT PRIMARY KEY,
        failures INTEGER NOT NULL,
        failures_reset_at INTEGER NOT NULL,
        sends INTEGER NOT NULL,
        sends_reset_at INTEGER NOT NULL,
        last_sent_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        consecutive INTEGER NOT NULL DEFAULT 0,
        consecutive_until INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID`,
      // No index on expires_at (issue 28: a send writes one billed row less): swept by a scan, hourly,
      // 90 days after expiry, so a returning address overwrites its row instead of deleting and inserting.
      "DROP INDEX IF EXISTS email_limits_exp",
      // Outside an address's home region: what is owed to, and was last heard from, its home shard.
      `CREATE TABLE IF NOT EXISTS home_reports (
        email_key TEXT PRIMARY KEY,
        home TEXT NOT NULL,
        unreported INTEGER NOT NULL DEFAULT 0,
        source TEXT,
        reset INTEGER NOT NULL DEFAULT 0,
        reset_source TEXT,
        carry_from TEXT,
        home_failures INTEGER NOT NULL DEFAULT 0,
        home_failures_until INTEGER NOT NULL DEFAULT 0,
        home_consecutive INTEGER NOT NULL DEFAULT 0,
        home_consecutive_until INTEGER NOT NULL DEFAULT 0,
        expires_at INTEGER NOT NULL) WITHOUT ROWID`,
      "CREATE INDEX IF NOT EXISTS home_reports_exp ON home_reports(expires_at)",
      // Wrong codes per address and source, so that one source cannot lock a person out (issue 15).
      `CREATE TABLE IF NOT EXISTS source_failures (
        email_key TEXT NOT NULL,
        source_key TEXT NOT NULL,
        failures INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (email_key, source_key)) WITHOUT ROWID`,
      "CREATE INDEX IF NOT EXISTS source_failures_exp ON source_failures(expires_at)",
      // An address whose counts in earlier generations' shards are carried here (issue 27 item 9): while
      // `done` is 0, no code of the address is tried (as with an unreported failure); once done, the row
      // stays for the carry window so the counts are carried once, never again after a sign-in.
      `CREATE TABLE IF NOT EXISTS carry_pending (
        email_key TEXT PRIMARY KEY,
        sources TEXT NOT NULL,
        done INTEGER NOT NULL DEFAULT 0,
        expires_at INTEGER NOT NULL) WITHOUT ROWID`,
      "CREATE INDEX IF NOT EXISTS carry_pending_exp ON carry_pending(expires_at)",
      `CREATE TABLE IF NOT EXISTS captured (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        email_key TEXT NOT NULL,
        sealed TEXT NOT NULL,
        sent_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL)`,
      "CREATE INDEX IF NOT EXISTS captured_key ON captured(email_key, seq)",
      "CREATE INDEX IF NOT EXISTS captured_exp ON captured(expires_at)",
      `CREATE TABLE IF NOT EXISTS known_users (
        email_key TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        claims TEXT,
        claims_version INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID`,
      // No index on expires_at (issue 28: an extension writes one billed row, not two): swept by a daily scan.
      "DROP INDEX IF EXISTS known_users_exp",
      // Per-IP quotas lived here before they moved to the Rate Limiting binding; nothing reads them.
      "DROP TABLE IF EXISTS ip_quota",
    ];
  }

  protected override upgrades(): Record<string, string[]> {
    return {
      // Shards created before the consecutive-failure cap.
      email_limits: [
        "ALTER TABLE email_limits ADD COLUMN consecutive INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE email_limits ADD COLUMN consecutive_until INTEGER NOT NULL DEFAULT 0",
      ],
      // Shards created before the home counted per source (issue 27 item 5).
      home_reports: [
        "ALTER TABLE home_reports ADD COLUMN source TEXT",
        "ALTER TABLE home_reports ADD COLUMN reset_source TEXT",
        "ALTER TABLE home_reports ADD COLUMN carry_from TEXT",
      ],
      carry_pending: ["ALTER TABLE carry_pending ADD COLUMN done INTEGER NOT NULL DEFAULT 0"],
      // Shards created before entity grants (issue 24): the user's compiled claims, versioned.
      known_users: [
        "ALTER TABLE known_users ADD COLUMN claims TEXT",
        "ALTER TABLE known_users ADD COLUMN claims_version INTEGER NOT NULL DEFAULT 0",
      ],
    };
  }

  protected expiringTables(): string[] {
    return ["otp_codes", "email_limits", "home_reports", "source_failures", "carry_pending", "captured", "known_users"];
  }
  protected override scanSweptTables(): Record<string, { everyMs: number; keepExpiredMs: number }> {
    // An address's limits are kept 90 days past their windows, so its next sign-in overwrites them.
    return {
      email_limits: { everyMs: HOUR, keepExpiredMs: 90 * 24 * HOUR },
      known_users: { everyMs: 24 * HOUR, keepExpiredMs: 0 },
    };
  }

  #limits(emailKey: string, now: number): Limits {
    const row = this.sql
      .exec<Limits & Record<string, number>>(
        `SELECT failures, failures_reset_at, sends, sends_reset_at, last_sent_at, consecutive, consecutive_until
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

  /**
   * This source's wrong codes for the address in the address's current hour: a source's row expires
   * when that hour ends, so every source's count starts over with the address's own.
   */
  #sourceFailures(emailKey: string, sourceKey: string, l: Limits, now: number): { failures: number; until: number } {
    const row = this.sql
      .exec<{ failures: number; expires_at: number }>(
        "SELECT failures, expires_at FROM source_failures WHERE email_key = ? AND source_key = ? AND expires_at > ?",
        emailKey,
        sourceKey,
        now,
      )
      .toArray()[0];
    return row ? { failures: row.failures, until: row.expires_at } : { failures: 0, until: l.failures_reset_at };
  }

  /**
   * Seconds until this source may try codes for the address again, or 0 when it may now: locked when
   * the source spent its hourly failures, when every source together spent theirs, or after a run of
   * consecutive failures.
   */
  #lockedFor(
    l: Limits,
    source: { failures: number; until: number },
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
    if (emailKey !== null && this.#carryState(emailKey, now) === "pending") return 1;
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

  #homeReport(emailKey: string): HomeReport | null {
    return (
      this.sql
        .exec<HomeReport & Record<string, SqlStorageValue>>(
          `SELECT home, unreported, source, reset, reset_source, carry_from, home_failures, home_failures_until,
             home_consecutive, home_consecutive_until FROM home_reports WHERE email_key = ?`,
          emailKey,
        )
        .toArray()[0] ?? null
    );
  }

  #saveHomeReport(emailKey: string, r: HomeReport, now: number): void {
    this.sql.exec(
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

  #saveLimits(emailKey: string, l: Limits): void {
    this.sql.exec(
      // An upsert, not INSERT OR REPLACE: a replace deletes and reinserts, writing every index twice.
      `INSERT INTO email_limits (email_key, failures, failures_reset_at, sends, sends_reset_at, last_sent_at, expires_at,
         consecutive, consecutive_until)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT(email_key) DO UPDATE SET failures = excluded.failures, failures_reset_at = excluded.failures_reset_at,
         sends = excluded.sends, sends_reset_at = excluded.sends_reset_at, last_sent_at = excluded.last_sent_at,
         expires_at = excluded.expires_at, consecutive = excluded.consecutive,
         consecutive_until = excluded.consecutive_until`,
      emailKey,
      l.failures,
      l.failures_reset_at,
      l.sends,
      l.sends_reset_at,
      l.last_sent_at,
      Math.max(l.failures_reset_at, l.sends_reset_at, l.consecutive_until),
      l.consecutive,
      l.consecutive_until,
    );
  }

  /**
   * Stores a new code for an email and login, replacing (voiding) that login's older one, unless the resend interval,
   * the hourly send quota or the hourly failure limit says no. A refused request stores nothing.
   * Captured mail is kept in the same transaction as the code it carries.
   */
  async issueChallenge(a: IssueChallenge): Promise<IssueResult> {
    const { emailKey, now, policy: p } = a;
    const l = this.#limits(emailKey, now);
    const secs = (ms: number) => Math.max(1, Math.ceil(ms / 1000));
    const locked = this.#lockedFor(
      l,
      this.#sourceFailures(emailKey, a.sourceKey, l, now),
      p,
      now,
      this.#homeReport(emailKey),
      emailKey,
    );
    if (locked) return { ok: false, error: "too_many_requests", retry_after: locked };
    const resendAt = l.last_sent_at + p.resend_interval_seconds * 1000;
    if (resendAt > now) return { ok: false, error: "slow_down", retry_after: secs(resendAt - now) };
    if (l.sends >= p.sends_per_email_per_hour)
      return { ok: false, error: "too_many_requests", retry_after: secs(l.sends_reset_at - now) };

    const expiresAt = now + p.otp_ttl_seconds * 1000;
    this.ctx.storage.transactionSync(() => {
      this.sql.exec(
        `INSERT INTO otp_codes (email_key, tx_hash, code_mac, attempts, expires_at) VALUES (?, ?, ?, 0, ?)
         ON CONFLICT(email_key, tx_hash) DO UPDATE SET code_mac = excluded.code_mac, attempts = 0,
           expires_at = excluded.expires_at`,
        emailKey,
        a.txHash,
        a.codeMac,
        expiresAt,
      );
      l.sends += 1;
      l.last_sent_at = now;
      this.#saveLimits(emailKey, l);
      if (a.captured) {
        this.sql.exec(
          "INSERT INTO captured (email_key, sealed, sent_at, expires_at) VALUES (?, ?, ?, ?)",
          emailKey,
          a.captured.sealed,
          now,
          now + CAPTURED_MAIL_TTL_MS,
        );
      }
      if (a.sent) this.recordAudit([a.sent]);
    });
    await (a.sent ? this.auditFlushSoon() : this.expireAt(expiresAt));
    return { ok: true, expires_in: p.otp_ttl_seconds, resend_after: p.resend_interval_seconds };
  }

  /**
   * Checks a code for an email within the login transaction that requested it. Only a live code of
   * that transaction can be guessed at, so only such a guess counts: a wrong one costs an attempt on
   * the code and a failure for the email, and the code dies after the allowed attempts (even the right
   * code then fails). A transaction with no live code here gets `invalid` and changes nothing, so no
   * one can spend another login's attempts. Success consumes the code, clears the failures, and returns
   * the address's user if this shard knows it.
   *
   * Outside the address's home region (`a.home`), a wrong code is also owed to the home shard, and a
   * sign-in after failures owes it a reset. What is owed is stored with the failure, in the same
   * transaction, and reported before the answer (retried by the alarm if that fails or is cut off);
   * until the home has counted it, no code of the address is tried here (issue 12, docs/security.md).
   */
  async verifyChallenge(a: VerifyChallenge): Promise<VerifyResult> {
    const { emailKey, now, policy: p } = a;
    let owed = false;
    let carry = false;
    const result = this.ctx.storage.transactionSync((): VerifyResult => {
      const l = this.#limits(emailKey, now);
      const source = this.#sourceFailures(emailKey, a.sourceKey, l, now);
      const home = a.home ? this.#homeReport(emailKey) : null;
      const locked = this.#lockedFor(l, source, p, now, home, emailKey);
      if (locked) return { status: "locked", retry_after: locked };

      const c = this.sql
        .exec<{ code_mac: string; attempts: number; expires_at: number }>(
          "SELECT code_mac, attempts, expires_at FROM otp_codes WHERE email_key = ? AND tx_hash = ?",
          emailKey,
          a.txHash,
        )
        .toArray()[0];
      const live = c !== undefined && c.expires_at > now && c.attempts < p.otp_max_attempts;
      if (!live) return { status: "invalid", counted: false };
      if (timingSafeEqualString(c.code_mac, a.codeMac)) {
        // Signed in: every pending code of the address goes, this login's and any other's.
        this.sql.exec("DELETE FROM otp_codes WHERE email_key = ?", emailKey);
        if (l.failures > 0 || l.consecutive > 0) {
          Object.assign(l, { failures: 0, consecutive: 0, consecutive_until: 0 });
          this.#saveLimits(emailKey, l);
        }
        // The signing-in source's own failures go; other sources' stay until their hour ends.
        if (source.failures > 0)
          this.sql.exec("DELETE FROM source_failures WHERE email_key = ? AND source_key = ?", emailKey, a.sourceKey);
        // The home's counts of wrong codes in a row end with this sign-in too.
        if (a.home && home && (home.home_failures > 0 || home.home_consecutive > 0)) {
          this.#saveHomeReport(emailKey, { ...home, home: a.home, reset: 1, reset_source: a.sourceKey }, now);
          owed = true;
        }
        return {
          status: "ok",
          user: this.#knownUser(emailKey, now),
          spent: { attempts: c.attempts, expires_at: c.expires_at },
        };
      }
      this.sql.exec(
        "UPDATE otp_codes SET attempts = attempts + 1 WHERE email_key = ? AND tx_hash = ?",
        emailKey,
        a.txHash,
      );
      this.#saveSourceFailures(emailKey, a.sourceKey, { failures: source.failures + 1, until: source.until });
      // The address's first wrong code on this shard since a shard count change moved it here: its
      // counts on the shards it had before are carried over before any other code is tried (issue 27
      // item 9). A right code costs nothing; a wrong one, once, a call to each earlier shard.
      if (a.carryFrom?.length && this.#carryState(emailKey, now) === "none") {
        this.#markCarry(emailKey, a.carryFrom, now);
        carry = true;
      }
      l.failures += 1;
      l.consecutive += 1;
      l.consecutive_until = now + CONSECUTIVE_FAILURES_WINDOW_MS;
      this.#saveLimits(emailKey, l);
      if (a.home) {
        const r = home ?? {
          home: a.home,
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
        this.#saveHomeReport(
          emailKey,
          {
            ...r,
            home: a.home,
            unreported: r.unreported + 1,
            source: a.sourceKey,
            carry_from: a.homeCarryFrom?.length ? JSON.stringify(a.homeCarryFrom) : null,
          },
          now,
        );
        owed = true;
      }
      const locks = this.#lockedFor(l, { failures: source.failures + 1, until: source.until }, p, now, null) > 0;
      return { status: "invalid", counted: true, locks };
    });
    if (carry) {
      // Should the carry below fail or be cut off, the alarm retries it.
      await this.expireAt(Date.now() + REPORT_RETRY_MS);
      await this.#carry(emailKey);
    }
    if (owed) {
      // Should the report below fail or be cut off, the alarm retries it.
      await this.expireAt(Date.now() + REPORT_RETRY_MS);
      await this.#reportHome(emailKey);
    }
    return result;
  }

  /**
   * The code a verify spent, put back for its login, as it was (its attempts and expiry), when the
   * verify's answer never reached the person: a client that gave up waiting (a timeout under load) or
   * a lost connection would otherwise find its code "already used" and need another mail (issue 38
   * item 12d). Only while the code would still be live, and never over a newer code of the same login.
   * Only the login that spent it can ask (the Worker holds its tx and the code's MAC), and no more
   * attempts than it had are given back. The failure counts the sign-in reset stay reset.
   */
  async restoreCode(a: RestoreCode): Promise<boolean> {
    if (a.spent.expires_at <= a.now) return false;
    const restored = this.sql
      .exec(
        `INSERT INTO otp_codes (email_key, tx_hash, code_mac, attempts, expires_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT(email_key, tx_hash) DO NOTHING RETURNING 1`,
        a.emailKey,
        a.txHash,
        a.codeMac,
        a.spent.attempts,
        a.spent.expires_at,
      )
      .toArray().length;
    if (restored) await this.expireAt(a.spent.expires_at);
    return restored > 0;
  }

  /**
   * At the address's home shard: wrong codes tried in other regions, counted with the home's own
   * (hourly and in a row, as failures here would be), after clearing them first when a sign-in
   * elsewhere said so. Answers the counts, which the reporting shard checks against its policy. One
   * home per address, so guesses spread over every region still meet one limit.
   */
  async countAtHome(a: CountAtHome): Promise<HomeCounts> {
    const { emailKey, now } = a;
    let carry = false;
    let { l, source } = this.ctx.storage.transactionSync(() => {
      const limits = this.#limits(emailKey, now);
      // The home's first failure for the address since a shard count change moved its home here.
      if (a.carryFrom?.length && a.failures > 0 && this.#carryState(emailKey, now) === "none") {
        this.#markCarry(emailKey, a.carryFrom, now);
        carry = true;
      }
      if (a.reset) Object.assign(limits, { failures: 0, consecutive: 0, consecutive_until: 0 });
      if (a.reset && a.resetSourceKey)
        this.sql.exec("DELETE FROM source_failures WHERE email_key = ? AND source_key = ?", emailKey, a.resetSourceKey);
      // Per source as well as in all (issue 27 item 5): one source's guesses spread over regions meet
      // the per-source limit here, so one source alone cannot spend the all-sources limit.
      let counted: { failures: number; until: number } | null = null;
      if (a.sourceKey) {
        const s = this.#sourceFailures(emailKey, a.sourceKey, limits, now);
        counted = { failures: s.failures + Math.max(0, a.failures), until: s.until };
        if (a.failures > 0) this.#saveSourceFailures(emailKey, a.sourceKey, counted);
      }
      if (a.failures > 0) {
        limits.failures += a.failures;
        limits.consecutive += a.failures;
        limits.consecutive_until = now + CONSECUTIVE_FAILURES_WINDOW_MS;
      }
      this.#saveLimits(emailKey, limits);
      return { l: limits, source: counted };
    });
    if (carry) {
      await this.expireAt(Date.now() + REPORT_RETRY_MS);
      await this.#carry(emailKey);
      // The answer includes what was carried.
      const after = Date.now();
      l = this.#limits(emailKey, after);
      if (a.sourceKey) source = this.#sourceFailures(emailKey, a.sourceKey, l, after);
    }
    // The row may be this shard's first for the address: its expiry needs the alarm.
    await this.expireAt(Math.max(l.failures_reset_at, l.consecutive_until));
    return {
      failures: l.failures,
      failures_until: l.failures_reset_at,
      consecutive: l.consecutive,
      consecutive_until: l.consecutive_until,
      ...(source ? { source_failures: source.failures, source_failures_until: source.until } : {}),
    };
  }

  #saveSourceFailures(emailKey: string, sourceKey: string, s: { failures: number; until: number }): void {
    this.sql.exec(
      `INSERT INTO source_failures (email_key, source_key, failures, expires_at) VALUES (?, ?, ?, ?)
       ON CONFLICT(email_key, source_key) DO UPDATE SET failures = excluded.failures, expires_at = excluded.expires_at`,
      emailKey,
      sourceKey,
      s.failures,
      s.until,
    );
  }

  /** Addresses whose report to their home is under way in this instance (one at a time each). */
  #reporting = new Set<string>();

  /** Tells an address's home what it is owed from here, and keeps its answer. Never throws. */
  async #reportHome(emailKey: string): Promise<void> {
    if (this.#reporting.has(emailKey)) return;
    const owed = this.#homeReport(emailKey);
    if (!owed || (owed.unreported === 0 && owed.reset === 0)) return;
    this.#reporting.add(emailKey);
    try {
      const home = stubAt<DurableObjectStub<ChallengeStore>>(this.env, "challenge", owed.home);
      const counts = await home.countAtHome({
        emailKey,
        failures: owed.unreported,
        sourceKey: owed.unreported > 0 ? owed.source : null,
        reset: owed.reset === 1,
        resetSourceKey: owed.reset === 1 ? owed.reset_source : null,
        carryFrom: owed.carry_from ? (JSON.parse(owed.carry_from) as string[]) : null,
        now: Date.now(),
      });
      this.ctx.storage.transactionSync(() => {
        const now = Date.now();
        // The source's count in every region, as the home has it, stands for it here too.
        if (owed.source && counts.source_failures !== undefined && counts.source_failures_until !== undefined) {
          const l = this.#limits(emailKey, now);
          const here = this.#sourceFailures(emailKey, owed.source, l, now);
          if (counts.source_failures > here.failures)
            this.#saveSourceFailures(emailKey, owed.source, {
              failures: counts.source_failures,
              until: Math.max(here.until, counts.source_failures_until),
            });
        }
        const r = this.#homeReport(emailKey) ?? owed;
        this.#saveHomeReport(
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
      });
    } catch (err) {
      log("warn", "challenge: a report to the address's home shard failed; the alarm retries it", {
        error: errorField(err),
      });
    } finally {
      this.#reporting.delete(emailKey);
    }
  }

  override async alarm(): Promise<void> {
    const owed = this.sql
      .exec<{ email_key: string }>("SELECT email_key FROM home_reports WHERE unreported > 0 OR reset > 0 LIMIT 100")
      .toArray();
    for (const { email_key } of owed) await this.#reportHome(email_key);
    const carrying = this.sql
      .exec<{ email_key: string }>(
        "SELECT email_key FROM carry_pending WHERE done = 0 AND expires_at > ? LIMIT 100",
        Date.now(),
      )
      .toArray();
    for (const { email_key } of carrying) await this.#carry(email_key);
    await super.alarm();
    const left = this.sql
      .exec<{ n: number }>(
        `SELECT (SELECT COUNT(*) FROM home_reports WHERE unreported > 0 OR reset > 0)
           + (SELECT COUNT(*) FROM carry_pending WHERE done = 0) AS n`,
      )
      .one();
    if (left.n > 0) await this.expireAt(Date.now() + REPORT_RETRY_MS);
  }

  /** Whether the address's counts are being carried here, were carried, or neither (within the window). */
  #carryState(emailKey: string, now: number): "none" | "pending" | "done" {
    const row = this.sql
      .exec<{ done: number }>("SELECT done FROM carry_pending WHERE email_key = ? AND expires_at > ?", emailKey, now)
      .toArray()[0];
    return row ? (row.done ? "done" : "pending") : "none";
  }

  #markCarry(emailKey: string, sources: string[], now: number): void {
    this.sql.exec(
      `INSERT INTO carry_pending (email_key, sources, done, expires_at) VALUES (?, ?, 0, ?)
       ON CONFLICT(email_key) DO UPDATE SET sources = excluded.sources, done = 0, expires_at = excluded.expires_at`,
      emailKey,
      JSON.stringify(sources),
      now + CARRY_PENDING_MS,
    );
  }

  /**
   * An address's counts on this shard, for its shard in a later generation to carry (issue 27 item 9):
   * the hourly and in-a-row failures and every source's, while they last. Reads only.
   */
  limitsToCarry(emailKey: string, now: number): CarriedLimits | null {
    const l = this.sql
      .exec<Limits & Record<string, SqlStorageValue>>(
        `SELECT failures, failures_reset_at, consecutive, consecutive_until, sends, sends_reset_at, last_sent_at
         FROM email_limits WHERE email_key = ?`,
        emailKey,
      )
      .toArray()[0];
    const sources = this.sql
      .exec<{ source_key: string; failures: number; expires_at: number }>(
        "SELECT source_key, failures, expires_at FROM source_failures WHERE email_key = ? AND expires_at > ? LIMIT 200",
        emailKey,
        now,
      )
      .toArray();
    const carried = this.#carryState(emailKey, now) !== "none";
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

  /** Addresses whose counts are being carried into this instance (one carry at a time each). */
  #carrying = new Set<string>();

  /**
   * Carries an address's counts from its shards in earlier generations into this one, adding them to
   * what was counted here since (the failure that started the carry). Never throws: a failed carry
   * stays pending, is retried by the alarm, and is given up after CARRY_PENDING_MS (logged).
   */
  async #carry(emailKey: string): Promise<void> {
    if (this.#carrying.has(emailKey)) return;
    const pending = this.sql
      .exec<{ sources: string }>("SELECT sources FROM carry_pending WHERE email_key = ? AND done = 0", emailKey)
      .toArray()[0];
    if (!pending) return;
    this.#carrying.add(emailKey);
    try {
      const sources = JSON.parse(pending.sources) as string[];
      const carried = await Promise.all(
        sources.map((address) =>
          stubAt<DurableObjectStub<ChallengeStore>>(this.env, "challenge", address).limitsToCarry(emailKey, Date.now()),
        ),
      );
      this.ctx.storage.transactionSync(() => {
        const now = Date.now();
        const l = this.#limits(emailKey, now);
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
            const here = this.#sourceFailures(emailKey, s.source_key, l, now);
            this.#saveSourceFailures(emailKey, s.source_key, {
              failures: here.failures + s.failures,
              until: Math.max(here.until, s.expires_at),
            });
          }
          if (c.carried) break;
        }
        this.#saveLimits(emailKey, l);
        // Carried once for the window: a later wrong code (after a sign-in, say) carries nothing again.
        this.sql.exec(
          "UPDATE carry_pending SET done = 1, expires_at = ? WHERE email_key = ?",
          now + LIMITS_CARRY_WINDOW_MS,
          emailKey,
        );
      });
    } catch (err) {
      log("warn", "challenge: carrying an address's counts from an earlier generation failed; the alarm retries it", {
        error: errorField(err),
      });
    } finally {
      this.#carrying.delete(emailKey);
    }
  }

  #knownUser(emailKey: string, now: number): KnownUserFound | null {
    const row = this.sql
      .exec<{ user_id: string; expires_at: number; claims: string | null }>(
        "SELECT user_id, expires_at, claims FROM known_users WHERE email_key = ? AND expires_at > ?",
        emailKey,
        now,
      )
      .toArray()[0];
    if (!row) return null;
    // Read by a sign-in: extended when written more than six months ago (called inside its transaction).
    if (row.expires_at - now < KNOWN_USER_TTL_MS - KNOWN_USER_EXTEND_AFTER_MS)
      this.sql.exec("UPDATE known_users SET expires_at = ? WHERE email_key = ?", now + KNOWN_USER_TTL_MS, emailKey);
    return row.claims ? { id: row.user_id, claims_json: row.claims } : { id: row.user_id };
  }

  /** Remembers which user an address belongs to, after the Worker read (or created) it in D1. */
  rememberUser(emailKey: string, user: KnownUser, now: number): Promise<void> {
    return this.#remember([{ emailKey, ...user }], now, "upsert");
  }

  /** Remembers the users of many addresses at once (the admin API created them in D1), in one transaction. */
  rememberUsers(users: { emailKey: string; id: string }[], now: number): Promise<void> {
    return this.#remember(users, now, "upsert");
  }

  /**
   * A user's claims compiled anew after a grant changed (issue 24), so the next sign-in's verify, which
   * reads this row already, carries them: a newer version replaces an older one, never the reverse.
   * `update` writes only where the address is already known (with data residency, the admin API
   * creates nothing about a person in a region).
   */
  rememberClaims(
    users: { emailKey: string; id: string; claims: ClaimsSnapshot }[],
    now: number,
    mode: "upsert" | "update",
  ): Promise<void> {
    return this.#remember(users, now, mode);
  }

  // Verbs call each other only through private methods: every call of a verb is counted as served.
  async #remember(
    users: { emailKey: string; id: string; claims?: ClaimsSnapshot | undefined }[],
    now: number,
    mode: "upsert" | "update",
  ): Promise<void> {
    const expiresAt = now + KNOWN_USER_TTL_MS;
    this.ctx.storage.transactionSync(() => {
      for (const u of users) {
        const claims = u.claims ? JSON.stringify(u.claims) : null;
        const version = u.claims?.v ?? 0;
        if (mode === "update")
          this.sql.exec(
            "UPDATE known_users SET claims = ?, claims_version = ? WHERE email_key = ? AND user_id = ? AND claims_version < ?",
            claims,
            version,
            u.emailKey,
            u.id,
            version,
          );
        else
          this.sql.exec(
            `INSERT INTO known_users (email_key, user_id, expires_at, claims, claims_version) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT(email_key) DO UPDATE SET user_id = excluded.user_id, expires_at = excluded.expires_at,
               claims = CASE WHEN user_id IS NOT excluded.user_id OR excluded.claims_version > claims_version
                 THEN excluded.claims ELSE claims END,
               claims_version = CASE WHEN user_id IS NOT excluded.user_id OR excluded.claims_version > claims_version
                 THEN excluded.claims_version ELSE claims_version END`,
            u.emailKey,
            u.id,
            expiresAt,
            claims,
            version,
          );
      }
    });
    if (mode === "upsert") await this.expireAt(expiresAt);
  }

  /** Forgets an address's user (the admin API deleted it): the next sign-in reads D1 again. */
  forgetUser(emailKey: string): void {
    this.sql.exec("DELETE FROM known_users WHERE email_key = ?", emailKey);
  }

  /** The captured messages of an address, newest first (still sealed). */
  capturedMail(emailKey: string, now: number): CapturedRow[] {
    return this.sql
      .exec<CapturedRow & Record<string, SqlStorageValue>>(
        "SELECT sealed, sent_at FROM captured WHERE email_key = ? AND expires_at > ? ORDER BY seq DESC LIMIT ?",
        emailKey,
        now,
        CAPTURED_MAIL_LIMIT,
      )
      .toArray();
  }
}
countVerbCalls(ChallengeStore);
