import { type AuditRow, writeAuditGroups } from "./contract/audit-trail";
import { eventsFrom, isStored } from "./contract/carried-events";
import type { AuditEvent } from "./contract/verbs";

/**
 * Issue 44: the audit events of a login carried by the records the login writes anyway, not by
 * outbox rows. The code's row carries its `code_sent`; the session's row that and its `sign_in`; the
 * refresh family's row all three and its `token_issued` (each step hands the events on sealed, with
 * the state it hands on already). A record's events are two columns of its row: `audit` (the events,
 * JSON) and `audit_due` (when this shard writes them to D1, ms). So an event costs no billed row of
 * its own, and a flush no row per event: nothing is deleted, the row goes with its expiry bucket.
 *
 * The last record of a login is due first (the family 5 s after it is made), the earlier ones later
 * (a session 20 s after it is made, a code at its expiry), so a login's events
 * reach D1 once, as one row (contract/audit-trail.ts writeAuditGroups), and an earlier record's flush
 * finds them there and writes nothing. A login that stops half-way is written by the last record it
 * made, when that one is due.
 *
 * Which rows wait is kept in memory. After a restart (a crash, an eviction, a deploy) the first alarm
 * finds them again by reading the carrier tables for rows due after the watermark: `audit_mark`, the
 * time up to which every carried event is in D1. It is written at most every MARK_EVERY_MS (1 billed
 * row), so a restart sends up to that much again, which D1 finds there already and does not write.
 */

/** The watermark is written when it has moved this much (a restart re-reads at most this much of the trail). */
const MARK_EVERY_MS = 600_000;

export interface Carrier {
  /** The table's base name (its expiry buckets, `<base>__e<end>`, are carriers too). */
  base: string;
  /** The columns of its key. */
  key: string[];
}

interface Waiting {
  table: string;
  key: SqlStorageValue[];
  due: number;
}

/** The columns a carrier table adds to its layout. */
export const CARRIED_COLUMNS = "audit TEXT, audit_due INTEGER";

/** A carrier row's `audit`: one login's events, or several logins' by key (an address's codes). */
export function carriedGroups(audit: string): AuditEvent[][] {
  const parsed = JSON.parse(audit) as unknown;
  if (Array.isArray(parsed) || isStored(parsed)) return [eventsFrom(parsed)];
  return Object.values(parsed as Record<string, unknown>).map(eventsFrom);
}

export class CarriedAudit {
  readonly #waiting = new Map<string, Waiting>();
  #recovered = false;
  #mark: number | undefined;
  /** Events written by this object since it started (new to D1 or not). */
  flushed = 0;

  constructor(
    private readonly sql: SqlStorage,
    private readonly carriers: Carrier[],
    /** Every table of a base: its buckets and the base itself. */
    private readonly tablesOf: (base: string) => string[],
  ) {}

  static schema(): string {
    return "CREATE TABLE IF NOT EXISTS audit_mark (k INTEGER PRIMARY KEY, flushed_to INTEGER NOT NULL)";
  }

  /** A row whose `audit` and `audit_due` the caller has just written, in its transaction. */
  note(table: string, key: SqlStorageValue[], due: number): void {
    this.#waiting.set(`${table}\u0000${JSON.stringify(key)}`, { table, key, due });
  }

  /** Forgets a row's events (the caller cleared or moved them in its transaction). */
  forget(table: string, key: SqlStorageValue[]): void {
    this.#waiting.delete(`${table}\u0000${JSON.stringify(key)}`);
  }

  /** Rows waiting (in memory: a restarted object counts them again at its first alarm). */
  count(): number {
    return this.#waiting.size;
  }

  /** When the next row is due, if any waits. */
  nextDue(): number | null {
    let next: number | null = null;
    for (const w of this.#waiting.values()) next = Math.min(next ?? Number.POSITIVE_INFINITY, w.due);
    return next;
  }

  /** Every carried event due up to this time is in D1 (the watermark, as stored). */
  flushedTo(): number {
    return this.#readMark();
  }

  #readMark(): number {
    if (this.#mark === undefined)
      this.#mark =
        this.sql.exec<{ t: number }>("SELECT flushed_to AS t FROM audit_mark WHERE k = 0").toArray()[0]?.t ?? 0;
    return this.#mark;
  }

  /** After a restart: the rows due after the watermark, read from every carrier table (no index: a scan). */
  #recover(): void {
    this.#recovered = true;
    const mark = this.#readMark();
    for (const c of this.carriers)
      for (const table of this.tablesOf(c.base)) {
        const exists = this.sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", table);
        if (!exists.toArray().length) continue;
        for (const row of this.sql
          .exec<Record<string, SqlStorageValue>>(
            `SELECT ${c.key.join(", ")}, audit_due FROM ${table} WHERE audit_due > ?`,
            mark,
          )
          .toArray())
          this.note(
            table,
            c.key.map((k) => row[k] as SqlStorageValue),
            row.audit_due as number,
          );
      }
  }

  #keyOf(table: string): string[] {
    const c = this.carriers.find((c) => table === c.base || table.startsWith(`${c.base}__e`));
    if (!c) throw new Error(`${table} carries no audit events`);
    return c.key;
  }

  /**
   * Writes the rows that are due to D1, and returns their events (for the webhook queues). An alarm
   * that finds none due runs early (a test's drain, a retry): it writes every waiting row. Throws when
   * D1 fails; the rows keep waiting.
   */
  async flush(db: D1Database, now: number): Promise<AuditEvent[]> {
    if (!this.#recovered) this.#recover();
    if (this.#waiting.size === 0) return [];
    let due = [...this.#waiting].filter(([, w]) => w.due <= now);
    if (due.length === 0) due = [...this.#waiting];
    const groups: AuditRow[][] = [];
    for (const [, w] of due) {
      const where = this.#keyOf(w.table)
        .map((k) => `${k} = ?`)
        .join(" AND ");
      const row = this.sql
        .exec<{ audit: string | null }>(`SELECT audit FROM ${w.table} WHERE ${where}`, ...w.key)
        .toArray()[0];
      if (!row?.audit) continue;
      for (const group of carriedGroups(row.audit))
        groups.push(
          group.map((e) => ({ ...e, detail: e.detail ? JSON.stringify(e.detail) : null, tenant: e.tenant ?? null })),
        );
    }
    if (groups.length) await writeAuditGroups(db, groups);
    for (const [k, w] of due) if (this.#waiting.get(k) === w) this.#waiting.delete(k);
    this.flushed += groups.reduce((n, g) => n + g.length, 0);
    // Every row due up to here is in D1: the watermark may move to just before the earliest still waiting.
    const next = this.nextDue();
    const mark = next === null ? now : Math.min(now, next - 1);
    if (mark - this.#readMark() >= MARK_EVERY_MS) {
      this.sql.exec("INSERT OR REPLACE INTO audit_mark (k, flushed_to) VALUES (0, ?)", mark);
      this.#mark = mark;
    }
    return groups.flat().map(({ tenant, detail, ...e }) => ({
      ...e,
      kind: e.kind as AuditEvent["kind"],
      detail: typeof detail === "string" ? (JSON.parse(detail) as Record<string, unknown>) : null,
      ...(tenant ? { tenant } : {}),
    }));
  }
}
