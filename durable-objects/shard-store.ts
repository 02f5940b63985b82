import { DurableObject } from "cloudflare:workers";

/**
 * What every store shard shares: SQLite-backed storage created lazily (schema statements only, no
 * state is read at start-up) and expiry by alarm. Rows carry `expires_at` (ms); reads ignore expired
 * rows, and the alarm deletes them in batches so storage does not grow.
 */
export abstract class ShardStore extends DurableObject {
  protected readonly sql: SqlStorage;
  /** The alarm time this instance last saw or set; undefined until first asked. */
  private alarmAt: number | null | undefined;
  /** Verb calls served since this instance started (in memory: a benchmark reads them while shards are warm). */
  private served = 0;
  private readonly startedAt = Date.now();

  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env as never);
    this.sql = ctx.storage.sql;
    for (const statement of this.schema()) this.sql.exec(statement);
  }

  /** `CREATE TABLE IF NOT EXISTS` statements; each expiring table has an indexed `expires_at`. */
  protected abstract schema(): string[];
  /** Tables swept by the alarm. */
  protected abstract expiringTables(): string[];

  /** Makes sure an alarm fires no later than `expiresAt`, without a storage call when one already will. */
  protected async expireAt(expiresAt: number): Promise<void> {
    if (this.alarmAt === undefined) this.alarmAt = await this.ctx.storage.getAlarm();
    if (this.alarmAt !== null && this.alarmAt <= expiresAt) return;
    // Coalesce: sweep at most about once a minute per shard.
    const at = Math.max(expiresAt, Date.now() + 1_000);
    this.alarmAt = at;
    await this.ctx.storage.setAlarm(at);
  }

  /** Requests served by this shard since it started; read by `GET /admin/v1/stats`. */
  stats(): { served: number; since: number } {
    return { served: this.served, since: this.startedAt };
  }

  override async alarm(): Promise<void> {
    const now = Date.now();
    this.alarmAt = null;
    let next = Number.POSITIVE_INFINITY;
    for (const table of this.expiringTables()) {
      this.sql.exec(`DELETE FROM ${table} WHERE expires_at <= ?`, now);
      const row = this.sql.exec<{ e: number | null }>(`SELECT MIN(expires_at) AS e FROM ${table}`).one();
      if (row.e !== null) next = Math.min(next, row.e);
    }
    if (Number.isFinite(next)) await this.expireAt(Math.max(next, now + 60_000));
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
    if (name === "constructor" || typeof verb !== "function" || ["schema", "expiringTables"].includes(name)) continue;
    proto[name] = function (this: ShardStore, ...args: unknown[]) {
      (this as unknown as { served: number }).served++;
      return (verb as (...a: unknown[]) => unknown).apply(this, args);
    };
  }
}
