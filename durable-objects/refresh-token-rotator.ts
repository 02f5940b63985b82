import { AUDIT_FLUSH_DELAY_MS } from "./audit-outbox";
import type { Carrier } from "./carried-audit";
import { storedEvents } from "./contract/carried-events";
import type {
  FamilyGrant,
  RotateRefresh,
  RotateResult,
  StartCodeFamily,
  StartCodeFamilyResult,
} from "./contract/verbs";
import { countVerbCalls, ShardStore } from "./shard-store";

/**
 * Refresh-token families, one per login grant (RFC 9700 §4.14.2). A family holds the hash of its
 * current token and of the one it replaced, and `spent_tokens` the hash of every token it rotated out.
 * Presenting the replaced token within the grace window returns the sealed copy of the rotation's result
 * (a client retry); a spent token presented later revokes the family. A token this family never issued
 * is only invalid: the family id is no secret (access tokens carry it as `grant_id`), so a made-up token
 * must not be able to end someone's login. The sealed copy is AES-GCM under a key derived from the
 * replaced token, which storage holds only as a hash, so the copy is useless to anyone reading storage.
 */

const HOUR = 3_600_000;

export class RefreshTokenRotator extends ShardStore {
  protected schema(): string[] {
    return [
      `CREATE TABLE IF NOT EXISTS families (
        family_hash TEXT PRIMARY KEY,
        grant_json TEXT NOT NULL,
        client_id TEXT NOT NULL,
        current_hash TEXT NOT NULL,
        previous_hash TEXT,
        previous_sealed TEXT,
        rotated_at INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        revoked INTEGER NOT NULL DEFAULT 0,
        expires_at INTEGER NOT NULL,
        rotations INTEGER NOT NULL DEFAULT 0,
        rotations_reset_at INTEGER NOT NULL DEFAULT 0,
        audit TEXT,
        audit_due INTEGER) WITHOUT ROWID`,
      "CREATE INDEX IF NOT EXISTS families_exp ON families(expires_at)",
      `CREATE TABLE IF NOT EXISTS spent_tokens (
        token_hash TEXT PRIMARY KEY,
        family_hash TEXT NOT NULL,
        expires_at INTEGER NOT NULL)`,
      "CREATE INDEX IF NOT EXISTS spent_tokens_exp ON spent_tokens(expires_at)",
    ];
  }

  protected override upgrades(): Record<string, string[]> {
    // Families created before the hourly rotation cap.
    return {
      families: [
        "ALTER TABLE families ADD COLUMN rotations INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE families ADD COLUMN rotations_reset_at INTEGER NOT NULL DEFAULT 0",
        // Issue 44: the login's events ride on its family's row (carried-audit.ts).
        "ALTER TABLE families ADD COLUMN audit TEXT",
        "ALTER TABLE families ADD COLUMN audit_due INTEGER",
      ],
    };
  }

  protected expiringTables(): string[] {
    return ["families", "spent_tokens"];
  }

  /** Issue 28: a family is one billed row at a login, dropped with its bucket (no index, no later delete). */
  protected override bucketedTables(): string[] {
    return ["families"];
  }

  /**
   * Issue 44: a login's events (its `code_sent`, `sign_in` and `token_issued`) ride on its family's
   * row, the last record the login makes, and are written to D1 from there first.
   */
  protected override carriers(): Carrier[] {
    return [{ base: "families", key: ["family_hash"] }];
  }

  /** The table holding a live family, and its row, or null. */
  #family<T>(familyHash: string, now: number, columns: string): { table: string; row: T } | null {
    for (const table of this.buckets.tables("families")) {
      const row = this.sql
        .exec<Record<string, SqlStorageValue>>(
          `SELECT ${columns} FROM ${table} WHERE family_hash = ? AND expires_at > ?`,
          familyHash,
          now,
        )
        .toArray()[0];
      if (row) return { table, row: row as T };
    }
    return null;
  }

  async createFamily(
    familyHash: string,
    tokenHash: string,
    grant: FamilyGrant,
    now: number,
    expiresAt: number,
  ): Promise<void> {
    const { table, end } = this.bucketFor("families", expiresAt, now);
    this.sql.exec(
      `INSERT INTO ${table} (family_hash, grant_json, client_id, current_hash, rotated_at, created_at, expires_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
      familyHash,
      JSON.stringify(grant),
      grant.client_id,
      tokenHash,
      now,
      now,
      expiresAt,
    );
    await this.expireAt(end);
  }

  /**
   * A login's family, made by its authorization code's first presentation, which it spends (issue 28:
   * the family's row is the spend, so the code needs no spent-code row of its own). The family's id
   * is derived from the code's, so a later presentation finds it: a family that issued is revoked and
   * `reused` answers (RFC 6749 §4.1.2: the caller revokes the grant's access tokens too); one made
   * only to spend the code answers `spent`. Check and insert are one transaction.
   */
  async startCodeFamily(a: StartCodeFamily): Promise<StartCodeFamilyResult> {
    const { table, end } = this.bucketFor("families", a.expiresAt, a.now);
    const due = a.now + AUDIT_FLUSH_DELAY_MS;
    const result = this.ctx.storage.transactionSync((): StartCodeFamilyResult => {
      const found = this.#family<{ revoked: number }>(a.familyHash, a.now, "revoked");
      if (found) {
        if (found.row.revoked) return { status: "spent" };
        this.sql.exec(
          `UPDATE ${found.table} SET revoked = 1, previous_sealed = NULL WHERE family_hash = ?`,
          a.familyHash,
        );
        return { status: "reused" };
      }
      const events = a.issue && a.issued ? [...(a.carried ?? []), a.issued] : null;
      this.sql.exec(
        `INSERT INTO ${table} (family_hash, grant_json, client_id, current_hash, rotated_at, created_at, expires_at, revoked,
           audit, audit_due)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        a.familyHash,
        JSON.stringify(a.grant),
        a.grant.client_id,
        a.tokenHash,
        a.now,
        a.now,
        a.expiresAt,
        a.issue ? 0 : 1,
        events ? JSON.stringify(storedEvents(events)) : null,
        events ? due : null,
      );
      if (events) this.carried.note(table, [a.familyHash], due);
      return { status: "ok" };
    });
    await this.expireAt(result.status === "ok" && a.issue && a.issued ? due : end);
    return result;
  }

  /**
   * Takes back a family its token response never revealed (its login turned out ended): revoked, and
   * its `token_issued` event withdrawn while it still waits in the outbox.
   */
  withdrawCodeFamily(familyHash: string, eventId: string | null): void {
    this.ctx.storage.transactionSync(() => {
      // Its events go with it: the earlier ones still ride on the login's session (issue 44).
      for (const t of this.buckets.tables("families")) {
        this.sql.exec(
          `UPDATE ${t} SET revoked = 1, previous_sealed = NULL, audit = NULL, audit_due = NULL WHERE family_hash = ?`,
          familyHash,
        );
        this.carried.forget(t, [familyHash]);
      }
      if (eventId) this.withdrawAudit(eventId);
    });
  }

  /**
   * Forgets a family made by a code whose token request then failed before any token was revealed
   * (its login's check could not be made): the code is unspent again, and its event gone.
   */
  forgetCodeFamily(familyHash: string, eventId: string): void {
    this.ctx.storage.transactionSync(() => {
      for (const t of this.buckets.tables("families")) {
        this.sql.exec(`DELETE FROM ${t} WHERE family_hash = ?`, familyHash);
        this.carried.forget(t, [familyHash]);
      }
      this.withdrawAudit(eventId);
    });
  }

  /**
   * Rotates the family's current token to `nextHash`, at most `maxRotationsPerHour` times an hour
   * (fixed windows from the first rotation after the last one ended). A duplicate retry within the
   * grace window gets the sealed response of the rotation it repeats.
   */
  rotateRefresh(a: RotateRefresh): RotateResult {
    const { familyHash, presentedHash, clientId, nextHash, sealedNext, now, graceMs, requestedScope } = a;
    return this.ctx.storage.transactionSync((): RotateResult => {
      const found = this.#family<{
        grant_json: string;
        client_id: string;
        current_hash: string;
        previous_hash: string | null;
        previous_sealed: string | null;
        rotated_at: number;
        created_at: number;
        revoked: number;
        expires_at: number;
        rotations: number;
        rotations_reset_at: number;
      }>(
        familyHash,
        now,
        `grant_json, client_id, current_hash, previous_hash, previous_sealed, rotated_at, created_at, revoked,
         expires_at, rotations, rotations_reset_at`,
      );
      if (!found || found.row.revoked) return { status: "invalid" };
      const f = found.row;
      // RFC 6749 §10.4 / RFC 9700 §4.14.2: a token bound to another client is not this client's to use.
      if (f.client_id !== clientId) return { status: "invalid" };
      const grant = JSON.parse(f.grant_json) as FamilyGrant;
      // RFC 9449 §5: a bound family answers only its key's proof; without it nothing changes, so a
      // stolen token without the key can neither rotate the family nor revoke it.
      if (grant.dpop_jkt !== undefined && grant.dpop_jkt !== (a.dpopJkt ?? null))
        return { status: "dpop_key_mismatch" };
      if (presentedHash === f.current_hash) {
        // RFC 6749 §6: a refresh may narrow the scope, never widen it; a refused request rotates nothing.
        const granted = new Set(grant.scope.split(" "));
        if (requestedScope?.some((s) => !granted.has(s))) return { status: "invalid_scope" };
        // RFC 8707 §2.2: a refresh may ask for a resource the grant holds, never another; refused, nothing rotates.
        if (a.requestedResource?.some((r) => !grant.resource?.includes(r))) return { status: "invalid_target" };
        const windowOpen = f.rotations_reset_at > now;
        const rotations = windowOpen ? f.rotations : 0;
        if (rotations >= a.maxRotationsPerHour)
          return {
            status: "too_many_rotations",
            retry_after: Math.max(1, Math.ceil((f.rotations_reset_at - now) / 1000)),
          };
        this.sql.exec(
          `UPDATE ${found.table} SET previous_hash = current_hash, previous_sealed = ?, current_hash = ?, rotated_at = ?,
             rotations = ?, rotations_reset_at = ? WHERE family_hash = ?`,
          sealedNext,
          nextHash,
          now,
          rotations + 1,
          windowOpen ? f.rotations_reset_at : now + HOUR,
          familyHash,
        );
        this.sql.exec(
          "INSERT INTO spent_tokens (token_hash, family_hash, expires_at) VALUES (?, ?, ?)",
          presentedHash,
          familyHash,
          f.expires_at,
        );
        return { status: "rotated", grant, created_at: f.created_at };
      }
      if (presentedHash === f.previous_hash && f.previous_sealed && now - f.rotated_at <= graceMs)
        return { status: "retry", sealed: f.previous_sealed, grant };
      // The previous token is spent too (and is the only one a family rotated before spent_tokens holds).
      const spent =
        presentedHash === f.previous_hash ||
        this.sql
          .exec("SELECT 1 FROM spent_tokens WHERE token_hash = ? AND family_hash = ?", presentedHash, familyHash)
          .toArray().length > 0;
      if (!spent) return { status: "invalid" };
      // A spent token came back: the family has leaked (RFC 9700 §4.14.2). Revoke all of it.
      this.sql.exec(`UPDATE ${found.table} SET revoked = 1, previous_sealed = NULL WHERE family_hash = ?`, familyHash);
      return { status: "reuse_detected", grant };
    });
  }

  /** Revokes a family; true if it existed and was live. */
  revokeFamily(familyHash: string): boolean {
    return this.buckets
      .tables("families")
      .some(
        (t) =>
          this.sql.exec(
            `UPDATE ${t} SET revoked = 1, previous_sealed = NULL WHERE family_hash = ? AND revoked = 0`,
            familyHash,
          ).rowsWritten > 0,
      );
  }

  /** The grant of a live family whose current token is `tokenHash` (for introspection and revocation). */
  familyOf(familyHash: string, tokenHash: string, now: number): (FamilyGrant & { expires_at: number }) | null {
    const row = this.#family<{ grant_json: string; expires_at: number; current_hash: string; revoked: number }>(
      familyHash,
      now,
      "grant_json, expires_at, current_hash, revoked",
    );
    if (!row || row.row.revoked || row.row.current_hash !== tokenHash) return null;
    return { ...(JSON.parse(row.row.grant_json) as FamilyGrant), expires_at: row.row.expires_at };
  }
}
countVerbCalls(RefreshTokenRotator);
