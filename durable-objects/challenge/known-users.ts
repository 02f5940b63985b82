import type { ClaimsSnapshot, KnownUserFound } from "../contract/verbs";

/**
 * Which user an address belongs to (`known_users`): a cache of D1, which stays the source of truth,
 * with the user's compiled claims, versioned (issue 24). A sign-in's verify reads it in its own
 * transaction, so a returning user reads no D1 (issue 28).
 */

const HOUR = 3_600_000;
/**
 * How long the shard trusts its copy of an address's user before reading D1 again. Every way a user
 * stops being the address's (an admin delete) tells the shard at once (`forgetUser`), so the copy only
 * bounds drift; a sign-in that finds it older than KNOWN_USER_EXTEND_AFTER_MS extends it in the same
 * transaction, so a returning user reads no D1 however long ago the last sign-in was (issue 28).
 */
export const KNOWN_USER_TTL_MS = 400 * 24 * HOUR;
/**
 * A copy written longer ago than this is extended when a sign-in reads it: one row, at most twice a
 * year per address, so a user who signs in monthly writes none for it (issue 28).
 */
export const KNOWN_USER_EXTEND_AFTER_MS = 180 * 24 * HOUR;

/** The address's user, if known; read by a sign-in, inside its transaction. */
export function readKnownUser(sql: SqlStorage, emailKey: string, now: number): KnownUserFound | null {
  const row = sql
    .exec<{ user_id: string; expires_at: number; claims: string | null }>(
      "SELECT user_id, expires_at, claims FROM known_users WHERE email_key = ? AND expires_at > ?",
      emailKey,
      now,
    )
    .toArray()[0];
  if (!row) return null;
  // Read by a sign-in: extended when written more than six months ago (called inside its transaction).
  if (row.expires_at - now < KNOWN_USER_TTL_MS - KNOWN_USER_EXTEND_AFTER_MS)
    sql.exec("UPDATE known_users SET expires_at = ? WHERE email_key = ?", now + KNOWN_USER_TTL_MS, emailKey);
  return row.claims ? { id: row.user_id, claims_json: row.claims } : { id: row.user_id };
}

/**
 * Writes addresses' users (inside the caller's transaction): `upsert` remembers them until
 * `expiresAt`; `update` writes only the claims, and only where the address is already known as that
 * user. A newer claims version replaces an older one, never the reverse.
 */
export function writeKnownUsers(
  sql: SqlStorage,
  users: { emailKey: string; id: string; claims?: ClaimsSnapshot | undefined }[],
  expiresAt: number,
  mode: "upsert" | "update",
): void {
  for (const u of users) {
    const claims = u.claims ? JSON.stringify(u.claims) : null;
    const version = u.claims?.v ?? 0;
    if (mode === "update")
      sql.exec(
        "UPDATE known_users SET claims = ?, claims_version = ? WHERE email_key = ? AND user_id = ? AND claims_version < ?",
        claims,
        version,
        u.emailKey,
        u.id,
        version,
      );
    else
      sql.exec(
        `INSERT INTO known_users (email_key, user_id, expires_at, claims, claims_version) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT(email_key) DO UPDATE SET user_id = excluded.user_id, expires_at = excluded.expires_at,
           claims = CASE WHEN user_id IS NOT excluded.user_id OR excluded.claims_version > claims_version
             THEN excluded.claims ELSE claims END,
           claims_version = CASE WHEN user_id IS NOT excluded.user_id OR excluded.claims_version > claims_version
             THEN excluded.claims_version ELSE claims_version END`,
        u.emailKey,
        u.id,
        expiresAt,
        claims,
        version,
      );
  }
}

export function deleteKnownUser(sql: SqlStorage, emailKey: string): void {
  sql.exec("DELETE FROM known_users WHERE email_key = ?", emailKey);
}
