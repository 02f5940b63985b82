import type { RedeemCode, RedeemResult } from "./contract/verbs";

/**
 * Authorization codes spent (RFC 6749 §4.1.2: a code is used once), as the RevocationStore keeps them
 * in a login's shard (issue 28) and the AuthCodeStore kept them for codes issued before. A code is
 * kept as long as the tokens it yields live (minutes). The RevocationStore keeps them in expiry
 * buckets (expiry-buckets.ts): a redemption writes one row, and nothing deletes it row by row.
 */
export const SPENT_CODES_TABLE = `CREATE TABLE IF NOT EXISTS spent_codes (
  code_hash TEXT PRIMARY KEY,
  grant_id TEXT,
  sid TEXT NOT NULL,
  expires_at INTEGER NOT NULL) WITHOUT ROWID`;

/**
 * Spends a code, inside the caller's transaction. The first presentation records `grantId` (null when
 * it issues nothing) and gets `ok`; every later one gets `reused` with the grant to revoke, or `spent`
 * when the first presentation issued nothing.
 */
export function spendCode(
  sql: SqlStorage,
  where: { into: string; tables: string[] },
  a: RedeemCode,
  grantId: string | null,
): RedeemResult {
  for (const table of where.tables) {
    const first = sql
      .exec<{ grant_id: string | null; sid: string }>(
        `SELECT grant_id, sid FROM ${table} WHERE code_hash = ?`,
        a.codeHash,
      )
      .toArray()[0];
    if (first)
      return first.grant_id ? { status: "reused", grant_id: first.grant_id, sid: first.sid } : { status: "spent" };
  }
  sql.exec(
    `INSERT INTO ${where.into} (code_hash, grant_id, sid, expires_at) VALUES (?, ?, ?, ?)`,
    a.codeHash,
    grantId,
    a.sid,
    a.keepUntil,
  );
  return { status: "ok" };
}
