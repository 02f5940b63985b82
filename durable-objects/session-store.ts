import type { AuditEvent } from "../workers/shared/audit";
import { countVerbCalls, ShardStore } from "./shard-store";

export interface AuthRequest {
  client_id: string;
  redirect_uri: string;
  scope: string;
  state?: string;
  nonce?: string;
  code_challenge: string;
  response_mode?: string;
  max_age?: number;
  prompt?: string;
}

export interface SessionInfo {
  sub: string;
  email: string;
  sid: string;
  auth_time: number;
  expires_at: number;
}

export type ResumeResult =
  | { ok: true; request: AuthRequest; session: SessionInfo }
  | { ok: false; reason: "unknown_tx" | "session_mismatch" };

/** What a verified code makes: a session, born from one login transaction. */
export interface StartSession {
  /** SHA-256 of the login transaction's id: one transaction makes at most one session. */
  txHash: string;
  /** SHA-256 of the session cookie. */
  sessionHash: string;
  session: SessionInfo;
  /** The authorization request the transaction carried, for `redirect_to` to finish, once. */
  request: AuthRequest;
  /** Until when `redirect_to` may finish it: the transaction's own expiry (ms). */
  requestExpiresAt: number;
  now: number;
  /** The `sign_in` audit event, written in the same transaction. */
  signIn?: AuditEvent;
}

/**
 * Browser sessions, keyed by the SHA-256 of the session cookie, so storage never holds a usable
 * cookie. The login transaction itself is not stored: it travels sealed in `tx` (op-auth's
 * login-tx.ts). A session row remembers the hash of the transaction that made it, which makes a
 * transaction good for one session, and holds that transaction's authorization request until
 * `redirect_to` turns it into a code, once.
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
        pending_request TEXT,
        pending_until INTEGER)`,
      "CREATE INDEX IF NOT EXISTS sessions_exp ON sessions(expires_at)",
      // Login transactions lived in this table before they were sealed into `tx`; nothing reads it.
      "DROP TABLE IF EXISTS login_tx",
    ];
  }

  protected override upgrades(): Record<string, string[]> {
    // Shards created before sealed transactions have a sessions table without these columns.
    return {
      sessions: [
        "ALTER TABLE sessions ADD COLUMN tx_hash TEXT",
        "ALTER TABLE sessions ADD COLUMN pending_request TEXT",
        "ALTER TABLE sessions ADD COLUMN pending_until INTEGER",
      ],
    };
  }

  protected override indexes(): string[] {
    // After the upgrades: a login transaction makes one session (NULLs, from older rows, never clash).
    return ["CREATE UNIQUE INDEX IF NOT EXISTS sessions_tx ON sessions(tx_hash)"];
  }

  protected expiringTables(): string[] {
    return ["sessions"];
  }

  /**
   * Finishes the login of a transaction whose code was verified: creates the session and keeps the
   * authorization request for `redirect_to`. False when the transaction already made a session (a
   * replayed or raced verify), in which case nothing is written.
   */
  async startSession(a: StartSession): Promise<boolean> {
    const done = this.ctx.storage.transactionSync(() => {
      const cur = this.sql.exec(
        `INSERT INTO sessions (session_hash, sid, sub, email, auth_time, expires_at, tx_hash, pending_request, pending_until)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(tx_hash) DO NOTHING`,
        a.sessionHash,
        a.session.sid,
        a.session.sub,
        a.session.email,
        a.session.auth_time,
        a.session.expires_at,
        a.txHash,
        JSON.stringify(a.request),
        a.requestExpiresAt,
      );
      if (cur.rowsWritten === 0) return false;
      if (a.signIn) this.recordAudit([a.signIn]);
      return true;
    });
    if (done) await (a.signIn ? this.auditFlushSoon() : this.expireAt(a.session.expires_at));
    return done;
  }

  /**
   * The authorization request of a finished transaction, for the session that finished it. Single
   * use: the request is cleared, so `redirect_to` yields one code.
   */
  resumeLogin(txHash: string, sessionHash: string | null, now: number): ResumeResult {
    const row = this.sql
      .exec<Record<keyof SessionInfo, never> & { session_hash: string; pending_request: string | null }>(
        `SELECT session_hash, sid, sub, email, auth_time, expires_at, pending_request FROM sessions
         WHERE tx_hash = ? AND expires_at > ? AND pending_until > ?`,
        txHash,
        now,
        now,
      )
      .toArray()[0];
    if (!row?.pending_request) return { ok: false, reason: "unknown_tx" };
    if (row.session_hash !== sessionHash) return { ok: false, reason: "session_mismatch" };
    this.sql.exec(
      "UPDATE sessions SET pending_request = NULL, pending_until = NULL WHERE session_hash = ?",
      row.session_hash,
    );
    const { session_hash: _, pending_request: request, ...session } = row;
    return { ok: true, request: JSON.parse(request) as AuthRequest, session };
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
