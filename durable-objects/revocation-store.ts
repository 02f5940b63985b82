import { countVerbCalls, ShardStore } from "./shard-store";

/**
 * Revocation marks for access tokens. A login's tokens are all placed in the shard its `sid` names,
 * so one call checks a token's `jti`, its grant and its session together, and one call revokes a
 * whole session or grant. A mark lives as long as the longest token it can affect.
 */
export class RevocationStore extends ShardStore {
  protected schema(): string[] {
    return [
      "CREATE TABLE IF NOT EXISTS revoked (key TEXT PRIMARY KEY, expires_at INTEGER NOT NULL)",
      "CREATE INDEX IF NOT EXISTS revoked_exp ON revoked(expires_at)",
    ];
  }

  protected expiringTables(): string[] {
    return ["revoked"];
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

  anyRevoked(keys: string[]): boolean {
    if (keys.length === 0) return false;
    const marks = keys.map(() => "?").join(",");
    return this.sql.exec(`SELECT 1 FROM revoked WHERE key IN (${marks}) LIMIT 1`, ...keys).toArray().length > 0;
  }
}
countVerbCalls(RevocationStore);
