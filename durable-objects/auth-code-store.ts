import type {
  DecideDevice,
  DeviceLogin,
  DeviceView,
  PollDevice,
  PollResult,
  RedeemCode,
  RedeemResult,
  StartDevice,
} from "./contract/verbs";
import { countVerbCalls, ShardStore } from "./shard-store";
import { SPENT_CODES_TABLE, spendCode } from "./spent-codes";

/**
 * The spent authorization codes of a shard. A code carries its grant sealed (op-auth's auth-code.ts),
 * so issuing one writes nothing; what must be stored is that it was used, which the redemption
 * records atomically, with the id of what it issued. A second redemption learns that id, so the
 * caller can revoke it (RFC 6749 §4.1.2: the server SHOULD revoke tokens issued from a code that is
 * used twice).
 */

export class AuthCodeStore extends ShardStore {
  protected schema(): string[] {
    return [
      // Codes issued before issue 28 are spent here (new ones in their login's RevocationStore shard).
      SPENT_CODES_TABLE,
      // Its expiry index, dropped (spent-codes.ts: the sweep reads the small table whole).
      "DROP INDEX IF EXISTS spent_codes_exp",
      // Codes were stored whole before they carried their grant sealed; nothing reads this table.
      "DROP TABLE IF EXISTS codes",
      // Device authorization requests (RFC 8628): one row from the device's request to its tokens.
      `CREATE TABLE IF NOT EXISTS device_grants (
        device_hash TEXT PRIMARY KEY,
        user_code TEXT NOT NULL UNIQUE,
        client_id TEXT NOT NULL,
        scope TEXT NOT NULL,
        status TEXT NOT NULL,
        interval_ms INTEGER NOT NULL,
        last_poll_at INTEGER NOT NULL DEFAULT 0,
        login TEXT,
        expires_at INTEGER NOT NULL,
        live_until INTEGER) WITHOUT ROWID`,
      "CREATE INDEX IF NOT EXISTS device_grants_exp ON device_grants(expires_at)",
      // Wrong user codes typed on this shard, per minute and source: the bound on guessing them
      // (RFC 8628 §5.1). A first version counted per minute only; nothing reads it.
      "DROP TABLE IF EXISTS user_code_failures",
      `CREATE TABLE IF NOT EXISTS user_code_misses (
        minute INTEGER NOT NULL,
        source_key TEXT NOT NULL,
        n INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (minute, source_key)) WITHOUT ROWID`,
      "CREATE INDEX IF NOT EXISTS user_code_misses_exp ON user_code_misses(expires_at)",
    ];
  }

  /**
   * `device_grants.live_until`: when the request itself expires (`expires_in`); the row's `expires_at`
   * (its sweep) is later by DEVICE_EXPIRED_ANSWER_MS, so a poll after expiry still finds it and answers
   * `expired_token` (RFC 8628 §3.5), not `invalid_grant`. Rows from before the column: NULL, their
   * `expires_at` is both.
   */
  protected override upgrades(): Record<string, string[]> {
    return { device_grants: ["ALTER TABLE device_grants ADD COLUMN live_until INTEGER"] };
  }

  protected expiringTables(): string[] {
    return ["spent_codes", "device_grants", "user_code_misses"];
  }

  /** How long after its expiry a device request still answers `expired_token`. */
  static readonly DEVICE_EXPIRED_ANSWER_MS = 10 * 60_000;
  /** Polls up to this much early count as on time (a 5 s ticker fires a few ms early). */
  static readonly POLL_JITTER_MS = 1_000;
  /** `slow_down` grows the interval by 5 s (RFC 8628 §3.5), never beyond this. */
  static readonly MAX_POLL_INTERVAL_MS = 60_000;

  /** Wrong user codes one source may type on this shard in a minute; then its lookups wait for the next. */
  static readonly USER_CODE_MISSES_PER_SOURCE = 20;
  /**
   * Wrong user codes from every source together in a minute, a circuit breaker far above one person's
   * typos: past it the shard refuses every lookup until the minute ends.
   */
  static readonly USER_CODE_MISSES_PER_SHARD = 600;

  /** Records a device's request (RFC 8628 §3.2); false when the user code is taken (the Worker draws another). */
  async startDevice(a: StartDevice): Promise<boolean> {
    const cur = this.sql.exec(
      `INSERT INTO device_grants (device_hash, user_code, client_id, scope, status, interval_ms, expires_at, live_until)
       VALUES (?, ?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT DO NOTHING`,
      a.deviceHash,
      a.userCode,
      a.clientId,
      a.scope,
      a.intervalMs,
      a.expiresAt + AuthCodeStore.DEVICE_EXPIRED_ANSWER_MS,
      a.expiresAt,
    );
    if (cur.rowsWritten === 0) return false;
    await this.expireAt(a.expiresAt + AuthCodeStore.DEVICE_EXPIRED_ANSWER_MS);
    return true;
  }

  /**
   * The pending request a person's user code names (RFC 8628 §3.3). A code that names none counts
   * against its source's minute on this shard, and the shard's; past either bound, lookups (from that
   * source, or from all) are refused until the minute ends, so one guesser cannot lock everyone out.
   */
  async findDevice(userCode: string, sourceKey: string, now: number): Promise<DeviceView> {
    const minute = Math.floor(now / 60_000);
    const misses = this.sql
      .exec<{ own: number | null; total: number | null }>(
        "SELECT SUM(CASE WHEN source_key = ? THEN n END) AS own, SUM(n) AS total FROM user_code_misses WHERE minute = ?",
        sourceKey,
        minute,
      )
      .one();
    if (
      (misses.own ?? 0) >= AuthCodeStore.USER_CODE_MISSES_PER_SOURCE ||
      (misses.total ?? 0) >= AuthCodeStore.USER_CODE_MISSES_PER_SHARD
    )
      return { status: "throttled", retry_after: Math.max(1, Math.ceil(((minute + 1) * 60_000 - now) / 1000)) };
    const row = this.sql
      .exec<{ client_id: string; scope: string; expires_at: number }>(
        `SELECT client_id, scope, COALESCE(live_until, expires_at) AS expires_at FROM device_grants
         WHERE user_code = ? AND status = 'pending' AND COALESCE(live_until, expires_at) > ?`,
        userCode,
        now,
      )
      .toArray()[0];
    if (row) return { status: "pending", ...row };
    const expiresAt = (minute + 2) * 60_000;
    this.sql.exec(
      `INSERT INTO user_code_misses (minute, source_key, n, expires_at) VALUES (?, ?, 1, ?)
       ON CONFLICT(minute, source_key) DO UPDATE SET n = n + 1`,
      minute,
      sourceKey,
      expiresAt,
    );
    await this.expireAt(expiresAt);
    return { status: "unknown" };
  }

  /** The person approves (with their login) or denies the pending request; false when none is pending. */
  decideDevice(a: DecideDevice): boolean {
    const cur = this.sql.exec(
      `UPDATE device_grants SET status = ?, login = ?
       WHERE user_code = ? AND status = 'pending' AND COALESCE(live_until, expires_at) > ?`,
      a.approvedBy ? "approved" : "denied",
      a.approvedBy ? JSON.stringify(a.approvedBy) : null,
      a.userCode,
      a.now,
    );
    return cur.rowsWritten > 0;
  }

  /**
   * One poll of the token endpoint (RFC 8628 §3.4, §3.5). Polling sooner than the interval answers
   * `slow_down` and adds 5 s to it; an approved request answers `approved` once, then the row is spent
   * (`invalid` after); a denied one answers `denied` once and goes.
   */
  pollDevice(a: PollDevice): PollResult {
    return this.ctx.storage.transactionSync((): PollResult => {
      const row = this.sql
        .exec<{
          client_id: string;
          scope: string;
          status: string;
          interval_ms: number;
          last_poll_at: number;
          login: string | null;
          expires_at: number;
        }>(
          `SELECT client_id, scope, status, interval_ms, last_poll_at, login, COALESCE(live_until, expires_at) AS expires_at
           FROM device_grants WHERE device_hash = ?`,
          a.deviceHash,
        )
        .toArray()[0];
      if (!row || row.client_id !== a.clientId || row.status === "issued") return { status: "invalid" };
      if (row.expires_at <= a.now) return { status: "expired" };
      if (row.status === "denied") {
        this.sql.exec("DELETE FROM device_grants WHERE device_hash = ?", a.deviceHash);
        return { status: "denied" };
      }
      if (row.status === "approved") {
        this.sql.exec("UPDATE device_grants SET status = 'issued', login = NULL WHERE device_hash = ?", a.deviceHash);
        return { status: "approved", login: JSON.parse(row.login as string) as DeviceLogin, scope: row.scope };
      }
      if (a.now - row.last_poll_at < row.interval_ms - AuthCodeStore.POLL_JITTER_MS) {
        const interval = Math.max(
          row.interval_ms,
          Math.min(row.interval_ms + 5_000, AuthCodeStore.MAX_POLL_INTERVAL_MS),
        );
        this.sql.exec(
          "UPDATE device_grants SET interval_ms = ?, last_poll_at = ? WHERE device_hash = ?",
          interval,
          a.now,
          a.deviceHash,
        );
        return { status: "slow_down", interval_ms: interval };
      }
      this.sql.exec("UPDATE device_grants SET last_poll_at = ? WHERE device_hash = ?", a.now, a.deviceHash);
      return { status: "pending" };
    });
  }

  /**
   * Spends a code once (RFC 6749 §4.1.3). The first presentation records `grantId` (null for a refused
   * one) and gets `ok`; every later one gets `reused` with the grant to revoke, or `spent` when the
   * first presentation issued nothing.
   */
  async redeemCode(a: RedeemCode): Promise<RedeemResult> {
    const result = this.ctx.storage.transactionSync((): RedeemResult => {
      const spent = spendCode(this.sql, { into: "spent_codes", tables: ["spent_codes"] }, a, a.grantId);
      if (spent.status === "ok" && a.grantId && a.issued) this.recordAudit([a.issued]);
      return spent;
    });
    if (result.status === "ok") await (a.grantId && a.issued ? this.auditFlushSoon() : this.expireAt(a.keepUntil));
    return result;
  }
}
countVerbCalls(AuthCodeStore);
