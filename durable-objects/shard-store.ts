import { DurableObject } from "cloudflare:workers";
import type { AuditEvent } from "../workers/shared/audit";
import { AUDIT_FLUSH_DELAY_MS, AuditOutbox, auditRetryDelay } from "./audit-outbox";

export interface StoreEnv {
  /** Where the audit outbox flushes. */
  DB: D1Database;
}

/** Sweeps of expired rows run at most about once a minute per shard. */
const SWEEP_EVERY_MS = 60_000;

/**
 * What every store shard shares: SQLite-backed storage created lazily (schema statements only, no
 * state is read at start-up), expiry by alarm, and an audit outbox. Rows carry `expires_at` (ms);
 * reads ignore expired rows, and the alarm deletes them in batches so storage does not grow. A verb
 * that makes an auditable thing true (a sign-in, a redeemed code) writes its event in the same
 * transaction, and the same alarm hands the events to D1.
 */
export abstract class ShardStore<E extends StoreEnv = StoreEnv> extends DurableObject<E> {
  protected readonly sql: SqlStorage;
  private readonly audit: AuditOutbox;
  private auditFailures = 0;
  /** The alarm time this instance last saw or set; undefined until first asked. */
  private alarmAt: number | null | undefined;
  /** Verb calls served since this instance started (in memory: a benchmark reads them while shards are warm). */
  private served = 0;
  private readonly startedAt = Date.now();

  constructor(ctx: DurableObjectState, env: E) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.audit = new AuditOutbox(this.sql, "audit_outbox");
    for (const statement of [...this.schema(), this.audit.schema()]) this.sql.exec(statement);
  }

  /** `CREATE TABLE IF NOT EXISTS` statements; each expiring table has an indexed `expires_at`. */
  protected abstract schema(): string[];
  /** Tables swept by the alarm. */
  protected abstract expiringTables(): string[];

  /** Makes sure an alarm fires no later than `expiresAt`, without a storage call when one already will. */
  protected async expireAt(expiresAt: number): Promise<void> {
    if (this.alarmAt === undefined) this.alarmAt = await this.ctx.storage.getAlarm();
    if (this.alarmAt !== null && this.alarmAt <= expiresAt) return;
    // At least a second ahead, so a burst of writes arms the alarm once.
    const at = Math.max(expiresAt, Date.now() + 1_000);
    this.alarmAt = at;
    await this.ctx.storage.setAlarm(at);
  }

  /**
   * Adds audit events to this shard's outbox. Call it inside the verb's transaction, then await
   * `auditFlushSoon()` once the transaction is done.
   */
  protected recordAudit(events: AuditEvent[]): void {
    this.audit.add(events);
  }

  protected auditFlushSoon(): Promise<void> {
    return this.expireAt(Date.now() + AUDIT_FLUSH_DELAY_MS);
  }

  /** Audit events waiting for the alarm (for tests and stats). */
  auditBacklog(): number {
    return this.audit.count();
  }

  /** Requests served by this shard since it started; read by `GET /admin/v1/stats`. */
  stats(): { served: number; since: number } {
    return { served: this.served, since: this.startedAt };
  }

  override async alarm(): Promise<void> {
    const now = Date.now();
    this.alarmAt = null;
    let auditAt = Number.POSITIVE_INFINITY;
    try {
      if ((await this.audit.flush(this.env.DB)) > 0) auditAt = now;
      this.auditFailures = 0;
    } catch (err) {
      // The events stay in the outbox; back off while D1 fails. Expiry below does not wait for D1.
      this.auditFailures++;
      console.error("audit: flush to D1 failed", err instanceof Error ? err.message : err);
      auditAt = now + auditRetryDelay(this.auditFailures);
    }
    let sweepAt = Number.POSITIVE_INFINITY;
    for (const table of this.expiringTables()) {
      this.sql.exec(`DELETE FROM ${table} WHERE expires_at <= ?`, now);
      const row = this.sql.exec<{ e: number | null }>(`SELECT MIN(expires_at) AS e FROM ${table}`).one();
      if (row.e !== null) sweepAt = Math.min(sweepAt, Math.max(row.e, now + SWEEP_EVERY_MS));
    }
    const next = Math.min(auditAt, sweepAt);
    if (Number.isFinite(next)) await this.expireAt(next);
  }
}

/**
 * Counts every call of a store's own verbs (its prototype's methods), so per-shard load is visible
 * without a line in each verb. Applied once per class, next to its definition.
 */
export function countVerbCalls(store: abstract new (...args: never[]) => ShardStore): void {
  const proto = store.prototype as unknown as Record<string, unknown>;
  for (const name of Object.getOwnPropertyNames(proto)) {
    const verb = proto[name];
    if (
      name === "constructor" ||
      typeof verb !== "function" ||
      ["schema", "expiringTables", "auditBacklog"].includes(name)
    )
      continue;
    proto[name] = function (this: ShardStore, ...args: unknown[]) {
      (this as unknown as { served: number }).served++;
      return (verb as (...a: unknown[]) => unknown).apply(this, args);
    };
  }
}
