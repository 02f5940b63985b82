import type { SessionInfo, StartSession } from "./contract/verbs";
import { countVerbCalls, ShardStore } from "./shard-store";

/**
 * Browser sessions, keyed by the SHA-256 of the session cookie, so storage never holds a usable
 * cookie. The login transaction itself is not stored: it travels sealed in `tx` (op-auth's
 * login-tx.ts), nor is a verified one: `redirect_to` carries it sealed, and following it stores the
 * session. A session's id is derived from the transaction that made it, which makes a transaction good
 * for one session (and so for one code). Sessions are kept in expiry buckets (expiry-buckets.ts).
 */
export class SessionStore extends ShardStore {
  protected schema(): string[] {
    return [
      `CREATE TABLE IF NOT EXISTS sessions (
        session_hash TEXT PRIMARY KEY,
        sid TEXT NOT NULL,
        sub TEXT NOT NULL,
        email TEXT NOT NULL,
        auth_time INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        tx_hash TEXT) WITHOUT ROWID`,
      "CREATE INDEX IF NOT EXISTS sessions_exp ON sessions(expires_at)",
      // Login transactions lived in this table before they were sealed into `tx`; nothing reads it.
      "DROP TABLE IF EXISTS login_tx",
    ];
  }

  protected override upgrades(): Record<string, string[]> {
    // Shards created before sealed transactions have a sessions table without this column.
    return { sessions: ["ALTER TABLE sessions ADD COLUMN tx_hash TEXT"] };
  }

  protected override indexes(): string[] {
    // The table before expiry buckets: a login transaction made one session there (NULLs never clash).
    return ["CREATE UNIQUE INDEX IF NOT EXISTS sessions_tx ON sessions(tx_hash)"];
  }

  protected expiringTables(): string[] {
    return ["sessions"];
  }

  /** Issue 28: a session is one billed row, dropped with its bucket (no expiry index, no later delete). */
  protected override bucketedTables(): string[] {
    return ["sessions"];
  }

  /**
   * Stores the session a verified login made, when its `redirect_to` is followed. False when the
   * transaction already made a session (a replayed or raced `redirect_to`): nothing is written. The
   * session's id is derived from its transaction's (op-auth's email-code.ts), so the key itself makes
   * a transaction good for one session, with no second index to keep.
   */
  async startSession(a: StartSession): Promise<boolean> {
    const { table, end } = this.bucketFor("sessions", a.session.expires_at, a.now);
    const done = this.ctx.storage.transactionSync(() => {
      for (const t of this.buckets.tables("sessions"))
        if (this.sql.exec(`SELECT 1 FROM ${t} WHERE session_hash = ?`, a.sessionHash).toArray().length) return false;
      // A transaction begun before sessions were keyed by it (its row is in the table before buckets).
      if (this.sql.exec("SELECT 1 FROM sessions WHERE tx_hash = ?", a.txHash).toArray().length) return false;
      this.sql.exec(
        `INSERT INTO ${table} (session_hash, sid, sub, email, auth_time, expires_at, tx_hash) VALUES (?, ?, ?, ?, ?, ?, ?)`,
        a.sessionHash,
        a.session.sid,
        a.session.sub,
        a.session.email,
        a.session.auth_time,
        a.session.expires_at,
        a.txHash,
      );
      if (a.signIn) this.recordAudit([a.signIn]);
      return true;
    });
    if (done) await (a.signIn ? this.auditFlushSoon() : this.expireAt(end));
    return done;
  }

  session(sessionHash: string, now: number): SessionInfo | null {
    for (const t of this.buckets.tables("sessions")) {
      const row = this.sql
        .exec<Record<keyof SessionInfo, never>>(
          `SELECT sid, sub, email, auth_time, expires_at FROM ${t} WHERE session_hash = ? AND expires_at > ?`,
          sessionHash,
          now,
        )
        .toArray()[0];
      if (row) return row;
    }
    return null;
  }

  /** Ends a session; returns its public `sid` so the caller can revoke the tokens of its logins. */
  endSession(sessionHash: string): string | null {
    for (const t of this.buckets.tables("sessions")) {
      const row = this.sql
        .exec<{ sid: string }>(`DELETE FROM ${t} WHERE session_hash = ? RETURNING sid`, sessionHash)
        .toArray()[0];
      if (row) return row.sid;
    }
    return null;
  }
}
countVerbCalls(SessionStore);
