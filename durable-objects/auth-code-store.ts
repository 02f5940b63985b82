import type { RedeemCode, RedeemResult } from "./contract";
import { countVerbCalls, ShardStore } from "./shard-store";

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
      `CREATE TABLE IF NOT EXISTS spent_codes (
        code_hash TEXT PRIMARY KEY,
        grant_id TEXT,
        sid TEXT NOT NULL,
        expires_at INTEGER NOT NULL) WITHOUT ROWID`,
      "CREATE INDEX IF NOT EXISTS spent_codes_exp ON spent_codes(expires_at)",
      // Codes were stored whole before they carried their grant sealed; nothing reads this table.
      "DROP TABLE IF EXISTS codes",
    ];
  }

  protected expiringTables(): string[] {
    return ["spent_codes"];
  }

  /**
   * Spends a code once (RFC 6749 §4.1.3). The first presentation records `grantId` (null for a refused
   * one) and gets `ok`; every later one gets `reused` with the grant to revoke, or `spent` when the
   * first presentation issued nothing.
   */
  async redeemCode(a: RedeemCode): Promise<RedeemResult> {
    const result = this.ctx.storage.transactionSync((): RedeemResult => {
      const cur = this.sql.exec(
        "INSERT INTO spent_codes (code_hash, grant_id, sid, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT(code_hash) DO NOTHING",
        a.codeHash,
        a.grantId,
        a.sid,
        a.keepUntil,
      );
      if (cur.rowsWritten > 0) {
        if (a.grantId && a.issued) this.recordAudit([a.issued]);
        return { status: "ok" };
      }
      const first = this.sql
        .exec<{ grant_id: string | null; sid: string }>(
          "SELECT grant_id, sid FROM spent_codes WHERE code_hash = ?",
          a.codeHash,
        )
        .one();
      return first.grant_id ? { status: "reused", grant_id: first.grant_id, sid: first.sid } : { status: "spent" };
    });
    if (result.status === "ok") await (a.grantId && a.issued ? this.auditFlushSoon() : this.expireAt(a.keepUntil));
    return result;
  }
}
countVerbCalls(AuthCodeStore);
