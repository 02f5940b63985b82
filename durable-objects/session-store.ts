import type { AuditEvent } from "../workers/shared/audit";
import { countVerbCalls, ShardStore } from "./shard-store";

/**
 * Login transactions and browser sessions. Rows are keyed by the SHA-256 of the id (tx id or session
 * cookie), so storage never holds a usable cookie. A session is created in its transaction's shard, so
 * finishing a login is one atomic call.
 */

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
  | { ok: false; reason: "unknown_tx" | "not_logged_in" | "session_mismatch" };

export class SessionStore extends ShardStore {
  protected schema(): string[] {
    return [
      `CREATE TABLE IF NOT EXISTS login_tx (
        tx_hash TEXT PRIMARY KEY,
        request TEXT NOT NULL,
        email TEXT,
        challenge_route TEXT,
        session_hash TEXT,
        expires_at INTEGER NOT NULL)`,
      "CREATE INDEX IF NOT EXISTS login_tx_exp ON login_tx(expires_at)",
      `CREATE TABLE IF NOT EXISTS sessions (
        session_hash TEXT PRIMARY KEY,
        sid TEXT NOT NULL,
        sub TEXT NOT NULL,
        email TEXT NOT NULL,
        auth_time INTEGER NOT NULL,
        expires_at INTEGER NOT NULL)`,
      "CREATE INDEX IF NOT EXISTS sessions_exp ON sessions(expires_at)",
    ];
  }

  protected expiringTables(): string[] {
    return ["login_tx", "sessions"];
  }

  async beginLogin(txHash: string, request: AuthRequest, expiresAt: number): Promise<void> {
    this.sql.exec(
      "INSERT INTO login_tx (tx_hash, request, expires_at) VALUES (?, ?, ?)",
      txHash,
      JSON.stringify(request),
      expiresAt,
    );
    await this.expireAt(expiresAt);
  }

  /**
   * Records which email (and the ChallengeStore shard holding its challenge) this transaction is
   * sending a code to. False when the transaction is unknown, expired or already finished.
   */
  bindEmail(txHash: string, email: string, challengeRoute: string, now: number): boolean {
    const cur = this.sql.exec(
      "UPDATE login_tx SET email = ?, challenge_route = ? WHERE tx_hash = ? AND expires_at > ? AND session_hash IS NULL",
      email,
      challengeRoute,
      txHash,
      now,
    );
    return cur.rowsWritten > 0;
  }

  /** The email and challenge route a transaction awaits a code for, if it is live and unfinished. */
  pendingLogin(txHash: string, now: number): { email: string; challenge_route: string } | null {
    const row = this.sql
      .exec<{ email: string | null; challenge_route: string | null }>(
        "SELECT email, challenge_route FROM login_tx WHERE tx_hash = ? AND expires_at > ? AND session_hash IS NULL",
        txHash,
        now,
      )
      .toArray()[0];
    if (!row?.email || !row.challenge_route) return null;
    return { email: row.email, challenge_route: row.challenge_route };
  }

  /**
   * Finishes the login of a transaction with a verified code: creates the session and marks the
   * transaction done, atomically (a second verify of the same transaction gets false). `signIn` is
   * the audit event, written in the same transaction.
   */
  async completeLogin(
    txHash: string,
    sessionHash: string,
    session: SessionInfo,
    now: number,
    signIn?: AuditEvent,
  ): Promise<boolean> {
    const done = this.ctx.storage.transactionSync(() => {
      const cur = this.sql.exec(
        "UPDATE login_tx SET session_hash = ? WHERE tx_hash = ? AND expires_at > ? AND session_hash IS NULL",
        sessionHash,
        txHash,
        now,
      );
      if (cur.rowsWritten === 0) return false;
      this.sql.exec(
        "INSERT INTO sessions (session_hash, sid, sub, email, auth_time, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
        sessionHash,
        session.sid,
        session.sub,
        session.email,
        session.auth_time,
        session.expires_at,
      );
      if (signIn) this.recordAudit([signIn]);
      return true;
    });
    if (done && signIn) await this.auditFlushSoon();
    return done;
  }

  /**
   * The authorization request of a finished transaction, for the session that finished it. Single
   * use: the transaction is deleted, so `redirect_to` yields one code.
   */
  resumeLogin(txHash: string, sessionHash: string | null, now: number): ResumeResult {
    const tx = this.sql
      .exec<{ request: string; session_hash: string | null }>(
        "SELECT request, session_hash FROM login_tx WHERE tx_hash = ? AND expires_at > ?",
        txHash,
        now,
      )
      .toArray()[0];
    if (!tx) return { ok: false, reason: "unknown_tx" };
    if (!tx.session_hash) return { ok: false, reason: "not_logged_in" };
    if (tx.session_hash !== sessionHash) return { ok: false, reason: "session_mismatch" };
    const session = this.#readSession(sessionHash, now);
    if (!session) return { ok: false, reason: "not_logged_in" };
    this.sql.exec("DELETE FROM login_tx WHERE tx_hash = ?", txHash);
    return { ok: true, request: JSON.parse(tx.request) as AuthRequest, session };
  }

  session(sessionHash: string, now: number): SessionInfo | null {
    return this.#readSession(sessionHash, now);
  }

  #readSession(sessionHash: string, now: number): SessionInfo | null {
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
