import {
  liveSecrets,
  type WebhookEndpointRow,
  webhookPolicy,
  webhookUrlProblem,
} from "../workers/shared/events/webhooks/endpoints";
import { webhookHeaders } from "../workers/shared/events/webhooks/signature";
import { auditEvent } from "./contract/audit-event";
import { errorField, log } from "./contract/log";
import type {
  WebhookAttemptView,
  WebhookCounts,
  WebhookMessageInput,
  WebhookMessageStatus,
  WebhookMessageView,
} from "./contract/verbs";
import { countVerbCalls, ShardStore, type StoreEnv } from "./shard-store";

/**
 * Webhook delivery (issue 25): one endpoint's messages live in one shard (the endpoint's `shard`,
 * chosen when it is created), queued by the stores' audit flush (durable-objects/webhook-handoff.ts)
 * and sent by this shard's alarm. At least once: a message is sent until a 2xx answers, with
 * exponential backoff and jitter, for `webhook_retry_window_seconds` (a day) from when it was queued;
 * then it is failed (the dead letter) and kept for replay. Nothing is kept in memory that a restart
 * could lose: the queue is this object's SQLite, and its alarm resumes it.
 *
 * Each attempt: POST with the Standard Webhooks headers, a timeout, no redirect followed (a 3xx is a
 * failure), and at most 4 KB of the answer read. An endpoint whose attempts keep failing is disabled
 * (`webhook_disable_after_failures` in a row over at least `webhook_disable_after_seconds`) with a
 * `webhook_disabled` audit event; its pending messages then fail, replayable once it is enabled again.
 */

interface WebhookEnv extends StoreEnv {
  KEY_ENCRYPTION_SECRET?: string;
  ENVIRONMENT?: string;
  POLICY?: string;
}

interface MessageRow {
  key: string;
  id: string;
  endpoint_id: string;
  tenant: string;
  type: string;
  body: string;
  attempts: number;
  first_at: number;
}

interface Outcome {
  status: number;
  latency_ms: number;
  error: string | null;
  /** Nothing to retry: the endpoint is gone, disabled, or its URL is no longer allowed. */
  final?: boolean;
  /** Keyway's own failure (no key to unseal the secret): retried, never counted against the endpoint. */
  ours?: boolean;
}

/** Delays after the 1st, 2nd, ... failed attempt (s); the last repeats until the retry window ends. */
const BACKOFF_S = [5, 30, 120, 600, 1_800, 3_600, 7_200, 14_400, 28_800];
/** A delivered or failed message (and each attempt) is kept this long, for the operator and replay. */
const KEEP_MS = 14 * 86_400_000;
/** Messages attempted at once (in parallel). */
const BATCH = 25;
/** How long one alarm run goes on taking batches while more are due. */
const RUN_MS = 15_000;
/**
 * When an endpoint answers again, its messages waiting for a retry become due within this much, spread
 * at random (the alarm then sends them a batch at a time, paced, as any backlog).
 */
const BRING_FORWARD_SPREAD_MS = 5_000;
/** Times one message is brought forward: one the receiver keeps refusing returns to its own backoff. */
const BRING_FORWARD_MAX = 3;
/** How much of a receiver's answer is read. */
const ANSWER_CAP = 4_096;

export class WebhookOutbox extends ShardStore<WebhookEnv> {
  #ok = 0;
  #failed = 0;

  protected schema(): string[] {
    return [
      `CREATE TABLE IF NOT EXISTS messages (
        key TEXT PRIMARY KEY,
        id TEXT NOT NULL,
        endpoint_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        type TEXT NOT NULL,
        body TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        first_at INTEGER NOT NULL,
        next_at INTEGER NOT NULL,
        last_status INTEGER,
        last_error TEXT,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        brought_forward INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID`,
      "CREATE INDEX IF NOT EXISTS messages_due ON messages(next_at) WHERE status = 'pending'",
      // An endpoint's messages waiting for a retry, found when it answers again (bringBacklogForward).
      "CREATE INDEX IF NOT EXISTS messages_waiting ON messages(endpoint_id, next_at) WHERE status = 'pending'",
      "CREATE INDEX IF NOT EXISTS messages_endpoint ON messages(endpoint_id, created_at)",
      "CREATE INDEX IF NOT EXISTS messages_exp ON messages(expires_at)",
      `CREATE TABLE IF NOT EXISTS attempts (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        message_key TEXT NOT NULL,
        endpoint_id TEXT NOT NULL,
        at INTEGER NOT NULL,
        status INTEGER NOT NULL,
        latency_ms INTEGER NOT NULL,
        error TEXT,
        expires_at INTEGER NOT NULL)`,
      "CREATE INDEX IF NOT EXISTS attempts_endpoint ON attempts(endpoint_id, seq)",
      "CREATE INDEX IF NOT EXISTS attempts_exp ON attempts(expires_at)",
    ];
  }

  protected expiringTables(): string[] {
    return ["messages", "attempts"];
  }

  protected override upgrades(): Record<string, string[]> {
    // Issue 38 item 12a: queues made before the backlog was brought forward.
    return { messages: ["ALTER TABLE messages ADD COLUMN brought_forward INTEGER NOT NULL DEFAULT 0"] };
  }

  /** Queues messages (a key already queued is left as it is: a repeated flush queues nothing twice). */
  async enqueue(messages: WebhookMessageInput[], now: number): Promise<number> {
    let added = 0;
    const policy = webhookPolicy(this.env);
    this.ctx.storage.transactionSync(() => {
      for (const m of messages) {
        added += this.sql
          .exec(
            `INSERT OR IGNORE INTO messages (key, id, endpoint_id, tenant, type, body, status, attempts, first_at, next_at,
             created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?) RETURNING key`,
            `${m.id}:${m.endpoint_id}`,
            m.id,
            m.endpoint_id,
            m.tenant,
            m.type,
            m.body,
            now,
            now,
            now,
            now + policy.retry_window_seconds * 1000 + KEEP_MS,
          )
          .toArray().length;
      }
    });
    if (added) await this.expireAt(now);
    return added;
  }

  /** An endpoint's latest attempts, newest first, with when their message is tried next. */
  recentAttempts(endpointId: string, limit: number): WebhookAttemptView[] {
    return this.sql
      .exec<WebhookAttemptView & Record<string, SqlStorageValue>>(
        `SELECT m.id AS message_id, m.type, a.at, a.status, a.latency_ms, a.error,
           CASE WHEN m.status = 'pending' THEN m.next_at END AS next_at
         FROM attempts a JOIN messages m ON m.key = a.message_key
         WHERE a.endpoint_id = ? ORDER BY a.seq DESC LIMIT ?`,
        endpointId,
        Math.min(Math.max(1, limit), 200),
      )
      .toArray();
  }

  /** An endpoint's messages, newest first, optionally of one status. */
  listMessages(endpointId: string, status: WebhookMessageStatus | null, limit: number): WebhookMessageView[] {
    return this.sql
      .exec<WebhookMessageView & Record<string, SqlStorageValue>>(
        `SELECT id, type, status, attempts, created_at, CASE WHEN status = 'pending' THEN next_at END AS next_at,
           last_status, last_error
         FROM messages WHERE endpoint_id = ? AND (? IS NULL OR status = ?) ORDER BY created_at DESC, id LIMIT ?`,
        endpointId,
        status,
        status,
        Math.min(Math.max(1, limit), 200),
      )
      .toArray();
  }

  /**
   * Sends messages again from the start of a new retry window: one message by its `webhook-id`, or every
   * message of the endpoint queued since a time. A pending message is left on its schedule.
   */
  async replay(endpointId: string, which: { id: string } | { since: number }, now: number): Promise<number> {
    const policy = webhookPolicy(this.env);
    const replayed = this.sql
      .exec(
        `UPDATE messages SET status = 'pending', attempts = 0, first_at = ?, next_at = ?, expires_at = ?,
           brought_forward = 0
         WHERE endpoint_id = ? AND status != 'pending' AND ${"id" in which ? "id = ?" : "created_at >= ?"} RETURNING key`,
        now,
        now,
        now + policy.retry_window_seconds * 1000 + KEEP_MS,
        endpointId,
        "id" in which ? which.id : which.since,
      )
      .toArray().length;
    if (replayed) await this.expireAt(now);
    return replayed;
  }

  /** Messages by status, and attempts since this object started (for `GET /admin/v1/stats`). */
  webhookCounts(): WebhookCounts {
    const counters = { attempts_ok: this.#ok, attempts_failed: this.#failed };
    // A queue nothing was ever queued in has no tables: asking for its counts creates none.
    const made = this.ctx.storage.sql
      .exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'messages'")
      .toArray().length;
    if (!made) return { pending: 0, delivered: 0, failed: 0, ...counters };
    const by = Object.fromEntries(
      this.sql
        .exec<{ status: string; n: number }>("SELECT status, COUNT(*) AS n FROM messages GROUP BY status")
        .toArray()
        .map((r) => [r.status, r.n]),
    );
    return {
      pending: by.pending ?? 0,
      delivered: by.delivered ?? 0,
      failed: by.failed ?? 0,
      ...counters,
    };
  }

  protected override async onAlarm(): Promise<void> {
    await super.onAlarm();
    try {
      await this.#deliverDue();
    } catch (err) {
      // D1 unreachable (the endpoints), say: the messages stay pending; try again shortly.
      log("error", "webhooks: a delivery run failed; retried", { error: errorField(err) });
      await this.expireAt(Date.now() + 5_000);
    }
  }

  /**
   * Batches until none is due, for at most RUN_MS an alarm run (a busy endpoint is not held to one
   * batch a second). Between batches it waits as long as the batch took: a queue draining a backlog
   * takes at most about half of its thread, and requests sharing it (one workerd locally) get the rest.
   */
  async #deliverDue(): Promise<void> {
    const started = Date.now();
    for (;;) {
      const batchStarted = Date.now();
      if ((await this.#deliverBatch()) < BATCH || Date.now() - started >= RUN_MS) break;
      await scheduler.wait(Math.max(1, Date.now() - batchStarted));
    }
    const next = this.sql
      .exec<{ n: number | null }>("SELECT MIN(next_at) AS n FROM messages WHERE status = 'pending'")
      .one().n;
    if (next !== null) await this.expireAt(Math.max(next, Date.now()));
  }

  /** One batch of due messages, attempted in parallel; how many there were. */
  async #deliverBatch(): Promise<number> {
    const now = Date.now();
    const due = this.sql
      .exec<MessageRow & Record<string, SqlStorageValue>>(
        `SELECT key, id, endpoint_id, tenant, type, body, attempts, first_at FROM messages
         WHERE status = 'pending' AND next_at <= ? ORDER BY next_at LIMIT ?`,
        now,
        BATCH,
      )
      .toArray();
    if (due.length) {
      const ids = [...new Set(due.map((m) => m.endpoint_id))];
      const { results } = await this.env.DB.prepare(
        "SELECT * FROM webhook_endpoints WHERE id IN (SELECT value FROM json_each(?))",
      )
        .bind(JSON.stringify(ids))
        .all<WebhookEndpointRow>();
      const endpoints = new Map(results.map((r) => [r.id, r]));
      const policy = webhookPolicy(this.env);
      // Each endpoint's secrets are unsealed once a batch, not once a message.
      const secrets = new Map<string, Promise<string[]>>();
      const secretsOf = (endpoint: WebhookEndpointRow, key: string) => {
        let s = secrets.get(endpoint.id);
        if (!s) {
          s = liveSecrets(key, endpoint, now);
          secrets.set(endpoint.id, s);
        }
        return s;
      };
      const outcomes = await Promise.all(
        due.map((m) => this.#attempt(m, endpoints.get(m.endpoint_id), policy.timeout_ms, secretsOf)),
      );
      const at = Date.now();
      this.ctx.storage.transactionSync(() => {
        for (const [i, m] of due.entries())
          this.#record(m, outcomes[i] as Outcome, at, policy.retry_window_seconds * 1000);
      });
      await this.#endpointHealth(due, outcomes, endpoints, at, policy);
    }
    return due.length;
  }

  async #attempt(
    m: MessageRow,
    endpoint: WebhookEndpointRow | undefined,
    timeoutMs: number,
    secretsOf: (endpoint: WebhookEndpointRow, key: string) => Promise<string[]>,
  ): Promise<Outcome> {
    if (!endpoint) return { status: 0, latency_ms: 0, error: "the endpoint was deleted", final: true };
    if (!endpoint.enabled) return { status: 0, latency_ms: 0, error: "the endpoint is disabled", final: true };
    const problem = webhookUrlProblem(endpoint.url, this.env.ENVIRONMENT === "production");
    if (problem) return { status: 0, latency_ms: 0, error: problem, final: true };
    const secret = this.env.KEY_ENCRYPTION_SECRET;
    if (!secret)
      return { status: 0, latency_ms: 0, error: "KEY_ENCRYPTION_SECRET is not set for the stores", ours: true };
    let secrets: string[];
    try {
      secrets = await secretsOf(endpoint, secret);
    } catch {
      return { status: 0, latency_ms: 0, error: "the endpoint's secret cannot be unsealed", ours: true };
    }
    const started = Date.now();
    try {
      const headers = await webhookHeaders(secrets, m.id, Math.floor(started / 1000), m.body);
      const res = await fetch(endpoint.url, {
        method: "POST",
        headers,
        body: m.body,
        redirect: "manual",
        signal: AbortSignal.timeout(timeoutMs),
      });
      await readCapped(res);
      const latency = Date.now() - started;
      if (res.status >= 200 && res.status < 300) return { status: res.status, latency_ms: latency, error: null };
      const why = res.status >= 300 && res.status < 400 ? "redirects are not followed" : `answered ${res.status}`;
      return { status: res.status, latency_ms: latency, error: why };
    } catch (err) {
      const timedOut = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");
      return {
        status: 0,
        latency_ms: Date.now() - started,
        error: timedOut
          ? `no answer within ${timeoutMs} ms`
          : err instanceof Error
            ? err.message.slice(0, 200)
            : "failed",
      };
    }
  }

  #record(m: MessageRow, o: Outcome, at: number, windowMs: number): void {
    const ok = o.error === null;
    if (ok) this.#ok++;
    else this.#failed++;
    const attempts = m.attempts + 1;
    let status: WebhookMessageStatus = "delivered";
    let next = at;
    if (!ok) {
      const end = m.first_at + windowMs;
      if (o.final || at >= end) status = "failed";
      else {
        status = "pending";
        const base = (BACKOFF_S[Math.min(attempts, BACKOFF_S.length) - 1] as number) * 1000;
        // ±20% jitter, so receivers coming back up are not hit by every retry at once.
        next = Math.min(end, at + Math.round(base * (0.8 + Math.random() * 0.4)));
      }
    }
    this.sql.exec(
      `UPDATE messages SET status = ?, attempts = ?, next_at = ?, last_status = ?, last_error = ?,
         expires_at = MAX(expires_at, ?) WHERE key = ?`,
      status,
      attempts,
      next,
      o.status,
      o.error,
      at + KEEP_MS,
      m.key,
    );
    this.sql.exec(
      "INSERT INTO attempts (message_key, endpoint_id, at, status, latency_ms, error, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      m.key,
      m.endpoint_id,
      at,
      o.status,
      o.latency_ms,
      o.error,
      at + KEEP_MS,
    );
  }

  /**
   * Each endpoint's run of failed attempts, in D1: reset by a delivery, grown by failures; past the
   * policy's threshold the endpoint is disabled, once, with a `webhook_disabled` audit event.
   */
  async #endpointHealth(
    due: MessageRow[],
    outcomes: Outcome[],
    endpoints: Map<string, WebhookEndpointRow>,
    at: number,
    policy: ReturnType<typeof webhookPolicy>,
  ): Promise<void> {
    const tally = new Map<string, { ok: number; failed: number }>();
    due.forEach((m, i) => {
      const o = outcomes[i] as Outcome;
      if (o.final || o.ours) return;
      const t = tally.get(m.endpoint_id) ?? { ok: 0, failed: 0 };
      if (o.error === null) t.ok++;
      else t.failed++;
      tally.set(m.endpoint_id, t);
    });
    for (const [id, t] of tally) {
      const endpoint = endpoints.get(id);
      if (!endpoint) continue;
      if (t.ok > 0) {
        // It answers again after failures: what waits for a retry need not wait out its backoff.
        if (endpoint.consecutive_failures > 0 || t.failed > 0) this.#bringBacklogForward(id, at);
        if (endpoint.consecutive_failures > 0)
          await this.env.DB.prepare(
            "UPDATE webhook_endpoints SET consecutive_failures = 0, failing_since = NULL WHERE id = ?",
          )
            .bind(id)
            .run();
        continue;
      }
      const row = await this.env.DB.prepare(
        `UPDATE webhook_endpoints SET consecutive_failures = consecutive_failures + ?,
           failing_since = COALESCE(failing_since, ?) WHERE id = ? AND enabled = 1
         RETURNING consecutive_failures, failing_since`,
      )
        .bind(t.failed, at, id)
        .first<{ consecutive_failures: number; failing_since: number }>();
      if (
        row &&
        row.consecutive_failures >= policy.disable_after_failures &&
        at - row.failing_since >= policy.disable_after_seconds * 1000
      ) {
        const reason = `${row.consecutive_failures} failed attempts in a row since ${new Date(row.failing_since).toISOString()}`;
        const { meta } = await this.env.DB.prepare(
          "UPDATE webhook_endpoints SET enabled = 0, disabled_reason = ?, updated_at = ? WHERE id = ? AND enabled = 1",
        )
          .bind(reason, at, id)
          .run();
        if (meta.changes) {
          this.ctx.storage.transactionSync(() =>
            this.recordAudit([
              auditEvent({
                kind: "webhook_disabled",
                tenant: endpoint.tenant,
                detail: { endpoint: id, url: endpoint.url, reason },
              }),
            ]),
          );
          await this.auditFlushSoon();
          log("warn", "webhooks: an endpoint was disabled", { endpoint: id, reason });
        }
      }
    }
  }

  /**
   * Issue 38 item 12a: a delivery to the endpoint has just succeeded, so its messages waiting for a
   * retry after failing for want of an answer (no answer, or a 5xx) are due now, each within
   * BRING_FORWARD_SPREAD_MS, instead of at their backoff step (up to 8 h after a short outage). Only
   * the schedule changes: each message is still one row, sent by this alarm alone, so none is sent
   * twice. A message refused with a 4xx or a 3xx keeps its backoff, and one message is brought forward
   * at most BRING_FORWARD_MAX times, so a receiver failing one message while it accepts the others is
   * not sent that message at the pace of the others.
   */
  #bringBacklogForward(endpointId: string, at: number): void {
    const brought = this.sql
      .exec(
        `UPDATE messages SET next_at = ? + ABS(RANDOM() % ?), brought_forward = brought_forward + 1
         WHERE endpoint_id = ? AND status = 'pending' AND next_at > ? AND attempts > 0
           AND (last_status = 0 OR last_status >= 500) AND brought_forward < ? RETURNING key`,
        at,
        BRING_FORWARD_SPREAD_MS,
        endpointId,
        at + BRING_FORWARD_SPREAD_MS,
        BRING_FORWARD_MAX,
      )
      .toArray().length;
    if (brought)
      log("info", "webhooks: an endpoint answers again; its backlog is due now", { endpoint: endpointId, brought });
  }
}
countVerbCalls(WebhookOutbox);

/** Reads at most ANSWER_CAP bytes of an answer, then lets the rest go. */
async function readCapped(res: Response): Promise<void> {
  const reader = res.body?.getReader();
  if (!reader) return;
  let read = 0;
  try {
    while (read < ANSWER_CAP) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
