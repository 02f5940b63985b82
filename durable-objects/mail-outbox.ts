import { DurableObject } from "cloudflare:workers";
import { type AuditEvent, auditEvent, emitAudit } from "../workers/shared/audit";
import { loadMailConfig } from "../workers/shared/config";
import { unseal } from "../workers/shared/crypto";
import { attempt, mailerFor, outboxSealMaterial, type SealedOtp } from "../workers/shared/mail/index";
import type { AuditBuffer } from "./audit-buffer";

/** A one-time-code mail whose first attempt failed, waiting for its next one. */
export interface OutboxItem {
  /** HMAC of the email: one pending mail per address (a newer code replaces an older one). */
  key: string;
  /** The message's id, the same on every attempt (an idempotency key for providers that take one). */
  id: string;
  /** `SealedOtp` as JSON, AES-GCM under MAIL_OUTBOX_SECRET: storage never holds the code in the clear. */
  sealed: string;
  /** Attempts made so far. */
  attempts: number;
  max_attempts: number;
  /** The first retry's delay; the n-th retry waits retry_ms * 3^(n-1). */
  retry_ms: number;
  timeout_ms: number;
  next_at: number;
  /** The code's expiry: no attempt after it. */
  expires_at: number;
  /** The AuditBuffer shard the Worker chose for this email's events. */
  audit_shard: string;
}

interface OutboxEnv {
  DB: D1Database;
  AUDIT: DurableObjectNamespace<AuditBuffer>;
  SEND_EMAIL?: SendEmail;
}

/**
 * MailOutbox: bounded retries of one-time-code mail, sharded by the email's HMAC (`mail:g<gen>:s<n>`).
 * The alarm fires at the earliest `next_at`, tries each due message once with the transport the store
 * Worker's config names, and on failure waits three times longer, up to `max_attempts` and never past
 * the code's expiry. A delivered or abandoned message is deleted; every outcome is an audit event.
 */
export class MailOutbox extends DurableObject<OutboxEnv> {
  private readonly sql: SqlStorage;
  /** The variables the transport is built from: the Worker's env (a test may point it elsewhere). */
  protected mailEnv: object;

  constructor(ctx: DurableObjectState, env: OutboxEnv) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.mailEnv = env;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS outbox (
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
      last_error TEXT)`);
    this.sql.exec("CREATE INDEX IF NOT EXISTS outbox_next ON outbox(next_at)");
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
    await this.schedule();
  }

  /** Pending messages (no sealed content), for inspection. */
  pending(): Omit<OutboxItem, "sealed">[] {
    return this.sql
      .exec<Omit<OutboxItem, "sealed"> & Record<string, SqlStorageValue>>(
        "SELECT key, id, attempts, max_attempts, retry_ms, timeout_ms, next_at, expires_at, audit_shard FROM outbox ORDER BY next_at",
      )
      .toArray();
  }

  private async schedule(): Promise<void> {
    const row = this.sql.exec<{ n: number | null }>("SELECT MIN(next_at) AS n FROM outbox").one();
    if (row.n === null) {
      await this.ctx.storage.deleteAlarm();
      return;
    }
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > row.n) await this.ctx.storage.setAlarm(row.n);
  }

  override async alarm(): Promise<void> {
    const now = Date.now();
    const due = this.sql
      .exec<OutboxItem & { last_error: string | null } & Record<string, SqlStorageValue>>(
        "SELECT * FROM outbox WHERE next_at <= ? ORDER BY next_at LIMIT 20",
        now,
      )
      .toArray();
    const events = new Map<string, AuditEvent[]>();
    const note = (item: OutboxItem, kind: "code_sent" | "mail_failed", detail: Record<string, unknown>) => {
      const list = events.get(item.audit_shard) ?? [];
      list.push(auditEvent({ kind, emailKey: item.key, detail }));
      events.set(item.audit_shard, list);
    };
    await Promise.all(due.map((item) => this.retry(item, now, note)));
    await Promise.all([...events].map(([shard, list]) => emitAudit(this.env, shard, list)));
    await this.schedule();
  }

  private async retry(
    item: OutboxItem,
    now: number,
    note: (item: OutboxItem, kind: "code_sent" | "mail_failed", detail: Record<string, unknown>) => void,
  ): Promise<void> {
    const n = item.attempts + 1;
    const drop = () => this.sql.exec("DELETE FROM outbox WHERE key = ? AND id = ?", item.key, item.id);
    let config: ReturnType<typeof loadMailConfig>;
    try {
      config = loadMailConfig(this.mailEnv);
    } catch (err) {
      // A broken deployment: keep the message and try again later, within its limits.
      return this.failed(item, n, now, err instanceof Error ? err.message : String(err), false, note);
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
      },
      item.timeout_ms,
      item.id,
    );
    if (!failure) {
      drop();
      note(item, "code_sent", { attempt: n, transport: config.MAIL_TRANSPORT });
      return;
    }
    return this.failed(item, n, now, failure.message, failure.permanent, note, config.MAIL_TRANSPORT);
  }

  private failed(
    item: OutboxItem,
    n: number,
    now: number,
    error: string,
    permanent: boolean,
    note: (item: OutboxItem, kind: "code_sent" | "mail_failed", detail: Record<string, unknown>) => void,
    transport?: string,
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
    note(item, "mail_failed", { attempt: n, error, retry, ...(transport ? { transport } : {}) });
  }
}
