import type { LoginRef, RedeemCodeForLogin, RedeemForLoginResult } from "./contract/verbs";
import { countVerbCalls, ShardStore } from "./shard-store";
import { SPENT_CODES_TABLE, spendCode } from "./spent-codes";

/**
 * Revocation marks. A login's tokens are all placed in the shard its `sid` names, so one call checks
 * a token's `jti`, its grant and its session together, and one call revokes a whole session or grant.
 * A revoked or deleted user is marked in every shard (`user:<id>` with the time of the revoke), so the
 * same one call also says whether the login's user was revoked after it began; and a user whose
 * organization grants changed (`claims:<id>`), whether the claims a login carries are older than that.
 * A mark lives as long as the longest token it can affect.
 */
export class RevocationStore extends ShardStore {
  protected schema(): string[] {
    return [
      "CREATE TABLE IF NOT EXISTS revoked (key TEXT PRIMARY KEY, expires_at INTEGER NOT NULL, at INTEGER)",
      "CREATE INDEX IF NOT EXISTS revoked_exp ON revoked(expires_at)",
      // Authorization codes spent (issue 28: here, in their login's shard, so that the login's check
      // and the spend are one call).
      SPENT_CODES_TABLE,
      // Values good once (a client assertion's or a DPoP proof's jti, a pushed request's request_uri),
      // each as long as it could be presented: one billed row, dropped with its bucket.
      "CREATE TABLE IF NOT EXISTS spent_once (key TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID",
    ];
  }

  protected override upgrades(): Record<string, string[]> {
    // Shards created before user marks: `at` is the revoke time (ms) of a `user:` mark, null otherwise.
    return { revoked: ["ALTER TABLE revoked ADD COLUMN at INTEGER"] };
  }

  protected expiringTables(): string[] {
    return ["revoked", "spent_codes", "spent_once"];
  }

  /** Issue 28: a spent code is one billed row, dropped with its bucket. */
  protected override bucketedTables(): string[] {
    return ["spent_codes", "spent_once"];
  }

  /**
   * The authorization code grant's check and spend, atomically (RFC 6749 §4.1.2: a code is used once;
   * OIDC: a code of a login that has ended issues nothing). The first presentation spends the code,
   * recording its grant only if the login still stands, and writes its `token_issued` event; a later
   * one gets `reused` with the grant to revoke, or `spent` when the first issued nothing.
   */
  async redeemCodeForLogin(a: RedeemCodeForLogin): Promise<RedeemForLoginResult> {
    const now = Date.now();
    const { table, end } = this.bucketFor("spent_codes", a.keepUntil, now);
    const result = this.ctx.storage.transactionSync((): RedeemForLoginResult => {
      const ended = this.#ended(a.login);
      const grantId = ended ? null : a.grantId;
      const spent = spendCode(this.sql, { into: table, tables: this.buckets.tables("spent_codes") }, a, grantId);
      if (spent.status === "ok" && grantId && a.issued) this.recordAudit([a.issued]);
      return { ...spent, ended };
    });
    if (result.status === "ok")
      await (a.grantId && a.issued && !result.ended ? this.auditFlushSoon() : this.expireAt(end));
    return result;
  }

  /** Keys are `jti:<id>`, `grant:<id>` or `sid:<id>`. */
  async revoke(keys: string[], expiresAt: number): Promise<void> {
    for (const key of keys)
      this.sql.exec(
        "INSERT INTO revoked (key, expires_at) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET expires_at = MAX(expires_at, excluded.expires_at)",
        key,
        expiresAt,
      );
    await this.expireAt(expiresAt);
  }

  /** Every login of `userId` that began at or before `at` (ms) has ended (an admin revoke or delete). */
  async revokeUser(userId: string, at: number, expiresAt: number): Promise<void> {
    this.#markSince(`user:${userId}`, at, expiresAt);
    await this.expireAt(expiresAt);
  }

  /**
   * The users' grants changed at `at` (ms): a login whose organization claims were read before then
   * issues no code's tokens (`claims:<id>`). Marks live as long as a login's claims travel sealed
   * (its transaction, then its code); a refresh reads the grants afresh.
   */
  async markClaimsChanged(userIds: string[], at: number, expiresAt: number): Promise<void> {
    for (const userId of userIds) this.#markSince(`claims:${userId}`, at, expiresAt);
    await this.expireAt(expiresAt);
  }

  /** A mark that ends what began at or before `at` (ms): the latest time and the longest life win. */
  #markSince(key: string, at: number, expiresAt: number): void {
    this.sql.exec(
      `INSERT INTO revoked (key, expires_at, at) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE
       SET at = MAX(COALESCE(at, 0), excluded.at), expires_at = MAX(expires_at, excluded.expires_at)`,
      key,
      expiresAt,
      at,
    );
  }

  /**
   * Spends `key`, good until `expiresAt`, and says whether this was its first use: a client
   * assertion's jti (RFC 7523 §3 item 7), a DPoP proof's jti (RFC 9449 §11.1), a pushed request's
   * request_uri (RFC 9126 §4). Kept in expiry buckets, so nothing deletes it row by row; an assertion
   * spent before the buckets is still found in `revoked` until it expires.
   */
  async spendOnce(key: string, expiresAt: number): Promise<boolean> {
    const { table, end } = this.bucketFor("spent_once", expiresAt);
    const first = this.ctx.storage.transactionSync(() => {
      if (this.sql.exec("SELECT 1 FROM revoked WHERE key = ?", key).toArray().length) return false;
      for (const t of this.buckets.tables("spent_once"))
        if (this.sql.exec(`SELECT 1 FROM ${t} WHERE key = ?`, key).toArray().length) return false;
      this.sql.exec(`INSERT INTO ${table} (key, expires_at) VALUES (?, ?)`, key, expiresAt);
      return true;
    });
    if (first) await this.expireAt(end);
    return first;
  }

  anyRevoked(keys: string[]): boolean {
    if (keys.length === 0) return false;
    const marks = keys.map(() => "?").join(",");
    return this.sql.exec(`SELECT 1 FROM revoked WHERE key IN (${marks}) LIMIT 1`, ...keys).toArray().length > 0;
  }

  /** The login has ended: its session was logged out or revoked, or its user revoked or deleted since it began. */
  loginEnded(login: LoginRef): boolean {
    return this.#ended(login);
  }

  // Not a verb: a verb calling another would count as two calls (countVerbCalls).
  #ended(login: LoginRef): boolean {
    // Claims read in the same second as a change count as read before it: refused, the safe side.
    const claimsKey = login.claimsAt === undefined ? "" : `claims:${login.sub}`;
    return (
      this.sql
        .exec(
          "SELECT 1 FROM revoked WHERE key = ? OR (key = ? AND at >= ?) OR (key = ? AND at >= ?) LIMIT 1",
          `sid:${login.sid}`,
          `user:${login.sub}`,
          login.authTime * 1000,
          claimsKey,
          (login.claimsAt ?? 0) * 1000,
        )
        .toArray().length > 0
    );
  }
}
countVerbCalls(RevocationStore);
