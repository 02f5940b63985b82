import { type AuditRow, writeAuditGroups } from "./contract/audit-trail";
import type { AuditEvent } from "./contract/verbs";

/** A flush runs this long after the first buffered event... */
export const AUDIT_FLUSH_DELAY_MS = 5_000;
/** Events per D1 write (one statement: the batch travels as one JSON parameter). */
export const AUDIT_BATCH = 500;
/** While D1 refuses a flush, the next try waits this long, doubled per failure, at most five minutes. */
export const auditRetryDelay = (failures: number) => Math.min(300_000, AUDIT_FLUSH_DELAY_MS * 2 ** failures);

const COLUMNS = ["id", "at", "kind", "user_id", "email_key", "client_id", "ip", "detail", "tenant"] as const;

/**
 * A flush of at least this many events swaps the outbox's table for a new one and drops the old one
 * whole once it is in D1: making a table writes 2 billed rows and dropping one none, where deleting
 * the events writes one each (issue 28). A smaller flush deletes its events.
 */
export const OUTBOX_SWAP_AT = 3;

type OutboxRow = Record<(typeof COLUMNS)[number] | "seq", SqlStorageValue>;

/**
 * The transactional outbox of the audit trail, as tables in a Durable Object's own SQLite storage.
 * Two kinds of object keep one:
 * - every store shard, for the events of the step it serves (a sign-in is written in the same
 *   transaction as the session it creates, so the event exists exactly when the thing it records does,
 *   and costs no call of its own);
 * - the AuditBuffer shards, for the events no store call carries (failures, logouts, admin changes).
 * The owner's alarm hands the rows to D1's trail (durable-objects/contract/audit-trail.ts) in batches. Every D1
 * row is keyed by what an event or a batch always has the same way, so a repeated flush (a crash
 * between the D1 write and the delete, or an evicted object sending a swapped-out table again) is
 * harmless.
 *
 * New events go to the newest of the tables `<table>__g1`, `<table>__g2`... A flush of
 * `OUTBOX_SWAP_AT` events or more first makes the next one, so the table it flushes takes no more
 * events, and drops it whole once its last batch is in D1. `<table>` itself is where events waited
 * before (flushed first, row by row).
 */
export class AuditOutbox {
  /** The generations' tables, oldest first: the last takes new events. Read from sqlite_master at first use. */
  #tables: string[] | null = null;
  /**
   * While the oldest of several tables is flushed batch by batch: the last seq in D1. In memory: after
   * an eviction its batches are sent again, which event ids make harmless.
   */
  #flushedSeq = 0;

  constructor(
    private readonly sql: SqlStorage,
    private readonly table: string,
  ) {}

  schema(): string {
    return this.#create(this.table);
  }

  #create(name: string): string {
    return `CREATE TABLE IF NOT EXISTS ${name} (
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

  /** The generations' tables (none before the first event). */
  #list(): string[] {
    if (this.#tables) return this.#tables;
    const generations = this.sql
      .exec<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB ?",
        `${this.table}__g*`,
      )
      .toArray()
      .map((t) => Number(t.name.slice(this.table.length + 3)))
      .filter((n) => Number.isSafeInteger(n) && n > 0)
      .sort((a, b) => a - b);
    this.#tables = generations.map((n) => `${this.table}__g${n}`);
    return this.#tables;
  }

  /** Adds events; call it inside the transaction that makes them true. */
  add(events: AuditEvent[]): void {
    const tables = this.#list();
    if (tables.length === 0) {
      this.#make(`${this.table}__g1`);
      tables.push(`${this.table}__g1`);
    }
    const into = tables.at(-1) as string;
    for (const e of events)
      this.sql.exec(
        `INSERT INTO ${into} (id, at, kind, user_id, email_key, client_id, ip, detail, tenant) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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

  /** Removes a waiting event by id (from wherever it waits). */
  remove(id: string): void {
    for (const t of [this.table, ...this.#list()]) this.sql.exec(`DELETE FROM ${t} WHERE id = ?`, id);
  }

  /** Events written to D1 since this object started. */
  flushed = 0;
  /** Rows written making the generations' tables: shared by every event a table takes. */
  madeRows = 0;

  #make(name: string): void {
    this.madeRows += this.sql.exec(this.#create(name)).rowsWritten;
  }

  #countIn(table: string, afterSeq = 0): number {
    return this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table} WHERE seq > ?`, afterSeq).one().n;
  }

  /** Events waiting for the next flush. */
  count(): number {
    const [oldest, ...rest] = this.#list();
    return (
      this.#countIn(this.table) +
      (oldest ? this.#countIn(oldest, rest.length ? this.#flushedSeq : 0) : 0) +
      rest.reduce((n, t) => n + this.#countIn(t), 0)
    );
  }

  /** Events a flush will delete one by one (a billed row each): those of a table too small to swap. */
  pendingDeletes(): number {
    const tables = this.#list();
    const legacy = this.#countIn(this.table);
    if (tables.length !== 1) return legacy;
    const n = this.#countIn(tables[0] as string);
    return legacy + (n >= OUTBOX_SWAP_AT ? 0 : n);
  }

  #batch(table: string, afterSeq: number): OutboxRow[] {
    return this.sql
      .exec<OutboxRow>(
        `SELECT seq, ${COLUMNS.join(", ")} FROM ${table} WHERE seq > ? ORDER BY seq LIMIT ?`,
        afterSeq,
        AUDIT_BATCH,
      )
      .toArray();
  }

  async #send(db: D1Database, rows: OutboxRow[], handOff?: (events: AuditEvent[]) => Promise<void>): Promise<void> {
    await writeToD1(db, rows);
    // Before the rows go: what is handed over (the webhook queues) is handed over at least once.
    if (handOff) await handOff(rows.map(eventOf));
    this.flushed += rows.length;
  }

  /**
   * Writes the oldest batch to D1, then deletes its rows or, once a swapped-out table is all in D1,
   * drops the table. Returns how many events still wait. Throws when D1 fails; the rows stay and the
   * caller tries again later.
   */
  async flush(db: D1Database, handOff?: (events: AuditEvent[]) => Promise<void>): Promise<number> {
    const legacy = this.#batch(this.table, 0);
    if (legacy.length) {
      await this.#send(db, legacy, handOff);
      this.sql.exec(`DELETE FROM ${this.table} WHERE seq <= ?`, legacy.at(-1)?.seq as number);
      return this.count();
    }
    const tables = this.#list();
    const newest = tables.at(-1);
    if (!newest) return 0;
    if (tables.length === 1 && this.#countIn(newest) >= OUTBOX_SWAP_AT) {
      const next = `${this.table}__g${Number(newest.slice(this.table.length + 3)) + 1}`;
      this.#make(next);
      tables.push(next);
      this.#flushedSeq = 0;
    }
    const oldest = tables[0] as string;
    const swapped = tables.length > 1;
    const rows = this.#batch(oldest, swapped ? this.#flushedSeq : 0);
    if (rows.length) await this.#send(db, rows, handOff);
    const last = rows.at(-1)?.seq as number | undefined;
    if (!swapped) {
      if (last !== undefined) this.sql.exec(`DELETE FROM ${oldest} WHERE seq <= ?`, last);
    } else if (rows.length < AUDIT_BATCH) {
      // Every event of the swapped-out table is in D1, and no new one goes there: dropped whole.
      this.sql.exec(`DROP TABLE IF EXISTS ${oldest}`);
      tables.shift();
      this.#flushedSeq = 0;
    } else this.#flushedSeq = last as number;
    return rows.length === 0 && !swapped ? 0 : this.count();
  }
}

/** The events, each alone, into their months' tables (durable-objects/contract/audit-trail.ts). */
async function writeToD1(db: D1Database, rows: OutboxRow[]): Promise<void> {
  await writeAuditGroups(
    db,
    rows.map((r) => [r as unknown as AuditRow]),
  );
}

/** A stored row as the event it was. */
export function eventOf(r: Record<string, SqlStorageValue>): AuditEvent {
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
