import { DurableObject } from "cloudflare:workers";
import { errorField, log } from "../workers/shared/log";
import { AUDIT_FLUSH_DELAY_MS, AuditOutbox, auditRetryDelay } from "./audit-outbox";
import type { AuditEvent } from "./contract";
import { RowsWritten, type ShardStats } from "./shard-store";

export { AUDIT_BATCH, AUDIT_FLUSH_DELAY_MS, LAST_LOGIN_EVERY_MS } from "./audit-outbox";
/** A flush runs at once when this many events are waiting. */
export const AUDIT_FLUSH_SIZE = 100;

interface AuditEnv {
  DB: D1Database;
}

/**
 * AuditBuffer: write-behind for the audit events that no store call carries (failed codes, logouts,
 * refresh reuse, mail outcomes, admin changes), sharded as `audit:g<gen>:s<n>`. `append` stores the
 * events in this object's outbox, so a restart loses nothing, and arms the alarm; the alarm writes
 * them to D1 in batches. The events of a successful login are written by the store shards instead,
 * in the transaction of the step itself (see audit-outbox.ts).
 */
export class AuditBuffer extends DurableObject<AuditEnv> {
  private readonly outbox: AuditOutbox;
  private failures = 0;
  /**
   * The alarm and the number of buffered events as this instance last read or set them (undefined
   * until first read), so that append costs one storage write, not a getAlarm and a COUNT(*) as well.
   */
  private alarmAt: number | null | undefined;
  private pending: number | undefined;
  private served = 0;
  private readonly startedAt = Date.now();
  private readonly rows = new RowsWritten();

  constructor(ctx: DurableObjectState, env: AuditEnv) {
    super(ctx, env);
    // The table keeps the name it had before the outbox was shared with the stores.
    const sql = this.rows.track(ctx.storage.sql);
    this.outbox = new AuditOutbox(sql, "events");
    sql.exec(this.outbox.schema());
  }

  /** Calls served and rows written since this instance started, as every store shard reports them. */
  stats(): ShardStats {
    return { served: this.served, rows_written: this.rows.total(), since: this.startedAt };
  }

  async append(events: AuditEvent[]): Promise<void> {
    this.served++;
    this.ctx.storage.transactionSync(() => this.outbox.add(events));
    this.pending = this.pending === undefined ? this.outbox.count() : this.pending + events.length;
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
    return this.outbox.count();
  }

  override async alarm(): Promise<void> {
    this.alarmAt = null;
    try {
      this.pending = await this.outbox.flush(this.env.DB);
    } catch (err) {
      // Kept in storage; try again later, backing off while D1 fails (the rows wait, nothing is lost).
      this.failures++;
      log("error", "audit: flush to D1 failed", { error: errorField(err) });
      await this.arm(Date.now() + auditRetryDelay(this.failures));
      return;
    }
    this.failures = 0;
    if (this.pending > 0) await this.arm(Date.now());
  }
}
