import type { SessionInfo, StartSession } from "./contract";
import { countVerbCalls, ShardStore } from "./shard-store";

/**
 * Browser sessions, keyed by the SHA-256 of the session cookie, so storage never holds a usable
 * cookie. The login transaction itself is not stored: it travels sealed in `tx` (op-auth's
 * login-tx.ts), nor is a verified one: `redirect_to` carries it sealed, and following it stores the
 * session. A session row remembers the hash of the transaction that made it, which makes a
 * transaction good for one session (and so for one code).
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
    // After the upgrades: a login transaction makes one session (NULLs, from older rows, never clash).
    return ["CREATE UNIQUE INDEX IF NOT EXISTS sessions_tx ON sessions(tx_hash)"];
  }

  protected expiringTables(): string[] {
    return ["sessions"];
  }

  /**
   * Stores the session a verified login made, when its `redirect_to` is followed. False when the
   * transaction already made a session (a replayed or raced `redirect_to`): nothing is written.
   */
  async startSession(a: StartSession): Promise<boolean> {
    const done = this.ctx.storage.transactionSync(() => {
      const cur = this.sql.exec(
        `INSERT INTO sessions (session_hash, sid, sub, email, auth_time, expires_at, tx_hash)
         VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(tx_hash) DO NOTHING`,
        a.sessionHash,
        a.session.sid,
        a.session.sub,
        a.session.email,
        a.session.auth_time,
        a.session.expires_at,
        a.txHash,
      );
      if (cur.rowsWritten === 0) return false;
      if (a.signIn) this.recordAudit([a.signIn]);
      return true;
    });
    if (done) await (a.signIn ? this.auditFlushSoon() : this.expireAt(a.session.expires_at));
    return done;
  }

  session(sessionHash: string, now: number): SessionInfo | null {
    return (
      this.sql
        .exec<Record<keyof SessionInfo, never>>(
          "SELECT sid, sub, email, auth_time, expires_at FROM sessions WHERE session_hash = ? AND expires_at > ?",
          sessionHash,
          now,
        )
        .toArray()[0] ?? null
    );
  }

  /** Ends a session; returns its public `sid` so the caller can revoke the tokens of its logins. */
  endSession(sessionHash: string): string | null {
    const row = this.sql
      .exec<{ sid: string }>("DELETE FROM sessions WHERE session_hash = ? RETURNING sid", sessionHash)
      .toArray()[0];
    return row?.sid ?? null;
  }
}
countVerbCalls(SessionStore);
