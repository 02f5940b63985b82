import { loadMailConfig } from "../workers/shared/config/mail-settings";
import { attempt, mailerFor, type SealedOtp } from "../workers/shared/events/mail/transport";
import type { AuditBuffer } from "./audit-buffer";
import { auditEvent, emitAudit } from "./contract/audit-event";
import { unseal } from "./contract/crypto";
import { outboxSealMaterial } from "./contract/mail-seal";
import type { AuditEvent, OutboxItem } from "./contract/verbs";
import { countVerbCalls, ShardStore, type StoreEnv } from "./shard-store";

interface OutboxEnv extends StoreEnv {
  AUDIT: DurableObjectNamespace<AuditBuffer>;
  SEND_EMAIL?: SendEmail;
}

/**
 * MailOutbox: where one-time-code mail waits, sharded by the email's HMAC (`mail:g<gen>:s<n>`).
 * It holds a message whose first attempt failed. The alarm fires at the earliest `next_at`, tries each
 * due message once with the transport the store Worker's config names, and on failure waits three
 * times longer, up to `max_attempts` and never past the code's expiry. A delivered or abandoned
 * message is deleted; every outcome is an audit event. (Captured mail, of the dev transport and the
 * load-test domain, is kept by the ChallengeStore with its code.)
 */
/** Records a delivery's outcome as an audit event of the item's address (and tenant, when known). */
type NoteOutcome = (
  item: OutboxItem,
  kind: "code_sent" | "mail_failed",
  detail: Record<string, unknown>,
  tenant?: string,
) => void;

export class MailOutbox extends ShardStore<OutboxEnv> {
  /** The variables the transport is built from: the Worker's env (a test may point it elsewhere). */
  protected mailEnv: object;

  constructor(ctx: DurableObjectState, env: OutboxEnv) {
    super(ctx, env);
    this.mailEnv = env;
  }

  protected schema(): string[] {
    return [
      `CREATE TABLE IF NOT EXISTS outbox (
        key TEXT PRIMARY KEY,
        id TEXT NOT NULL,
        sealed TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        max_attempts INTEGER NOT NULL,
        retry_ms INTEGER NOT NULL,
        timeout_ms INTEGER NOT NULL,
        next_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        audit_shard TEXT NOT NULL,
        last_error TEXT)`,
      "CREATE INDEX IF NOT EXISTS outbox_next ON outbox(next_at)",
      "CREATE INDEX IF NOT EXISTS outbox_exp ON outbox(expires_at)",
      // Captured mail lived here before it moved to the ChallengeStore, beside its code.
      "DROP TABLE IF EXISTS captured",
    ];
  }

  protected expiringTables(): string[] {
    // An outbox row expires with its code. Retries are always due before that, and the alarm runs
    // due retries first (each with its audit event), so the sweep only tidies up after a late alarm.
    return ["outbox"];
  }

  /** Takes a message for retry, replacing any older pending message for the same address. */
  async enqueue(item: OutboxItem): Promise<void> {
    this.sql.exec(
      `INSERT OR REPLACE INTO outbox (key, id, sealed, attempts, max_attempts, retry_ms, timeout_ms, next_at, expires_at, audit_shard)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      item.key,
      item.id,
      item.sealed,
      item.attempts,
      item.max_attempts,
      item.retry_ms,
      item.timeout_ms,
      item.next_at,
      item.expires_at,
      item.audit_shard,
    );
    await this.#schedule();
  }

  /** Pending messages (no sealed content), for inspection. */
  pending(): Omit<OutboxItem, "sealed">[] {
    return this.sql
      .exec<Omit<OutboxItem, "sealed"> & Record<string, SqlStorageValue>>(
        "SELECT key, id, attempts, max_attempts, retry_ms, timeout_ms, next_at, expires_at, audit_shard FROM outbox ORDER BY next_at",
      )
      .toArray();
  }

  /** Makes sure the alarm fires by the earliest retry. */
  async #schedule(): Promise<void> {
    const row = this.sql.exec<{ n: number | null }>("SELECT MIN(next_at) AS n FROM outbox").one();
    if (row.n !== null) await this.expireAt(row.n);
  }

  /** Due retries first; then what every shard's alarm does (the audit outbox, expiry); then the next retry. */
  protected override async onAlarm(): Promise<void> {
    await this.#retryDue();
    await super.onAlarm();
    await this.#schedule();
  }

  async #retryDue(): Promise<void> {
    const now = Date.now();
    const due = this.sql
      .exec<OutboxItem & { last_error: string | null } & Record<string, SqlStorageValue>>(
        "SELECT * FROM outbox WHERE next_at <= ? ORDER BY next_at LIMIT 20",
        now,
      )
      .toArray();
    const events = new Map<string, AuditEvent[]>();
    const note = (
      item: OutboxItem,
      kind: "code_sent" | "mail_failed",
      detail: Record<string, unknown>,
      tenant?: string,
    ) => {
      const list = events.get(item.audit_shard) ?? [];
      list.push(auditEvent({ kind, emailKey: item.key, detail, tenant }));
      events.set(item.audit_shard, list);
    };
    await Promise.all(due.map((item) => this.#retry(item, now, note)));
    await Promise.all([...events].map(([shard, list]) => emitAudit(this.env, shard, list)));
  }

  async #retry(item: OutboxItem, now: number, note: NoteOutcome): Promise<void> {
    const n = item.attempts + 1;
    const drop = () => this.sql.exec("DELETE FROM outbox WHERE key = ? AND id = ?", item.key, item.id);
    let config: ReturnType<typeof loadMailConfig>;
    try {
      config = loadMailConfig(this.mailEnv);
    } catch (err) {
      // A broken deployment: keep the message and try again later, within its limits.
      return this.#failed(item, n, now, err instanceof Error ? err.message : String(err), false, note);
    }
    const raw = await unseal(outboxSealMaterial(config.MAIL_OUTBOX_SECRET), item.sealed);
    if (raw === null || item.expires_at <= now) {
      drop();
      note(item, "mail_failed", {
        attempt: n - 1,
        error: raw === null ? "the message cannot be unsealed" : "the code expired",
        retry: false,
      });
      return;
    }
    const m = JSON.parse(raw) as SealedOtp;
    const failure = await attempt(
      mailerFor(this.env, config),
      {
        to: m.to,
        code: m.code,
        expiresInSeconds: m.ttl_seconds,
        expiresAt: m.expires_at,
        issuerName: m.issuer_name,
        issuer: m.issuer,
        from: m.from,
        fromName: m.from_name,
        replyTo: m.reply_to,
        ...(m.look ? { look: m.look } : {}),
      },
      item.timeout_ms,
      item.id,
    );
    if (!failure) {
      drop();
      note(item, "code_sent", { attempt: n, transport: config.MAIL_TRANSPORT }, m.tenant);
      return;
    }
    return this.#failed(item, n, now, failure.message, failure.permanent, note, config.MAIL_TRANSPORT, m.tenant);
  }

  #failed(
    item: OutboxItem,
    n: number,
    now: number,
    error: string,
    permanent: boolean,
    note: NoteOutcome,
    transport?: string,
    tenant?: string,
  ): void {
    const nextAt = now + item.retry_ms * 3 ** (n - 1);
    const retry = !permanent && n < item.max_attempts && nextAt < item.expires_at;
    if (retry)
      this.sql.exec(
        "UPDATE outbox SET attempts = ?, next_at = ?, last_error = ? WHERE key = ? AND id = ?",
        n,
        nextAt,
        error,
        item.key,
        item.id,
      );
    else this.sql.exec("DELETE FROM outbox WHERE key = ? AND id = ?", item.key, item.id);
    note(item, "mail_failed", { attempt: n, error, retry, ...(transport ? { transport } : {}) }, tenant);
  }
}
countVerbCalls(MailOutbox as unknown as abstract new (...args: never[]) => ShardStore);
