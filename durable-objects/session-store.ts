import { AUDIT_FLUSH_DELAY_MS } from "./audit-outbox";
import type { Carrier } from "./carried-audit";
import { storedEvents } from "./contract/carried-events";
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
        tx_hash TEXT,
        audit TEXT,
        audit_due INTEGER) WITHOUT ROWID`,
      "CREATE INDEX IF NOT EXISTS sessions_exp ON sessions(expires_at)",
      // Login transactions lived in this table before they were sealed into `tx`; nothing reads it.
      "DROP TABLE IF EXISTS login_tx",
    ];
  }

  protected override upgrades(): Record<string, string[]> {
    // Shards created before sealed transactions have a sessions table without this column.
    // Issue 44: the login's events ride on the session's row (carried-audit.ts).
    return {
      sessions: [
        "ALTER TABLE sessions ADD COLUMN tx_hash TEXT",
        "ALTER TABLE sessions ADD COLUMN audit TEXT",
        "ALTER TABLE sessions ADD COLUMN audit_due INTEGER",
      ],
    };
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

  /** Issue 44: the login's events so far (its `code_sent`, its `sign_in`) ride on the session's row. */
  protected override carriers(): Carrier[] {
    return [{ base: "sessions", key: ["session_hash"] }];
  }

  /**
   * Stores the session a verified login made, when its `redirect_to` is followed. False when the
   * transaction already made a session (a replayed or raced `redirect_to`): nothing is written. The
   * session's id is derived from its transaction's (op-auth's email-code.ts), so the key itself makes
   * a transaction good for one session, with no second index to keep.
   */
  async startSession(a: StartSession): Promise<boolean> {
    const { table, end } = this.bucketFor("sessions", a.session.expires_at, a.now);
    const due = a.auditDue ?? a.now + AUDIT_FLUSH_DELAY_MS;
    const done = this.ctx.storage.transactionSync(() => {
      for (const t of this.buckets.tables("sessions"))
        if (this.sql.exec(`SELECT 1 FROM ${t} WHERE session_hash = ?`, a.sessionHash).toArray().length) return false;
      // A transaction begun before sessions were keyed by it (its row is in the table before buckets).
      if (this.sql.exec("SELECT 1 FROM sessions WHERE tx_hash = ?", a.txHash).toArray().length) return false;
      const events = a.signIn ? [...(a.carried ?? []), a.signIn] : null;
      this.sql.exec(
        `INSERT INTO ${table} (session_hash, sid, sub, email, auth_time, expires_at, tx_hash, audit, audit_due)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        a.sessionHash,
        a.session.sid,
        a.session.sub,
        a.session.email,
        a.session.auth_time,
        a.session.expires_at,
        a.txHash,
        events ? JSON.stringify(storedEvents(events)) : null,
        events ? due : null,
      );
      if (events) this.carried.note(table, [a.sessionHash], due);
      return true;
    });
    if (done) await this.expireAt(a.signIn ? due : end);
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

  /**
   * Ends a session; returns its public `sid` so the caller can revoke the tokens of its logins. The
   * row stays, expired and emptied of the person (address and subject), until its bucket is dropped
   * (issue 44: it may still carry its login's events to D1; an update is one billed row, as the delete
   * was).
   */
  endSession(sessionHash: string): string | null {
    for (const t of this.buckets.tables("sessions")) {
      const row = this.sql
        .exec<{ sid: string }>(
          `UPDATE ${t} SET expires_at = 0, email = '', sub = '' WHERE session_hash = ? AND expires_at > 0 RETURNING sid`,
          sessionHash,
        )
        .toArray()[0];
      if (row) return row.sid;
    }
    return null;
  }
}
countVerbCalls(SessionStore);
