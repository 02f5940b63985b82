import type { AuditEvent } from "./contract/verbs";
import { countVerbCalls, ShardStore } from "./shard-store";

export { AUDIT_BATCH, AUDIT_FLUSH_DELAY_MS } from "./audit-outbox";
/** A flush runs at once when this many events are waiting. */
export const AUDIT_FLUSH_SIZE = 100;

/**
 * AuditBuffer: write-behind for the audit events that no store call carries (failed codes, logouts,
 * refresh reuse, mail outcomes, admin changes), sharded as `audit:g<gen>:s<n>`. A shard like every
 * store's, with nothing of its own but the outbox: `append` stores the events (so a restart loses
 * nothing) and arms the alarm, whose flush to D1 in batches, with backoff while D1 fails, is the
 * base class's. The events of a successful login are written by the store shards instead, in the
 * transaction of the step itself (see audit-outbox.ts).
 */
export class AuditBuffer extends ShardStore {
  /**
   * Events buffered as this instance last counted them (undefined until counted, and after each
   * flush), so an append costs one storage write, not a COUNT(*) as well.
   */
  private pending: number | undefined;

  protected schema(): string[] {
    return [];
  }

  protected expiringTables(): string[] {
    return [];
  }

  protected override outboxTable(): string {
    return "events";
  }

  async append(events: AuditEvent[]): Promise<void> {
    this.ctx.storage.transactionSync(() => this.recordAudit(events));
    this.pending = this.pending === undefined ? this.auditBacklog() : this.pending + events.length;
    await (this.pending >= AUDIT_FLUSH_SIZE ? this.alarmNow() : this.auditFlushSoon());
  }

  /** Events waiting for the next flush. */
  buffered(): number {
    return this.auditBacklog();
  }

  protected override async onAlarm(): Promise<void> {
    await super.onAlarm();
    this.pending = undefined;
  }
}
countVerbCalls(AuditBuffer);
