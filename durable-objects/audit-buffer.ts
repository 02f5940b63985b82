import { DurableObject } from "cloudflare:workers";
import type { AuditEvent } from "../workers/shared/audit";

/** A flush runs this long after the first buffered event... */
export const AUDIT_FLUSH_DELAY_MS = 5_000;
/** ...or at once when this many are waiting. */
export const AUDIT_FLUSH_SIZE = 100;
/** Events per D1 write (one statement: the batch travels as one JSON parameter). */
export const AUDIT_BATCH = 500;
/** `users.last_login_at` moves at most this often per user. */
export const LAST_LOGIN_EVERY_MS = 300_000;

interface AuditEnv {
  DB: D1Database;
}

const COLUMNS = ["id", "at", "kind", "user_id", "email_key", "client_id", "ip", "detail"] as const;

/**
 * AuditBuffer: write-behind for the audit trail (`audit:g<gen>:s<n>`). `append` stores events in this
 * object's SQLite storage, so a restart loses nothing, and arms the alarm; the alarm writes them to
 * D1 `audit_events` in one statement per batch and then deletes them. A burst of logins becomes a
 * few D1 writes per shard every few seconds. Event ids make a repeated flush (a crash between the D1
 * write and the delete) harmless. Sign-ins also move `users.last_login_at`, at most every 5 minutes.
 */
export class AuditBuffer extends DurableObject<AuditEnv> {
  private readonly sql: SqlStorage;
  private failures = 0;
  /**
   * The alarm and the number of buffered events as this instance last read or set them (undefined
   * until first read), so that append costs one storage write, not a getAlarm and a COUNT(*) as well.
   */
  private alarmAt: number | null | undefined;
  private pending: number | undefined;

  constructor(ctx: DurableObjectState, env: AuditEnv) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS events (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      id TEXT NOT NULL,
      at INTEGER NOT NULL,
      kind TEXT NOT NULL,
      user_id TEXT,
      email_key TEXT,
      client_id TEXT,
      ip TEXT,
      detail TEXT)`);
  }

  async append(events: AuditEvent[]): Promise<void> {
    this.ctx.storage.transactionSync(() => {
      for (const e of events)
        this.sql.exec(
          "INSERT INTO events (id, at, kind, user_id, email_key, client_id, ip, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
          e.id,
          e.at,
          e.kind,
          e.user_id,
          e.email_key,
          e.client_id,
          e.ip,
          e.detail ? JSON.stringify(e.detail) : null,
        );
    });
    this.pending = this.pending === undefined ? this.buffered() : this.pending + events.length;
    if (this.alarmAt === undefined) this.alarmAt = await this.ctx.storage.getAlarm();
    const now = Date.now();
    const at = this.pending >= AUDIT_FLUSH_SIZE ? now : now + AUDIT_FLUSH_DELAY_MS;
    if (this.alarmAt === null || this.alarmAt > at) await this.arm(at);
  }

  private async arm(at: number): Promise<void> {
    this.alarmAt = at;
    await this.ctx.storage.setAlarm(at);
  }

  /** Events waiting for the next flush. */
  buffered(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM events").one().n;
  }

  override async alarm(): Promise<void> {
    this.alarmAt = null;
    const rows = this.sql
      .exec<Record<(typeof COLUMNS)[number] | "seq", SqlStorageValue>>(
        `SELECT seq, ${COLUMNS.join(", ")} FROM events ORDER BY seq LIMIT ?`,
        AUDIT_BATCH,
      )
      .toArray();
    if (rows.length === 0) {
      this.pending = 0;
      return;
    }
    try {
      await this.flush(rows);
    } catch (err) {
      // Kept in storage; try again later, backing off while D1 fails (the rows wait, nothing is lost).
      this.failures++;
      console.error("audit: flush to D1 failed", err instanceof Error ? err.message : err);
      await this.arm(Date.now() + Math.min(300_000, AUDIT_FLUSH_DELAY_MS * 2 ** this.failures));
      return;
    }
    this.failures = 0;
    this.sql.exec("DELETE FROM events WHERE seq <= ?", rows.at(-1)?.seq as number);
    this.pending = this.buffered();
    if (this.pending > 0) await this.arm(Date.now());
  }

  private async flush(rows: Record<string, SqlStorageValue>[]): Promise<void> {
    const events = JSON.stringify(rows.map((r) => Object.fromEntries(COLUMNS.map((c) => [c, r[c]]))));
    const logins = new Map<string, number>();
    for (const r of rows)
      if (r.kind === "sign_in" && typeof r.user_id === "string")
        logins.set(r.user_id, Math.max(logins.get(r.user_id) ?? 0, r.at as number));
    const statements = [
      this.env.DB.prepare(
        `INSERT OR IGNORE INTO audit_events (${COLUMNS.join(", ")})
         SELECT ${COLUMNS.map((c) => `json_extract(value, '$.${c}')`).join(", ")} FROM json_each(?)`,
      ).bind(events),
    ];
    if (logins.size)
      statements.push(
        this.env.DB.prepare(
          `UPDATE users SET last_login_at = json_extract(j.value, '$.at')
           FROM json_each(?) AS j
           WHERE users.id = json_extract(j.value, '$.user')
             AND (users.last_login_at IS NULL OR users.last_login_at < json_extract(j.value, '$.at') - ${LAST_LOGIN_EVERY_MS})`,
        ).bind(JSON.stringify([...logins].map(([user, at]) => ({ user, at })))),
      );
    await this.env.DB.batch(statements);
  }
}
