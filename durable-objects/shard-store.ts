import { DurableObject } from "cloudflare:workers";
import { AUDIT_FLUSH_DELAY_MS, AuditOutbox, auditRetryDelay } from "./audit-outbox";
import { CarriedAudit, type Carrier } from "./carried-audit";
import { type D1Meter, meteredD1, newD1Meter } from "./contract/d1-meter";
import { errorField, log } from "./contract/log";
import type { AuditEvent, ShardStats } from "./contract/verbs";
import { ExpiryBuckets } from "./expiry-buckets";
import { handOffToWebhooks, type WebhookHandOffEnv } from "./webhook-handoff";

export interface StoreEnv {
  /** Where the audit outbox flushes. */
  DB: D1Database;
}

/** Sweeps of expired rows run at most about once a minute per shard. */
const SWEEP_EVERY_MS = 60_000;
/**
 * After a flush, the next carried rows wait at least this long (issue 44): each alarm is a billed row
 * (`setAlarm`) and request, and each flush a D1 page row, so at a low rate a shard flushing every
 * second paid them for one or two logins. A row is written this much late at most.
 */
const CARRIED_FLUSH_EVERY_MS = 5_000;

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
  private readonly rows = new RowsWritten();
  /** What this object's D1 binding did (the audit flush, a webhook queue's endpoint reads): billed as D1. */
  private readonly d1: D1Meter = newD1Meter();
  /** `setAlarm` calls (each a row written) and alarm runs (each a billed request) since it started. */
  private alarmsSet = 0;
  private alarmRuns = 0;

  constructor(ctx: DurableObjectState, env: E) {
    super(ctx, env);
    if (env.DB) this.env = { ...env, DB: meteredD1(env.DB, this.d1) };
    const tracked = this.rows.track(ctx.storage.sql);
    // The schema is made when the object is first used, not at start-up: an object woken only for its
    // counters (`stats()`, which every shard of a large generation answers) creates no storage and
    // writes no row (issue 27 item 13). Each verb (countVerbCalls) and the alarm make it first, outside
    // any transaction; the first statement does too, for any other path.
    this.#ensureSchema = () => {
      if (this.#schemaMade) return;
      // Untracked: making the tables is a cost of the object's first use, not of the request that
      // happens to be first (the first statement on an existing database writes nothing).
      this.#makeSchema(ctx.storage.sql);
      this.#schemaMade = true;
    };
    this.sql = new Proxy(tracked, {
      get: (target, prop) => {
        if (prop === "exec") this.#ensureSchema();
        return Reflect.get(target, prop, target);
      },
    });
    this.audit = new AuditOutbox(this.sql, this.outboxTable());
    const creates = Object.fromEntries(
      this.bucketedTables().map((base) => [
        base,
        this.schema().find((s) => new RegExp(`^\\s*CREATE TABLE IF NOT EXISTS ${base}\\b`, "i").test(s)) ?? "",
      ]),
    );
    for (const [base, create] of Object.entries(creates)) if (!create) throw new Error(`no CREATE TABLE for ${base}`);
    this.buckets = new ExpiryBuckets(this.sql, creates);
    this.carried = new CarriedAudit(this.sql, this.carriers(), (base) =>
      this.bucketedTables().includes(base) ? this.buckets.tables(base) : [base],
    );
  }

  /**
   * Tables whose rows carry a login's audit events (issue 44, carried-audit.ts): each has the
   * `audit` and `audit_due` columns, in its own layout and its buckets'.
   */
  protected carriers(): Carrier[] {
    return [];
  }

  /** The carried events waiting in this shard's rows, and their flush (carried-audit.ts). */
  protected readonly carried: CarriedAudit;

  /** Tables kept as expiry buckets (expiry-buckets.ts); each is also in `schema()`, for its older rows. */
  protected bucketedTables(): string[] {
    return [];
  }

  /** Where rows of the `bucketedTables()` go by their expiry, and are read from. */
  protected readonly buckets: ExpiryBuckets;

  /**
   * The bucket a row of `base` expiring at `expiresAt` goes into, made now: call it before the
   * verb's transaction, so a rolled-back transaction cannot take a bucket's table with it.
   */
  protected bucketFor(base: string, expiresAt: number, now = Date.now()): { table: string; end: number } {
    return this.buckets.tableFor(base, expiresAt, now);
  }

  #schemaMade = false;
  readonly #ensureSchema: () => void;

  /** Makes the schema if this instance has not yet (countVerbCalls calls it before every verb). */
  protected schemaReady(): void {
    this.#ensureSchema();
  }

  #makeSchema(sql: SqlStorage): void {
    const statements = [...this.schema(), this.audit.schema(), CarriedAudit.schema()];
    for (const statement of statements) sql.exec(statement);
    // Every table's DDL, read once (no data is read).
    const ddlOf = new Map(
      sql
        .exec<{ name: string; sql: string }>("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
        .toArray()
        .map((t) => [t.name, t.sql]),
    );
    const upgrades = { ...this.upgrades() };
    upgrades[this.outboxTable()] = [...(upgrades[this.outboxTable()] ?? []), ...this.audit.upgrades()];
    for (const [table, alters] of Object.entries(upgrades)) {
      // A bucketed table's upgrades apply to its buckets made before them too (expiry-buckets.ts).
      const tables = this.bucketedTables().includes(table)
        ? [table, ...[...ddlOf.keys()].filter((t) => t.startsWith(`${table}__e`))]
        : [table];
      for (const t of tables) {
        const ddl = ddlOf.get(t) ?? "";
        for (const alter of alters) {
          const column = /ADD COLUMN (\w+)/.exec(alter)?.[1];
          if (column && !new RegExp(`\\b${column}\\b`).test(ddl))
            sql.exec(alter.replace(`ALTER TABLE ${table} `, `ALTER TABLE ${t} `));
        }
      }
    }
    // A table made before its layout changed is rebuilt, then its indexes are made again.
    if (this.#rebuildOldLayouts(sql, statements, ddlOf)) for (const statement of statements) sql.exec(statement);
    for (const statement of this.indexes()) sql.exec(statement);
  }

  /**
   * Tables whose layout changed since they were made (issue 28: `WITHOUT ROWID`, so a row keyed by
   * text is one billed row and not a row and an index entry; no `AUTOINCREMENT`, whose
   * `sqlite_sequence` row every insert rewrote) are rebuilt in the layout `schema()` states: the rows
   * copied, in one transaction, once, at the shard's first use after the upgrade. True when any was.
   */
  #rebuildOldLayouts(sql: SqlStorage, statements: string[], ddlOf: Map<string, string>): boolean {
    const layout = (ddl: string) => `${/WITHOUT ROWID/i.test(ddl)} ${/AUTOINCREMENT/i.test(ddl)}`;
    let rebuilt = false;
    for (const create of statements) {
      const table = /^\s*CREATE TABLE IF NOT EXISTS (\w+)/i.exec(create)?.[1];
      if (!table) continue;
      if (layout(ddlOf.get(table) ?? "") === layout(create)) continue;
      const next = `${table}__rebuilt`;
      this.ctx.storage.transactionSync(() => {
        sql.exec(`DROP TABLE IF EXISTS ${next}`);
        sql.exec(create.replace(/CREATE TABLE IF NOT EXISTS \w+/i, `CREATE TABLE ${next}`));
        const columns = sql
          .exec<{ name: string }>(`SELECT name FROM pragma_table_info('${next}')`)
          .toArray()
          .map((c) => c.name)
          .join(", ");
        sql.exec(`INSERT INTO ${next} (${columns}) SELECT ${columns} FROM ${table}`);
        sql.exec(`DROP TABLE ${table}`);
        sql.exec(`ALTER TABLE ${next} RENAME TO ${table}`);
      });
      rebuilt = true;
    }
    return rebuilt;
  }

  /**
   * `CREATE TABLE IF NOT EXISTS` statements. Each expiring table has an `expires_at`, indexed unless
   * the table only holds minutes of rows (the sweep then reads it whole, and each write saves a row).
   */
  protected abstract schema(): string[];
  /**
   * Columns added since a table was first created, by table: `ALTER TABLE t ADD COLUMN c ...`
   * statements, each run once, when the table's DDL lacks the column (one sqlite_master read per
   * table at start-up; no data is read).
   */
  protected upgrades(): Record<string, string[]> {
    return {};
  }
  /** Index statements that need the upgraded columns; run after `upgrades()`. */
  protected indexes(): string[] {
    return [];
  }
  /** Tables swept by the alarm. */
  protected abstract expiringTables(): string[];

  /**
   * Expiring tables without an `expires_at` index (issue 28), by how often the alarm sweeps them at
   * most (`everyMs`: the sweep reads such a table whole, and rows read cost a thousandth of rows
   * written, so an hourly scan is cheaper than an index entry per write) and how long a row is kept
   * after it expired (`keepExpiredMs`: a row its key will write again, as an address's limits at its
   * next sign-in, is overwritten, 1 billed row, instead of deleted and inserted, 2). Reads ignore
   * expired rows. Absent: swept at every alarm, at expiry.
   */
  protected scanSweptTables(): Record<string, { everyMs: number; keepExpiredMs: number }> {
    return {};
  }
  /** When each scan-swept table was last swept by this instance. */
  readonly #sweptAt = new Map<string, number>();

  /** The audit outbox's table (the AuditBuffer keeps the name it had before the outbox was shared). */
  protected outboxTable(): string {
    return "audit_outbox";
  }

  /** Makes sure an alarm fires no later than `expiresAt`, without a storage call when one already will. */
  protected async expireAt(expiresAt: number): Promise<void> {
    if (this.alarmAt === undefined) this.alarmAt = await this.ctx.storage.getAlarm();
    if (this.alarmAt !== null && this.alarmAt <= expiresAt) return;
    // At least a second ahead, so a burst of writes arms the alarm once.
    const at = Math.max(expiresAt, Date.now() + 1_000);
    this.alarmAt = at;
    this.alarmsSet++;
    await this.ctx.storage.setAlarm(at);
  }

  /**
   * Adds audit events to this shard's outbox. Call it inside the verb's transaction, then await
   * `auditFlushSoon()` once the transaction is done.
   */
  protected recordAudit(events: AuditEvent[]): void {
    this.audit.add(events);
  }

  /** Removes an event that has not been flushed yet (it recorded something taken back in time). */
  protected withdrawAudit(id: string): void {
    this.audit.remove(id);
  }

  protected auditFlushSoon(): Promise<void> {
    return this.expireAt(Date.now() + AUDIT_FLUSH_DELAY_MS);
  }

  /** Makes the alarm fire now (a full audit batch waiting), unless it already will. */
  protected async alarmNow(): Promise<void> {
    if (this.alarmAt === undefined) this.alarmAt = await this.ctx.storage.getAlarm();
    const now = Date.now();
    if (this.alarmAt !== null && this.alarmAt <= now) return;
    this.alarmAt = now;
    this.alarmsSet++;
    await this.ctx.storage.setAlarm(now);
  }

  /** Audit events waiting for the alarm (for tests and stats). */
  auditBacklog(): number {
    return this.audit.count() + this.carried.count();
  }

  /**
   * Requests served and rows written (as SQLite counts them for billing, alarms included) by this
   * shard since it started; read by `GET /admin/v1/stats`. Both are in memory and reset when the
   * object is evicted. `pendingDeletes` counts the rows a sweep or flush will delete, which reads
   * every expiring table: asked for by the admin's stats only, never by the shard controller's runs.
   */
  stats(o: { pendingDeletes?: boolean } = {}): ShardStats {
    return {
      served: this.served,
      rows_written: this.rows.total(),
      table_rows_written: this.buckets.madeRows + this.audit.madeRows,
      rows_read: this.rows.read(),
      alarms_set: this.alarmsSet,
      alarm_runs: this.alarmRuns,
      d1_queries: this.d1.queries,
      d1_rows_read: this.d1.rows_read,
      d1_rows_written: this.d1.rows_written,
      d1_size_bytes: this.d1.size_bytes,
      pending_deletes: o.pendingDeletes ? this.#pendingDeletes() : 0,
      audit_events_flushed: this.audit.flushed + this.carried.flushed,
      storage_bytes: this.ctx.storage.sql.databaseSize,
      since: this.startedAt,
    };
  }

  /**
   * Rows stored now that a sweep or a flush will delete later, one billed row each (issue 28): a
   * login's later cost, counted when it is made. Read untracked, and only from tables that exist (a
   * shard woken for its counters creates nothing).
   */
  #pendingDeletes(): number {
    const raw = this.ctx.storage.sql;
    let n = 0;
    for (const table of this.expiringTables()) {
      const exists = raw.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", table).toArray().length;
      if (exists) n += raw.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`).one().n;
    }
    const outbox = raw.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", this.outboxTable());
    return n + (outbox.toArray().length ? this.audit.pendingDeletes() : 0);
  }

  /** The alarm run under way, if any. */
  #alarmRun: Promise<void> | null = null;

  /**
   * workerd's alarm entry point. A subclass adds to a run by overriding `onAlarm`. The run is kept so
   * that `alarmIdle` can wait for it: in tests, `runDurableObjectAlarm` calls `alarm()` directly, beside
   * an alarm workerd fired on its own for a pinned clock's past. In production runs never overlap.
   */
  override async alarm(): Promise<void> {
    const run = this.onAlarm();
    this.#alarmRun = run;
    try {
      await run;
    } finally {
      if (this.#alarmRun === run) this.#alarmRun = null;
    }
  }

  /** Resolves once no alarm run is under way (its outcome is the run's own business). */
  async alarmIdle(): Promise<void> {
    while (this.#alarmRun) await this.#alarmRun.catch(() => undefined);
  }

  protected async onAlarm(): Promise<void> {
    this.alarmRuns++;
    this.schemaReady();
    const now = Date.now();
    this.alarmAt = null;
    let auditAt = Number.POSITIVE_INFINITY;
    try {
      // The events, once in D1, are handed to the webhook queues before they leave the outbox (issue 25).
      const handOff = (events: AuditEvent[]) => handOffToWebhooks(this.env as unknown as WebhookHandOffEnv, events);
      if ((await this.audit.flush(this.env.DB, handOff)) > 0) auditAt = now;
      // The events carried by this shard's rows (issue 44), written and handed over the same way.
      const carried = await this.carried.flush(this.env.DB, now);
      if (carried.length) await handOff(carried);
      const nextCarried = this.carried.nextDue();
      if (nextCarried !== null) auditAt = Math.min(auditAt, Math.max(nextCarried, now + CARRIED_FLUSH_EVERY_MS));
      this.auditFailures = 0;
    } catch (err) {
      // The events stay in the outbox and the rows; back off while D1 fails. Expiry below does not
      // wait for D1, except the buckets of rows that carry events (dropped once these are in D1).
      this.auditFailures++;
      log("error", "audit: flush to D1 failed", { error: errorField(err) });
      auditAt = now + auditRetryDelay(this.auditFailures);
    }
    const carriers = this.auditFailures > 0 ? this.carriers().map((c) => c.base) : [];
    let sweepAt = this.buckets.dropEnded(now, carriers) ?? Number.POSITIVE_INFINITY;
    const scanned = this.scanSweptTables();
    for (const table of this.expiringTables()) {
      const scan = scanned[table];
      const every = scan?.everyMs ?? SWEEP_EVERY_MS;
      const keep = scan?.keepExpiredMs ?? 0;
      const last = this.#sweptAt.get(table);
      if (scan && last !== undefined && now - last < every) {
        if (this.sql.exec(`SELECT 1 FROM ${table} LIMIT 1`).toArray().length) sweepAt = Math.min(sweepAt, last + every);
        continue;
      }
      this.sql.exec(`DELETE FROM ${table} WHERE expires_at <= ?`, now - keep);
      if (scan) this.#sweptAt.set(table, now);
      const row = this.sql.exec<{ e: number | null }>(`SELECT MIN(expires_at) AS e FROM ${table}`).one();
      if (row.e !== null) sweepAt = Math.min(sweepAt, Math.max(row.e + keep, now + every));
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
      // Not counted as served: what the object itself runs, and the counters `GET /admin/v1/stats` reads.
      [
        "schema",
        "upgrades",
        "indexes",
        "expiringTables",
        "scanSweptTables",
        "outboxTable",
        "bucketedTables",
        "carriers",
        "bucketFor",
        "auditBacklog",
        "alarm",
        "onAlarm",
        "alarmIdle",
        "webhookCounts",
        "stats",
      ].includes(name)
    )
      continue;
    proto[name] = function (this: ShardStore, ...args: unknown[]) {
      (this as unknown as { served: number }).served++;
      (this as unknown as { schemaReady(): void }).schemaReady();
      return (verb as (...a: unknown[]) => unknown).apply(this, args);
    };
  }
}

/**
 * Counts the rows a Durable Object's SQL writes. Each cursor's `rowsWritten` is final once its
 * statement has run to the end, which every verb does before it returns (verbs are synchronous
 * between awaits), so cursors are summed lazily, a batch at a time.
 */
export class RowsWritten {
  #sum = 0;
  #read = 0;
  #open: SqlStorageCursor<Record<string, SqlStorageValue>>[] = [];

  track(sql: SqlStorage): SqlStorage {
    const exec = sql.exec.bind(sql);
    return new Proxy(sql, {
      get: (target, prop) => {
        if (prop !== "exec") return Reflect.get(target, prop, target);
        return (query: string, ...bindings: unknown[]) => {
          const cursor = exec(query, ...bindings);
          if (this.#open.length >= 64) this.#fold();
          this.#open.push(cursor);
          return cursor;
        };
      },
    });
  }

  total(): number {
    this.#fold();
    return this.#sum;
  }

  /** Rows read, as billed (a statement's `rowsRead` once it has run). */
  read(): number {
    this.#fold();
    return this.#read;
  }

  #fold(): void {
    for (const cursor of this.#open) {
      this.#sum += cursor.rowsWritten;
      this.#read += cursor.rowsRead;
    }
    this.#open = [];
  }
}
