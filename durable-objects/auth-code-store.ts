import type { AuditEvent } from "../workers/shared/audit";
import { countVerbCalls, ShardStore } from "./shard-store";

/**
 * Authorization codes, keyed by SHA-256 of the code. Consuming a code is atomic; the ids of what the
 * redemption issues are recorded in the same write, so a second redemption learns what to revoke
 * (RFC 6749 §4.1.2: the server SHOULD revoke tokens issued from a code that is used twice).
 */

export interface CodeGrant {
  client_id: string;
  redirect_uri: string;
  code_challenge: string;
  scope: string;
  nonce?: string;
  sub: string;
  email: string;
  sid: string;
  auth_time: number;
}

export type ConsumeResult =
  | { status: "ok"; grant: CodeGrant }
  | { status: "reused"; grant_id: string; sid: string }
  | { status: "invalid" };

export class AuthCodeStore extends ShardStore {
  protected schema(): string[] {
    return [
      `CREATE TABLE IF NOT EXISTS codes (
        code_hash TEXT PRIMARY KEY,
        grant_json TEXT NOT NULL,
        redeemed_grant_id TEXT,
        expires_at INTEGER NOT NULL)`,
      "CREATE INDEX IF NOT EXISTS codes_exp ON codes(expires_at)",
    ];
  }

  protected expiringTables(): string[] {
    return ["codes"];
  }

  async issueCode(codeHash: string, grant: CodeGrant, expiresAt: number, keepUntil: number): Promise<void> {
    // A redeemed code is kept past its lifetime (until `keepUntil`) so a late replay still revokes.
    this.sql.exec(
      "INSERT INTO codes (code_hash, grant_json, expires_at) VALUES (?, ?, ?)",
      codeHash,
      JSON.stringify({ ...grant, _exp: expiresAt }),
      keepUntil,
    );
    await this.expireAt(keepUntil);
  }

  /**
   * Redeems a code once (RFC 6749 §4.1.3). `grantId` names what this redemption will issue; a later
   * redemption of the same code gets it back so the caller can revoke it. A code presented by another
   * client is refused without being spent; a wrong `redirect_uri` or PKCE verifier spends it.
   * `issued` is the audit event of a successful redemption (its user is the grant's), written in the
   * same transaction.
   */
  async consumeCode(
    codeHash: string,
    grantId: string,
    now: number,
    presented: PresentedCode,
    issued?: AuditEvent,
  ): Promise<ConsumeResult> {
    const result = this.ctx.storage.transactionSync((): ConsumeResult => {
      const row = this.sql
        .exec<{ grant_json: string; redeemed_grant_id: string | null }>(
          "SELECT grant_json, redeemed_grant_id FROM codes WHERE code_hash = ? AND expires_at > ?",
          codeHash,
          now,
        )
        .toArray()[0];
      if (!row) return { status: "invalid" };
      const { _exp, ...grant } = JSON.parse(row.grant_json) as CodeGrant & { _exp: number };
      if (grant.client_id !== presented.client_id) return { status: "invalid" };
      if (row.redeemed_grant_id) return { status: "reused", grant_id: row.redeemed_grant_id, sid: grant.sid };
      if (_exp <= now) return { status: "invalid" };
      this.sql.exec("UPDATE codes SET redeemed_grant_id = ? WHERE code_hash = ?", grantId, codeHash);
      if (grant.redirect_uri !== presented.redirect_uri || grant.code_challenge !== presented.code_challenge)
        return { status: "invalid" };
      if (issued) this.recordAudit([{ ...issued, user_id: grant.sub }]);
      return { status: "ok", grant };
    });
    if (result.status === "ok" && issued) await this.auditFlushSoon();
    return result;
  }
}
countVerbCalls(AuthCodeStore);

export interface PresentedCode {
  client_id: string;
  redirect_uri: string;
  /** BASE64URL(SHA256(code_verifier)), RFC 7636 §4.6. */
  code_challenge: string;
}
