import type {
  Attributes,
  ChangedClaims,
  ClaimsSnapshot,
  EntityPage,
  EntityRow,
  EntityWrite,
  EntityWriteResult,
  GranteeRow,
  GrantRow,
  GrantsChanged,
  GrantWrite,
  SnapshotGrant,
} from "./contract/verbs";
import { countVerbCalls, ShardStore } from "./shard-store";

/**
 * Entities and grants (issue 24), one shard of a hash-sharded store planned like the others: an
 * entity lives in the shard its id names (a new one is placed by its random part, or by its
 * `external_id` so an upsert finds it), forever. A grant lives twice: on its subject's shard (a user's
 * shard is chosen at its first grant and kept in D1 `users.entity_shard`; an entity's is its own),
 * where a subject's grants are listed and compiled into the claims snapshot a login carries, and as a
 * `grantees` row on its target's shard, so an entity's change or deletion reaches every holder.
 *
 * Nothing is read at start-up and nothing expires: entities and grants live until deleted. The
 * shard's size is reported by `stats()` (storage_bytes); a write that would take the database past
 * ENTITY_SHARD_HARD_CAP_BYTES is refused, and the shard controller appends a generation long before
 * (docs/storage.md).
 */

/** Claims snapshot cap: grants past it are left out (`over`), organizations first. */
export const SNAPSHOT_MAX_BYTES = 16_384;
/**
 * A shard refuses new entities and grants past this size (Cloudflare stops a Durable Object's SQLite
 * at 10 GB). The controller splits at `entity_shard_split_bytes` (4 GiB by default), far below.
 */
export const ENTITY_SHARD_HARD_CAP_BYTES = 9 * 1024 ** 3;
/** Rows one scan page may read on a shard (a search by an attribute that is not a key). */
const SCAN_BUDGET = 20_000;

/** An entity row as stored (attributes as JSON text). */
export interface EntitySqlRow extends Record<string, SqlStorageValue> {
  id: string;
  tenant: string;
  type: string;
  name: string;
  external_id: string | null;
  attributes: string;
  created_at: number;
  updated_at: number;
}

const entityOf = (r: EntitySqlRow): EntityRow => ({ ...r, attributes: JSON.parse(r.attributes) });

export class StorageFull extends Error {
  constructor() {
    // Worded as SQLite's own (errors.ts platformErrorKind): a 503 with Retry-After, never a 500.
    super("SQLITE_FULL: this entity shard is at its size cap; new entities go to the next generation");
  }
}

export class EntityStore extends ShardStore {
  protected schema(): string[] {
    return [
      `CREATE TABLE IF NOT EXISTS entities (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        type TEXT NOT NULL,
        name TEXT NOT NULL,
        external_id TEXT,
        attributes TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL) WITHOUT ROWID`,
      "CREATE INDEX IF NOT EXISTS entities_by_type ON entities(tenant, type, id)",
      "CREATE UNIQUE INDEX IF NOT EXISTS entities_by_external ON entities(tenant, external_id) WHERE external_id IS NOT NULL",
      // On the subject's shard: what the subject was granted, with a copy of the target for its claims.
      `CREATE TABLE IF NOT EXISTS grants (
        subject TEXT NOT NULL,
        target TEXT NOT NULL,
        tenant TEXT NOT NULL,
        target_type TEXT NOT NULL,
        target_name TEXT NOT NULL,
        target_attributes TEXT NOT NULL,
        roles TEXT NOT NULL,
        permissions TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (subject, target)) WITHOUT ROWID`,
      // On the subject's shard: the version of its compiled claims, and where they are pushed.
      `CREATE TABLE IF NOT EXISTS subjects (
        subject TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        kind TEXT NOT NULL,
        email_key TEXT,
        version INTEGER NOT NULL) WITHOUT ROWID`,
      // On the target's shard: who holds a grant to it.
      `CREATE TABLE IF NOT EXISTS grantees (
        target TEXT NOT NULL,
        subject TEXT NOT NULL,
        subject_shard TEXT NOT NULL,
        roles TEXT NOT NULL,
        permissions TEXT NOT NULL,
        PRIMARY KEY (target, subject)) WITHOUT ROWID`,
    ];
  }

  protected expiringTables(): string[] {
    return [];
  }

  #roomLeft(): void {
    if (this.ctx.storage.sql.databaseSize > ENTITY_SHARD_HARD_CAP_BYTES) throw new StorageFull();
  }

  #entity(tenant: string, id: string): EntitySqlRow | undefined {
    return this.sql.exec<EntitySqlRow>("SELECT * FROM entities WHERE id = ? AND tenant = ?", id, tenant).toArray()[0];
  }

  #granteeCount(target: string): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM grantees WHERE target = ?", target).one().n;
  }

  /**
   * Creates or updates entities, in one transaction. An item with an `external_id` is matched by it
   * (an import's rerun changes nothing: an unchanged entity is not written); one without, by `id`.
   */
  writeEntities(tenant: string, items: EntityWrite[], now: number): EntityWriteResult[] {
    this.#roomLeft();
    return this.ctx.storage.transactionSync(() =>
      items.map((item): EntityWriteResult => {
        const existing =
          item.external_id != null ? this.#byExternalId(tenant, item.external_id) : this.#entity(tenant, item.id);
        const attributes = JSON.stringify(item.attributes);
        if (!existing) {
          if (item.mustExist) return { status: "not_found" };
          const row: EntitySqlRow = {
            id: item.id,
            tenant,
            type: item.type,
            name: item.name,
            external_id: item.external_id ?? null,
            attributes,
            created_at: now,
            updated_at: now,
          };
          this.sql.exec(
            `INSERT INTO entities (id, tenant, type, name, external_id, attributes, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
            row.id,
            row.tenant,
            row.type,
            row.name,
            row.external_id,
            row.attributes,
            now,
            now,
          );
          return { status: "created", entity: entityOf(row), grantees: 0 };
        }
        if (existing.type !== item.type) return { status: "type_conflict" };
        if (existing.name === item.name && existing.attributes === attributes)
          return { status: "unchanged", entity: entityOf(existing), grantees: 0 };
        this.sql.exec(
          "UPDATE entities SET name = ?, attributes = ?, updated_at = ? WHERE id = ?",
          item.name,
          attributes,
          now,
          existing.id,
        );
        return {
          status: "updated",
          entity: entityOf({ ...existing, name: item.name, attributes, updated_at: now }),
          grantees: this.#granteeCount(existing.id),
        };
      }),
    );
  }

  getEntity(tenant: string, id: string): EntityRow | null {
    const row = this.#entity(tenant, id);
    return row ? entityOf(row) : null;
  }

  /**
   * The entities of these ids in this shard, by id (a batch of grants reads its targets first). One
   * keyed lookup each: a join of the list against the table makes SQLite scan the tenant's rows for
   * every batch (it did, with 625,000 entities a shard).
   */
  entitiesByIds(tenant: string, ids: string[]): Record<string, EntityRow> {
    const out: Record<string, EntityRow> = {};
    for (const id of ids) {
      const row = this.#entity(tenant, id);
      if (row) out[id] = entityOf(row);
    }
    return out;
  }

  /** The entities these external ids name in this shard (one keyed lookup each, as above). */
  findByExternalIds(tenant: string, externalIds: string[]): Record<string, EntityRow> {
    const out: Record<string, EntityRow> = {};
    for (const ext of externalIds) {
      const row = this.#byExternalId(tenant, ext);
      if (row) out[ext] = entityOf(row);
    }
    return out;
  }

  #byExternalId(tenant: string, externalId: string): EntitySqlRow | undefined {
    return this.sql
      .exec<EntitySqlRow>("SELECT * FROM entities WHERE tenant = ? AND external_id = ?", tenant, externalId)
      .toArray()[0];
  }

  /**
   * A page of this shard's entities of a type, in id order after `after`. With `attribute`, only
   * those whose attribute equals the value: a scan of the type's rows, at most SCAN_BUDGET of them a
   * page, so `next` may be set on a page with few or no matches.
   */
  listEntities(o: {
    tenant: string;
    type?: string | undefined;
    after?: string | null | undefined;
    limit: number;
    attribute?: { name: string; value: string | number | boolean } | undefined;
  }): EntityPage {
    const after = o.after ?? "";
    if (!o.attribute) {
      const rows = o.type
        ? this.sql
            .exec<EntitySqlRow>(
              "SELECT * FROM entities WHERE tenant = ? AND type = ? AND id > ? ORDER BY id LIMIT ?",
              o.tenant,
              o.type,
              after,
              o.limit,
            )
            .toArray()
        : this.sql
            .exec<EntitySqlRow>(
              "SELECT * FROM entities WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?",
              o.tenant,
              after,
              o.limit,
            )
            .toArray();
      return { entities: rows.map(entityOf), next: rows.length === o.limit ? (rows.at(-1)?.id ?? null) : null };
    }
    // A scan bounded by rows read: the window of at most SCAN_BUDGET ids, then the matches in it.
    const path = `$."${o.attribute.name.replace(/"/g, "")}"`;
    const typeClause = o.type ? "AND type = ?" : "";
    const typeArg = o.type ? [o.type] : [];
    const window = this.sql
      .exec<{ last: string | null; n: number }>(
        `SELECT MAX(id) AS last, COUNT(*) AS n FROM (SELECT id FROM entities WHERE tenant = ? ${typeClause} AND id > ? ORDER BY id LIMIT ?)`,
        o.tenant,
        ...typeArg,
        after,
        SCAN_BUDGET,
      )
      .one();
    if (!window.last) return { entities: [], next: null };
    // json_extract gives 1 for true and 0 for false, so the JSON type is compared too: a boolean matches
    // booleans only, a number numbers only, a string strings only.
    const value = o.attribute.value;
    const jsonTypes =
      typeof value === "boolean" ? [String(value)] : typeof value === "number" ? ["integer", "real"] : ["text"];
    const rows = this.sql
      .exec<EntitySqlRow>(
        `SELECT * FROM entities WHERE tenant = ? ${typeClause} AND id > ? AND id <= ? AND json_extract(attributes, ?) = ?
         AND json_type(attributes, ?) IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?`,
        o.tenant,
        ...typeArg,
        after,
        window.last,
        path,
        typeof value === "boolean" ? Number(value) : value,
        path,
        JSON.stringify(jsonTypes),
        o.limit,
      )
      .toArray();
    if (rows.length === o.limit) return { entities: rows.map(entityOf), next: rows.at(-1)?.id ?? null };
    return { entities: rows.map(entityOf), next: window.n === SCAN_BUDGET ? window.last : null };
  }

  /**
   * Deletes an entity and the grants it holds as a subject (here, on its own shard). Returns their
   * targets, whose `grantees` rows the Worker releases. Who holds grants to it stays listed in
   * `grantees` here until the Worker has removed each of those grants on its subject's shard (a page
   * at a time, through `granteesOf`), so a delete that stops part way can be finished.
   */
  deleteEntity(tenant: string, id: string): { deleted: boolean; targets: string[] } {
    return this.ctx.storage.transactionSync(() => {
      const row = this.#entity(tenant, id);
      if (!row) return { deleted: false, targets: [] };
      const targets = this.sql
        .exec<{ target: string }>("SELECT target FROM grants WHERE subject = ?", id)
        .toArray()
        .map((r) => r.target);
      this.sql.exec("DELETE FROM grants WHERE subject = ?", id);
      this.sql.exec("DELETE FROM subjects WHERE subject = ?", id);
      this.sql.exec("DELETE FROM entities WHERE id = ?", id);
      return { deleted: true, targets };
    });
  }

  /**
   * The target side of grants (an API call's one, an import batch's many for this shard): checks each
   * target entity exists in this tenant and records who holds it. Returns the targets found, by id, as
   * the subjects' copies need them; a grant to a target not found must not be written.
   */
  holdGrants(
    tenant: string,
    holds: { target: string; subject: string; subject_shard: string; roles: string[]; permissions: string[] }[],
  ): Record<string, EntityRow> {
    this.#roomLeft();
    const found: Record<string, EntityRow> = {};
    this.ctx.storage.transactionSync(() => {
      for (const h of holds) {
        if (!found[h.target]) {
          const row = this.#entity(tenant, h.target);
          if (!row) continue;
          found[h.target] = entityOf(row);
        }
        this.sql.exec(
          `INSERT INTO grantees (target, subject, subject_shard, roles, permissions) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT(target, subject) DO UPDATE SET subject_shard = excluded.subject_shard,
             roles = excluded.roles, permissions = excluded.permissions
           WHERE roles IS NOT excluded.roles OR permissions IS NOT excluded.permissions OR subject_shard IS NOT excluded.subject_shard`,
          h.target,
          h.subject,
          h.subject_shard,
          JSON.stringify(h.roles),
          JSON.stringify(h.permissions),
        );
      }
    });
    return found;
  }

  /** Forgets that these subjects hold grants to `target` (a grant removed, or its subject deleted). */
  releaseGrant(target: string, subjects: string[]): void {
    // One keyed delete each: an organization may have a million grantees, and `IN (json_each)` can
    // make SQLite walk all of them.
    this.ctx.storage.transactionSync(() => {
      for (const subject of subjects)
        this.sql.exec("DELETE FROM grantees WHERE target = ? AND subject = ?", target, subject);
    });
  }

  /** A page of who holds grants to `target`, in subject order after `after`. */
  granteesOf(target: string, after: string | null, limit: number): { grantees: GranteeRow[]; next: string | null } {
    const rows = this.sql
      .exec<{ subject: string; subject_shard: string; roles: string; permissions: string }>(
        "SELECT subject, subject_shard, roles, permissions FROM grantees WHERE target = ? AND subject > ? ORDER BY subject LIMIT ?",
        target,
        after ?? "",
        limit,
      )
      .toArray();
    return {
      grantees: rows.map((r) => ({
        subject: r.subject,
        subject_shard: r.subject_shard,
        roles: JSON.parse(r.roles),
        permissions: JSON.parse(r.permissions),
      })),
      next: rows.length === limit ? (rows.at(-1)?.subject ?? null) : null,
    };
  }

  /**
   * The subject side: creates or updates grants, in one transaction. A subject whose grants changed
   * gets its next version; a user subject's snapshot is returned for the Worker to push.
   */
  writeGrants(tenant: string, items: GrantWrite[], now: number): GrantsChanged & { created: boolean[] } {
    this.#roomLeft();
    return this.ctx.storage.transactionSync(() => {
      const touched = new Map<string, GrantWrite>();
      // Per item: whether it made a new grant (not one that existed, changed or not).
      const created: boolean[] = [];
      const changed = items.map((g) => {
        const existed =
          this.sql.exec("SELECT 1 FROM grants WHERE subject = ? AND target = ?", g.subject, g.target).toArray().length >
          0;
        const roles = JSON.stringify(g.roles);
        const permissions = JSON.stringify(g.permissions);
        const attributes = JSON.stringify(g.target_attributes);
        const cursor = this.sql.exec(
          `INSERT INTO grants (subject, target, tenant, target_type, target_name, target_attributes, roles, permissions, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT(subject, target) DO UPDATE SET target_type = excluded.target_type, target_name = excluded.target_name,
             target_attributes = excluded.target_attributes, roles = excluded.roles, permissions = excluded.permissions,
             updated_at = excluded.updated_at
           WHERE target_name IS NOT excluded.target_name OR target_attributes IS NOT excluded.target_attributes
             OR roles IS NOT excluded.roles OR permissions IS NOT excluded.permissions OR target_type IS NOT excluded.target_type`,
          g.subject,
          g.target,
          tenant,
          g.target_type,
          g.target_name,
          attributes,
          roles,
          permissions,
          now,
          now,
        );
        cursor.toArray();
        const wrote = cursor.rowsWritten > 0;
        created.push(wrote && !existed);
        if (wrote || !this.#hasSubject(g.subject)) touched.set(g.subject, g);
        return wrote;
      });
      const snapshots: ChangedClaims[] = [];
      for (const [subject, g] of touched) {
        const snapshot = this.#bump(tenant, subject, g.subject_kind, g.email_key ?? null);
        if (snapshot) snapshots.push(snapshot);
      }
      return { changed, created, snapshots };
    });
  }

  /** Removes grants from their subjects (this shard), in one transaction; changed users' snapshots come back. */
  removeGrants(tenant: string, items: { subject: string; target: string }[]): GrantsChanged {
    return this.ctx.storage.transactionSync(() => {
      const touched = new Set<string>();
      const changed = items.map((g) => {
        const cursor = this.sql.exec(
          "DELETE FROM grants WHERE subject = ? AND target = ? AND tenant = ?",
          g.subject,
          g.target,
          tenant,
        );
        cursor.toArray();
        if (cursor.rowsWritten > 0) touched.add(g.subject);
        return cursor.rowsWritten > 0;
      });
      return { changed, snapshots: this.#bumpAll(tenant, touched) };
    });
  }

  /** Copies a target's new name and attributes into its grantees' grants here; changed snapshots come back. */
  refreshGrantCopies(o: {
    tenant: string;
    target: string;
    name: string;
    attributes: Attributes;
    subjects: string[];
    now: number;
  }): ChangedClaims[] {
    return this.ctx.storage.transactionSync(() => {
      const touched = new Set<string>();
      for (const subject of o.subjects) {
        const cursor = this.sql.exec(
          `UPDATE grants SET target_name = ?, target_attributes = ?, updated_at = ?
           WHERE subject = ? AND target = ? AND (target_name IS NOT ? OR target_attributes IS NOT ?)`,
          o.name,
          JSON.stringify(o.attributes),
          o.now,
          subject,
          o.target,
          o.name,
          JSON.stringify(o.attributes),
        );
        cursor.toArray();
        if (cursor.rowsWritten > 0) touched.add(subject);
      }
      return this.#bumpAll(o.tenant, touched);
    });
  }

  /**
   * Deletes every grant a subject holds here (its user was deleted). Returns their targets, whose
   * `grantees` rows the Worker then releases.
   */
  dropSubject(tenant: string, subject: string): string[] {
    return this.ctx.storage.transactionSync(() => {
      const targets = this.sql
        .exec<{ target: string }>("SELECT target FROM grants WHERE subject = ? AND tenant = ?", subject, tenant)
        .toArray()
        .map((r) => r.target);
      this.sql.exec("DELETE FROM grants WHERE subject = ? AND tenant = ?", subject, tenant);
      this.sql.exec("DELETE FROM subjects WHERE subject = ? AND tenant = ?", subject, tenant);
      return targets;
    });
  }

  /** A page of a subject's grants, in target order after `after`. */
  grantsOf(
    tenant: string,
    subject: string,
    after: string | null,
    limit: number,
    type: string | null = null,
  ): { grants: GrantRow[]; next: string | null } {
    const rows = this.sql
      .exec<{
        subject: string;
        target: string;
        target_type: string;
        target_name: string;
        roles: string;
        permissions: string;
        created_at: number;
        updated_at: number;
      }>(
        `SELECT subject, target, target_type, target_name, roles, permissions, created_at, updated_at
         FROM grants WHERE subject = ? AND tenant = ? AND target > ? AND (?5 IS NULL OR target_type = ?5)
         ORDER BY target LIMIT ?4`,
        subject,
        tenant,
        after ?? "",
        limit,
        type,
      )
      .toArray();
    return {
      grants: rows.map((r) => ({ ...r, roles: JSON.parse(r.roles), permissions: JSON.parse(r.permissions) })),
      next: rows.length === limit ? (rows.at(-1)?.target ?? null) : null,
    };
  }

  /** The subject's claims as a login's tokens see them now (a refresh, a session's next code, a picked organization). */
  claimsOf(tenant: string, subject: string): ClaimsSnapshot {
    const version =
      this.sql
        .exec<{ version: number }>("SELECT version FROM subjects WHERE subject = ? AND tenant = ?", subject, tenant)
        .toArray()[0]?.version ?? 0;
    return this.#compile(subject, version);
  }

  /**
   * Deletes a deleted tenant's rows, at most `limit` of each table a call; true once none is left.
   * Its entity ids all begin `ent_<tenant>~`, which is how its `grantees` rows are found.
   */
  purgeTenant(tenant: string, limit: number): boolean {
    const prefix = `ent_${tenant}~`;
    let left = false;
    this.ctx.storage.transactionSync(() => {
      for (const [table, key] of [
        ["entities", "id"],
        ["grants", "subject, target"],
        ["subjects", "subject"],
      ] as const) {
        const cursor = this.sql.exec(
          `DELETE FROM ${table} WHERE (${key}) IN (SELECT ${key} FROM ${table} WHERE tenant = ? LIMIT ?)`,
          tenant,
          limit,
        );
        cursor.toArray();
        if (cursor.rowsWritten >= limit) left = true;
      }
      const cursor = this.sql.exec(
        "DELETE FROM grantees WHERE (target, subject) IN (SELECT target, subject FROM grantees WHERE target >= ? AND target < ? LIMIT ?)",
        prefix,
        `${prefix}\u{10FFFF}`,
        limit,
      );
      cursor.toArray();
      if (cursor.rowsWritten >= limit) left = true;
    });
    return !left;
  }

  #hasSubject(subject: string): boolean {
    return this.sql.exec("SELECT 1 FROM subjects WHERE subject = ?", subject).toArray().length > 0;
  }

  #bumpAll(tenant: string, subjects: Set<string>): ChangedClaims[] {
    const out: ChangedClaims[] = [];
    for (const subject of subjects) {
      const snapshot = this.#bump(tenant, subject, null, null);
      if (snapshot) out.push(snapshot);
    }
    return out;
  }

  /** The subject's next version; its compiled claims when it is a user with an address to push them to. */
  #bump(
    tenant: string,
    subject: string,
    kind: "user" | "entity" | null,
    emailKey: string | null,
  ): ChangedClaims | null {
    const row = this.sql
      .exec<{ kind: string; email_key: string | null; version: number }>(
        `INSERT INTO subjects (subject, tenant, kind, email_key, version) VALUES (?, ?, ?, ?, 1)
         ON CONFLICT(subject) DO UPDATE SET version = version + 1, email_key = COALESCE(excluded.email_key, email_key)
         RETURNING kind, email_key, version`,
        subject,
        tenant,
        kind ?? "user",
        emailKey,
      )
      .one();
    if (row.kind !== "user" || !row.email_key) return null;
    return { subject, email_key: row.email_key, claims: this.#compile(subject, row.version) };
  }

  /** A subject's grants as claims: organizations first, then the newest; cut at SNAPSHOT_MAX_BYTES. */
  #compile(subject: string, version: number): ClaimsSnapshot {
    const rows = this.sql
      .exec<{
        target: string;
        target_type: string;
        target_name: string;
        target_attributes: string;
        roles: string;
        permissions: string;
      }>(
        `SELECT target, target_type, target_name, target_attributes, roles, permissions FROM grants
         WHERE subject = ? ORDER BY (target_type = 'organization') DESC, updated_at DESC LIMIT 500`,
        subject,
      )
      .toArray();
    const snapshot: ClaimsSnapshot = { v: version, grants: [] };
    let size = 32;
    for (const r of rows) {
      const grant: SnapshotGrant = {
        id: r.target,
        type: r.target_type,
        name: r.target_name,
        roles: JSON.parse(r.roles),
        permissions: JSON.parse(r.permissions),
        attributes: JSON.parse(r.target_attributes),
      };
      const bytes = JSON.stringify(grant).length + 1;
      if (size + bytes > SNAPSHOT_MAX_BYTES) {
        snapshot.over = true;
        break;
      }
      size += bytes;
      snapshot.grants.push(grant);
    }
    if (rows.length === 500 && !snapshot.over) snapshot.over = true;
    return snapshot;
  }
}
countVerbCalls(EntityStore);
