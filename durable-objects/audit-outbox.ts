import type { AuditEvent } from "./contract";

/** A flush runs this long after the first buffered event... */
export const AUDIT_FLUSH_DELAY_MS = 5_000;
/** Events per D1 write (one statement: the batch travels as one JSON parameter). */
export const AUDIT_BATCH = 500;
/** `users.last_login_at` moves at most this often per user. */
export const LAST_LOGIN_EVERY_MS = 300_000;
/** While D1 refuses a flush, the next try waits this long, doubled per failure, at most five minutes. */
export const auditRetryDelay = (failures: number) => Math.min(300_000, AUDIT_FLUSH_DELAY_MS * 2 ** failures);

const COLUMNS = ["id", "at", "kind", "user_id", "email_key", "client_id", "ip", "detail", "tenant"] as const;

/**
 * The transactional outbox of the audit trail, as a table in a Durable Object's own SQLite storage.
 * Two kinds of object keep one:
 * - every store shard, for the events of the step it serves (a sign-in is written in the same
 *   transaction as the session it creates, so the event exists exactly when the thing it records does,
 *   and costs no call of its own);
 * - the AuditBuffer shards, for the events no store call carries (failures, logouts, admin changes).
 * The owner's alarm hands the rows to D1 `audit_events` in batches and deletes them. Event ids make a
 * repeated flush (a crash between the D1 write and the delete) harmless.
 */
export class AuditOutbox {
  constructor(
    private readonly sql: SqlStorage,
    private readonly table: string,
  ) {}

  schema(): string {
    return `CREATE TABLE IF NOT EXISTS ${this.table} (
      seq INTEGER PRIMARY KEY,
      id TEXT NOT NULL,
      at INTEGER NOT NULL,
      kind TEXT NOT NULL,
      user_id TEXT,
      email_key TEXT,
      client_id TEXT,
      ip TEXT,
      detail TEXT,
      tenant TEXT)`;
  }

  /** Columns added since the table was first created (shard-store.ts runs each once). */
  upgrades(): string[] {
    return [`ALTER TABLE ${this.table} ADD COLUMN tenant TEXT`];
  }

  /** Adds events; call it inside the transaction that makes them true. */
  add(events: AuditEvent[]): void {
    for (const e of events)
      this.sql.exec(
        `INSERT INTO ${this.table} (id, at, kind, user_id, email_key, client_id, ip, detail, tenant) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        e.id,
        e.at,
        e.kind,
        e.user_id,
        e.email_key,
        e.client_id,
        e.ip,
        e.detail ? JSON.stringify(e.detail) : null,
        e.tenant ?? null,
      );
  }

  /** Events written to D1 since this object started: each is a D1 row that retention deletes later. */
  flushed = 0;

  /** Events waiting for the next flush. */
  count(): number {
    return this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${this.table}`).one().n;
  }

  /**
   * Writes the oldest batch to D1 and deletes it here. Returns how many events still wait. Throws
   * when D1 fails; the rows stay and the caller tries again later.
   */
  async flush(db: D1Database, handOff?: (events: AuditEvent[]) => Promise<void>): Promise<number> {
    const rows = this.sql
      .exec<Record<(typeof COLUMNS)[number] | "seq", SqlStorageValue>>(
        `SELECT seq, ${COLUMNS.join(", ")} FROM ${this.table} ORDER BY seq LIMIT ?`,
        AUDIT_BATCH,
      )
      .toArray();
    if (rows.length === 0) return 0;
    await writeToD1(db, rows);
    // Before the rows go: what is handed over (the webhook queues) is handed over at least once.
    if (handOff) await handOff(rows.map(eventOf));
    this.sql.exec(`DELETE FROM ${this.table} WHERE seq <= ?`, rows.at(-1)?.seq as number);
    this.flushed += rows.length;
    return rows.length < AUDIT_BATCH ? 0 : this.count();
  }
}

/** One D1 batch: the events (INSERT OR IGNORE by id) and each signed-in user's `last_login_at`. */
async function writeToD1(db: D1Database, rows: Record<string, SqlStorageValue>[]): Promise<void> {
  const events = JSON.stringify(rows.map((r) => Object.fromEntries(COLUMNS.map((c) => [c, r[c]]))));
  const logins = new Map<string, number>();
  for (const r of rows)
    if (r.kind === "sign_in" && typeof r.user_id === "string")
      logins.set(r.user_id, Math.max(logins.get(r.user_id) ?? 0, r.at as number));
  const statements = [
    db
      .prepare(
        `INSERT OR IGNORE INTO audit_events (${COLUMNS.join(", ")})
         SELECT ${COLUMNS.map((c) => (c === "tenant" ? "COALESCE(json_extract(value, '$.tenant'), 'default')" : `json_extract(value, '$.${c}')`)).join(", ")} FROM json_each(?)`,
      )
      .bind(events),
  ];
  if (logins.size)
    statements.push(
      db
        .prepare(
          `UPDATE users SET last_login_at = json_extract(j.value, '$.at')
           FROM json_each(?) AS j
           WHERE users.id = json_extract(j.value, '$.user')
             AND (users.last_login_at IS NULL OR users.last_login_at < json_extract(j.value, '$.at') - ${LAST_LOGIN_EVERY_MS})`,
        )
        .bind(JSON.stringify([...logins].map(([user, at]) => ({ user, at })))),
    );
  await db.batch(statements);
}

/** A stored row as the event it was. */
function eventOf(r: Record<string, SqlStorageValue>): AuditEvent {
  return {
    id: r.id as string,
    at: r.at as number,
    kind: r.kind as AuditEvent["kind"],
    user_id: (r.user_id as string | null) ?? null,
    email_key: (r.email_key as string | null) ?? null,
    client_id: (r.client_id as string | null) ?? null,
    ip: (r.ip as string | null) ?? null,
    detail: typeof r.detail === "string" ? (JSON.parse(r.detail) as Record<string, unknown>) : null,
    ...(typeof r.tenant === "string" ? { tenant: r.tenant } : {}),
  };
}
