import { AUDIT_FLUSH_DELAY_MS } from "./audit-outbox";
import type { Carrier } from "./carried-audit";
import { keepCaptured, readCaptured } from "./challenge/captured-mail";
import { addCarried, carrySources, carryState, countsToCarry, markCarry, pendingCarries } from "./challenge/carry";
import { deleteCodes, putBackCode, readCode, spendAttempt, storeCode } from "./challenge/codes";
import {
  emptyReport,
  owedReports,
  REPORT_RETRY_MS,
  readHomeReport,
  retriesLeft,
  saveHomeReport,
  settleReport,
} from "./challenge/home-reports";
import { deleteKnownUser, KNOWN_USER_TTL_MS, readKnownUser, writeKnownUsers } from "./challenge/known-users";
import {
  CONSECUTIVE_FAILURES_WINDOW_MS,
  clearSourceFailures,
  readLimits,
  readSourceFailures,
  saveLimits,
  saveSourceFailures,
} from "./challenge/limits";
import { lockedFor } from "./challenge/locks";
import {
  checkAssertion,
  counterRegressed,
  deletePasskey,
  deletePasskeysOf,
  insertPasskey,
  listPasskeys,
  markUsed,
  readPasskey,
} from "./challenge/passkeys";
import {
  CHALLENGE_EXPIRING_TABLES,
  CHALLENGE_SCAN_SWEPT,
  CHALLENGE_SCHEMA,
  CHALLENGE_UPGRADES,
} from "./challenge/schema";
import { sentEventsOf, withSentEvent } from "./challenge/sent-events";
import { auditEvent } from "./contract/audit-event";
import { timingSafeEqualString } from "./contract/crypto";
import { errorField, log } from "./contract/log";
import { stubAt } from "./contract/shard-address";
import type {
  AddPasskey,
  CapturedRow,
  CarriedLimits,
  ClaimsSnapshot,
  CountAtHome,
  HomeCounts,
  IssueChallenge,
  IssueResult,
  KnownUser,
  PasskeyCounters,
  PasskeyInfo,
  PasskeySignIn,
  PasskeySignInResult,
  RestoreCode,
  ShardStats,
  VerifyChallenge,
  VerifyResult,
} from "./contract/verbs";
import { countVerbCalls, ShardStore, type StoreEnv } from "./shard-store";

/** The address's user as the shard knows it, read only (a sign-in's read extends it: known-users.ts). */
function knownUserId(sql: SqlStorage, emailKey: string, now: number): string | null {
  return (
    sql
      .exec<{ user_id: string }>(
        "SELECT user_id FROM known_users WHERE email_key = ? AND expires_at > ?",
        emailKey,
        now,
      )
      .toArray()[0]?.user_id ?? null
  );
}

/**
 * Everything of one email address that a login needs, in the email's shard (keyed by an HMAC of the
 * normalized address, so no address or code is stored in the clear): its one-time code, the
 * per-email limits that guard it, the captured mail of the dev and load-test transports, and which
 * user the address belongs to (a cache of D1, which stays the source of truth). A code is stored only
 * as an HMAC computed by the Worker under the OTP secret; comparison is constant-time.
 *
 * The class holds the verbs, each atomic inside the object; their tables and statements are in
 * `challenge/` by concern: the schema, the codes, the address's and each source's counts
 * (`limits.ts`) and what locks them (`locks.ts`), the reports to an address's home region
 * (`home-reports.ts`), the counts carried across a shard count change (`carry.ts`), known users and
 * captured mail.
 */

/** A challenge shard reaches other challenge shards: an address's home (issue 12). */
interface ChallengeEnv extends StoreEnv {
  CHALLENGES: DurableObjectNamespace<ChallengeStore>;
}

export class ChallengeStore extends ShardStore<ChallengeEnv> {
  /** Passkey verbs' outcomes since this instance started (GET /admin/v1/stats), like every counter here. */
  #passkeys = { sign_ins: 0, refused: 0, counter_regressions: 0, registered: 0, removed: 0 };

  override stats(o: { pendingDeletes?: boolean } = {}): ShardStats {
    // Read untracked, and only where the table exists: a shard woken for its counters creates nothing.
    const raw = this.ctx.storage.sql;
    const made = raw.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'passkeys'").toArray().length;
    const stored = made ? raw.exec<{ n: number }>("SELECT COUNT(*) AS n FROM passkeys").one().n : 0;
    const passkeys: PasskeyCounters = { ...this.#passkeys, stored };
    return { ...super.stats(o), passkeys };
  }

  protected schema(): string[] {
    return CHALLENGE_SCHEMA;
  }

  protected override upgrades(): Record<string, string[]> {
    return CHALLENGE_UPGRADES;
  }

  protected expiringTables(): string[] {
    return CHALLENGE_EXPIRING_TABLES;
  }

  /** Issue 44: an address's `code_sent` events ride on its limits row (challenge/sent-events.ts). */
  protected override carriers(): Carrier[] {
    return [{ base: "email_limits", key: ["email_key"] }];
  }
  protected override scanSweptTables(): Record<string, { everyMs: number; keepExpiredMs: number }> {
    return CHALLENGE_SCAN_SWEPT;
  }

  /**
   * Stores a new code for an email and login, replacing (voiding) that login's older one, unless the resend interval,
   * the hourly send quota or the hourly failure limit says no. A refused request stores nothing.
   * Captured mail is kept in the same transaction as the code it carries.
   */
  async issueChallenge(a: IssueChallenge): Promise<IssueResult> {
    const { emailKey, now, policy: p } = a;
    const l = readLimits(this.sql, emailKey, now);
    const secs = (ms: number) => Math.max(1, Math.ceil(ms / 1000));
    const locked = lockedFor(
      this.sql,
      l,
      readSourceFailures(this.sql, emailKey, a.sourceKey, l, now),
      p,
      now,
      readHomeReport(this.sql, emailKey),
      emailKey,
    );
    if (locked) return { ok: false, error: "too_many_requests", retry_after: locked };
    const resendAt = l.last_sent_at + p.resend_interval_seconds * 1000;
    if (resendAt > now) return { ok: false, error: "slow_down", retry_after: secs(resendAt - now) };
    if (l.sends >= p.sends_per_email_per_hour)
      return { ok: false, error: "too_many_requests", retry_after: secs(l.sends_reset_at - now) };

    const expiresAt = now + p.otp_ttl_seconds * 1000;
    // Issue 44: the `code_sent` event rides on the limits row this send writes anyway, until the code
    // is past use (sent-events.ts); it names the address's user when the shard knows it, so that the
    // login's events are one row of the user's in D1.
    const due = expiresAt + AUDIT_FLUSH_DELAY_MS;
    this.ctx.storage.transactionSync(() => {
      storeCode(this.sql, emailKey, a.txHash, a.codeMac, expiresAt);
      l.sends += 1;
      l.last_sent_at = now;
      const sent = a.sent && { ...a.sent, user_id: a.sent.user_id ?? knownUserId(this.sql, emailKey, now) };
      saveLimits(
        this.sql,
        emailKey,
        l,
        sent ? { json: withSentEvent(l.audit, a.txHash, sent, this.carried.flushedTo()), due } : undefined,
      );
      if (sent) this.carried.note("email_limits", [emailKey], due);
      if (a.captured) keepCaptured(this.sql, emailKey, a.captured.sealed, now);
    });
    await this.expireAt(a.sent ? due : expiresAt);
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
      const l = readLimits(this.sql, emailKey, now);
      const source = readSourceFailures(this.sql, emailKey, a.sourceKey, l, now);
      const home = a.home ? readHomeReport(this.sql, emailKey) : null;
      const locked = lockedFor(this.sql, l, source, p, now, home, emailKey);
      if (locked) return { status: "locked", retry_after: locked };

      const c = readCode(this.sql, emailKey, a.txHash);
      const live = c !== undefined && c.expires_at > now && c.attempts < p.otp_max_attempts;
      if (!live) return { status: "invalid", counted: false };
      if (timingSafeEqualString(c.code_mac, a.codeMac)) {
        // Signed in: every pending code of the address goes, this login's and any other's.
        deleteCodes(this.sql, emailKey);
        if (l.failures > 0 || l.consecutive > 0) {
          Object.assign(l, { failures: 0, consecutive: 0, consecutive_until: 0 });
          saveLimits(this.sql, emailKey, l);
        }
        // The signing-in source's own failures go; other sources' stay until their hour ends.
        if (source.failures > 0) clearSourceFailures(this.sql, emailKey, a.sourceKey);
        // The home's counts of wrong codes in a row end with this sign-in too.
        if (a.home && home && (home.home_failures > 0 || home.home_consecutive > 0)) {
          saveHomeReport(this.sql, emailKey, { ...home, home: a.home, reset: 1, reset_source: a.sourceKey }, now);
          owed = true;
        }
        const carried = sentEventsOf(l.audit)[a.txHash];
        return {
          status: "ok",
          user: readKnownUser(this.sql, emailKey, now),
          spent: { attempts: c.attempts, expires_at: c.expires_at },
          ...(carried?.length ? { carried: JSON.stringify(carried) } : {}),
        };
      }
      spendAttempt(this.sql, emailKey, a.txHash);
      saveSourceFailures(this.sql, emailKey, a.sourceKey, { failures: source.failures + 1, until: source.until });
      // The address's first wrong code on this shard since a shard count change moved it here: its
      // counts on the shards it had before are carried over before any other code is tried (issue 27
      // item 9). A right code costs nothing; a wrong one, once, a call to each earlier shard.
      if (a.carryFrom?.length && carryState(this.sql, emailKey, now) === "none") {
        markCarry(this.sql, emailKey, a.carryFrom, now);
        carry = true;
      }
      l.failures += 1;
      l.consecutive += 1;
      l.consecutive_until = now + CONSECUTIVE_FAILURES_WINDOW_MS;
      saveLimits(this.sql, emailKey, l);
      if (a.home) {
        const r = home ?? emptyReport(a.home);
        saveHomeReport(
          this.sql,
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
      const locks = lockedFor(this.sql, l, { failures: source.failures + 1, until: source.until }, p, now, null) > 0;
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
    const restored = putBackCode(this.sql, a.emailKey, a.txHash, a.codeMac, a.spent);
    if (restored) await this.expireAt(a.spent.expires_at);
    return restored;
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
      const limits = readLimits(this.sql, emailKey, now);
      // The home's first failure for the address since a shard count change moved its home here.
      if (a.carryFrom?.length && a.failures > 0 && carryState(this.sql, emailKey, now) === "none") {
        markCarry(this.sql, emailKey, a.carryFrom, now);
        carry = true;
      }
      if (a.reset) Object.assign(limits, { failures: 0, consecutive: 0, consecutive_until: 0 });
      if (a.reset && a.resetSourceKey) clearSourceFailures(this.sql, emailKey, a.resetSourceKey);
      // Per source as well as in all (issue 27 item 5): one source's guesses spread over regions meet
      // the per-source limit here, so one source alone cannot spend the all-sources limit.
      let counted: { failures: number; until: number } | null = null;
      if (a.sourceKey) {
        const s = readSourceFailures(this.sql, emailKey, a.sourceKey, limits, now);
        counted = { failures: s.failures + Math.max(0, a.failures), until: s.until };
        if (a.failures > 0) saveSourceFailures(this.sql, emailKey, a.sourceKey, counted);
      }
      if (a.failures > 0) {
        limits.failures += a.failures;
        limits.consecutive += a.failures;
        limits.consecutive_until = now + CONSECUTIVE_FAILURES_WINDOW_MS;
      }
      saveLimits(this.sql, emailKey, limits);
      return { l: limits, source: counted };
    });
    if (carry) {
      await this.expireAt(Date.now() + REPORT_RETRY_MS);
      await this.#carry(emailKey);
      // The answer includes what was carried.
      const after = Date.now();
      l = readLimits(this.sql, emailKey, after);
      if (a.sourceKey) source = readSourceFailures(this.sql, emailKey, a.sourceKey, l, after);
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

  /** Addresses whose report to their home is under way in this instance (one at a time each). */
  #reporting = new Set<string>();

  /** Tells an address's home what it is owed from here, and keeps its answer. Never throws. */
  async #reportHome(emailKey: string): Promise<void> {
    if (this.#reporting.has(emailKey)) return;
    const owed = readHomeReport(this.sql, emailKey);
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
      this.ctx.storage.transactionSync(() => settleReport(this.sql, emailKey, owed, counts, Date.now()));
    } catch (err) {
      log("warn", "challenge: a report to the address's home shard failed; the alarm retries it", {
        error: errorField(err),
      });
    } finally {
      this.#reporting.delete(emailKey);
    }
  }

  protected override async onAlarm(): Promise<void> {
    for (const emailKey of owedReports(this.sql)) await this.#reportHome(emailKey);
    for (const emailKey of pendingCarries(this.sql, Date.now())) await this.#carry(emailKey);
    await super.onAlarm();
    if (retriesLeft(this.sql) > 0) await this.expireAt(Date.now() + REPORT_RETRY_MS);
  }

  /**
   * An address's counts on this shard, for its shard in a later generation to carry (issue 27 item 9):
   * the hourly and in-a-row failures and every source's, while they last. Reads only.
   */
  limitsToCarry(emailKey: string, now: number): CarriedLimits | null {
    return countsToCarry(this.sql, emailKey, now);
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
    const pending = carrySources(this.sql, emailKey);
    if (pending === null) return;
    this.#carrying.add(emailKey);
    try {
      const sources = JSON.parse(pending) as string[];
      const carried = await Promise.all(
        sources.map((address) =>
          stubAt<DurableObjectStub<ChallengeStore>>(this.env, "challenge", address).limitsToCarry(emailKey, Date.now()),
        ),
      );
      this.ctx.storage.transactionSync(() => addCarried(this.sql, emailKey, carried, Date.now()));
    } catch (err) {
      log("warn", "challenge: carrying an address's counts from an earlier generation failed; the alarm retries it", {
        error: errorField(err),
      });
    } finally {
      this.#carrying.delete(emailKey);
    }
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
    this.ctx.storage.transactionSync(() => writeKnownUsers(this.sql, users, expiresAt, mode));
    if (mode === "upsert") await this.expireAt(expiresAt);
  }

  /**
   * Forgets an address's user (the admin API deleted it): the next sign-in reads D1 again. Its
   * passkeys go with it (issue 42): a new user of the address starts with none.
   */
  forgetUser(emailKey: string): void {
    this.ctx.storage.transactionSync(() => {
      deleteKnownUser(this.sql, emailKey);
      deletePasskeysOf(this.sql, emailKey);
    });
  }

  /**
   * A passkey sign-in (issue 42), in one call: the credential's row, the assertion checked against its
   * public key (challenge, origin, RP id, UV, signature), then, in one transaction, the challenge spent
   * and the counter moved (one row), and the address's user as a verify finds it. A counter that did
   * not rise is refused, and audited in the same transaction. The challenge is the login
   * transaction's (derived from its id, never stored): this credential answers a transaction's
   * challenge once, and never one of a transaction older than the last it answered.
   */
  async passkeySignIn(a: PasskeySignIn): Promise<PasskeySignInResult> {
    const found = readPasskey(this.sql, a.credentialId);
    const refuse = (reason: Extract<PasskeySignInResult, { status: "invalid" }>["reason"]) => {
      const r: PasskeySignInResult = { status: "invalid", reason };
      this.#count(r);
      return r;
    };
    if (!found || found.email_key !== a.emailKey || found.tenant !== a.tenant) return refuse("unknown_credential");
    if (a.txExp <= found.last_challenge_exp) return refuse("challenge_spent");
    const checked = await checkAssertion(found, a);
    if (!checked) return refuse("assertion");
    let audited = false;
    // Read again after the check's await: another sign-in may have answered in between.
    const result = this.ctx.storage.transactionSync((): PasskeySignInResult => {
      const row = readPasskey(this.sql, a.credentialId);
      if (!row) return { status: "invalid", reason: "unknown_credential" };
      if (a.txExp <= row.last_challenge_exp) return { status: "invalid", reason: "challenge_spent" };
      if (counterRegressed(row.sign_count, checked.newCounter)) {
        this.recordAudit([
          auditEvent(
            {
              kind: "passkey_counter_regression",
              user: row.user_id,
              emailKey: a.emailKey,
              tenant: a.tenant,
              detail: { credential_id: row.credential_id, stored: row.sign_count, presented: checked.newCounter },
            },
            a.ip,
            a.now,
          ),
        ]);
        audited = true;
        return { status: "invalid", reason: "counter_regression" };
      }
      markUsed(this.sql, row.credential_id, checked.newCounter, a.now, a.txExp);
      return {
        status: "ok",
        userId: row.user_id,
        sealedEmail: row.sealed_email,
        user: readKnownUser(this.sql, a.emailKey, a.now),
      };
    });
    if (audited) await this.auditFlushSoon();
    this.#count(result);
    return result;
  }

  #count(result: PasskeySignInResult): void {
    if (result.status === "ok") this.#passkeys.sign_ins++;
    else {
      this.#passkeys.refused++;
      if (result.reason === "counter_regression") this.#passkeys.counter_regressions++;
    }
  }

  /** Stores a verified registration with its `passkey_created` event; false if the credential exists. */
  async addPasskey(a: AddPasskey): Promise<boolean> {
    const added = this.ctx.storage.transactionSync(() => {
      if (!insertPasskey(this.sql, a)) return false;
      this.recordAudit([
        auditEvent(
          {
            kind: "passkey_created",
            user: a.userId,
            emailKey: a.emailKey,
            tenant: a.tenant,
            detail: { credential_id: a.credentialId, aaguid: a.aaguid },
          },
          a.ip,
          a.now,
        ),
      ]);
      return true;
    });
    if (added) {
      this.#passkeys.registered++;
      await this.auditFlushSoon();
    }
    return added;
  }

  /** A user's passkeys at this address (the admin API). */
  passkeysOf(emailKey: string, userId: string): PasskeyInfo[] {
    return listPasskeys(this.sql, emailKey, userId);
  }

  /** Removes one of a user's passkeys with its `passkey_deleted` event; false when it is not here. */
  async removePasskey(emailKey: string, userId: string, credentialId: string, tenant: string): Promise<boolean> {
    const removed = this.ctx.storage.transactionSync(() => {
      if (!deletePasskey(this.sql, emailKey, userId, credentialId)) return false;
      this.recordAudit([
        auditEvent({
          kind: "passkey_deleted",
          user: userId,
          emailKey,
          tenant,
          detail: { credential_id: credentialId, via: "admin_api" },
        }),
      ]);
      return true;
    });
    if (removed) {
      this.#passkeys.removed++;
      await this.auditFlushSoon();
    }
    return removed;
  }

  /** The captured messages of an address, newest first (still sealed). */
  capturedMail(emailKey: string, now: number): CapturedRow[] {
    return readCaptured(this.sql, emailKey, now);
  }
}
countVerbCalls(ChallengeStore);
