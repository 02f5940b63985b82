import type { Context } from "hono";
import { z } from "zod";
import { randomToken } from "../../../../durable-objects/contract/crypto";
import { displayName } from "../../../shared/branding/display-name";
import type { Config } from "../../../shared/config/config";
import { normalizeEmail } from "../../../shared/people/email";
import { newUserId } from "../../../shared/people/users";
import { invalidRequest, OAuthError } from "../../../shared/platform/errors";
import { json, type StreamedBody, streamingBody } from "../../../shared/platform/http";
import type { AppEnv } from "../../../shared/request/context";
import { parseId } from "../../../shared/routing/ids";
import { shardAddress } from "../../../shared/routing/shard-refs";
import { rememberInShards } from "../users";
import { type EntityType, entityInput, entityTypes, grantInput } from "./model";
import {
  assignEntityShards,
  type GrantItem,
  type GrantSubject,
  resolveExternalIds,
  writeEntities,
  writeGrants,
} from "./service";

/**
 * Bulk import (issue 24): `POST /admin/v1/imports/{users|entities|grants}` with an NDJSON body, one
 * record a line. The body is read as a stream and each line validated as it arrives: only the
 * validated record is kept, and a batch of them is written at a time, each batch with one call per
 * shard it touches. A batch closes by lines or by bytes, so an import's memory stays flat whatever
 * its lines hold (issue 38). The job's row in D1 (`GET /admin/v1/imports/{id}`) shows its progress
 * after each batch, and the first errors by line. Every record is an upsert (users by address,
 * entities by `external_id`, grants by subject and target) and an unchanged one is not written: a
 * rerun changes nothing, and jobs may run in parallel. A malformed line is reported; the other lines
 * load.
 */

const KINDS = ["users", "entities", "grants"] as const;
type Kind = (typeof KINDS)[number];
/**
 * Lines a batch writes at once, by kind. Each batch commits once per shard it touches, and a commit is
 * what a local write costs most: larger batches, fewer commits (a grant touches two shards and D1).
 */
const BATCH: Record<Kind, number> = { users: 5_000, entities: 5_000, grants: 2_000 };
/**
 * Bytes of kept lines at which a batch closes whatever its count (issue 38): 5,000 lines of up to
 * 16 KB each would hold 80 MB of text, and more as objects, in a Worker that has 128 MB. A typical
 * line (a few hundred bytes) still fills a batch by its count.
 */
export const BATCH_BYTES = 1024 * 1024;
/** A job's lines, blank ones included: past it, the rest is refused (send it as another job); it keeps a request within a Worker's CPU limit. */
export const MAX_JOB_LINES = 200_000;
/**
 * A job's body: larger is 413 (on Content-Length, before a job starts, or when it is reached). 100 MB
 * is also what Cloudflare's network takes in one request on the Free and Pro plans.
 */
export const MAX_JOB_BYTES = 100 * 1024 * 1024;
export const MAX_LINE_BYTES = 16_384;
/** Errors kept on a job (its counts cover every line). */
const MAX_ERRORS = 100;
/**
 * How often a running job refreshes its heartbeat (`updated_at`) while it reads without closing a
 * batch; POLICY.import_stale_after_seconds decides when a silent one has died.
 */
const HEARTBEAT_MS = 3_000;

interface LineError {
  line: number;
  error: string;
}

interface Counts {
  lines: number;
  created: number;
  updated: number;
  unchanged: number;
  failed: number;
}

/** A validated record, with its line number. */
interface Kept<T> {
  line: number;
  record: T;
}

const userLine = z
  .object({
    email: z.string().max(254),
    name: displayName(200).optional(),
  })
  .strict();

type UserRecord = { email: string; name: string | null };
type EntityRecord = z.infer<typeof entityInput>;
type GrantRecord = z.infer<typeof grantInput>;

export interface ImportJob extends Counts {
  id: string;
  kind: Kind;
  /**
   * `interrupted`: the job stopped without finishing, its Worker gone (a crash, a deploy); its counts
   * are what it had written, through a line all of whose predecessors are written or failed.
   */
  status: "running" | "done" | "incomplete" | "failed" | "interrupted";
  errors: LineError[];
  started_at: number;
  /** The job's heartbeat while it runs (issue 38); its last change once it ends. */
  updated_at: number;
  finished_at: number | null;
}

const jobOf = (row: Record<string, unknown>): ImportJob => {
  const { tenant: _, errors, ...rest } = row;
  return { ...(rest as Omit<ImportJob, "errors">), errors: JSON.parse(errors as string) as LineError[] };
};

/**
 * Marks `interrupted` the running jobs (of `tenant`, or of every tenant) whose heartbeat is older than
 * the policy's bound (issue 38): their Worker died mid-request, and nothing else will end them. A live
 * job refreshes its heartbeat well within the bound. Its counts stay as its last batch left them.
 */
export async function markInterruptedImports(
  env: AppEnv["Bindings"],
  config: Config,
  now: number,
  tenant?: string,
): Promise<number> {
  const staleBefore = now - config.POLICY.import_stale_after_seconds * 1000;
  const { meta } = await env.DB.prepare(
    `UPDATE import_jobs SET status = 'interrupted', finished_at = ?1
     WHERE status = 'running' AND updated_at < ?2 AND (?3 IS NULL OR tenant = ?3)`,
  )
    .bind(now, staleBefore, tenant ?? null)
    .run();
  return meta.changes ?? 0;
}

export async function getImport(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  await markInterruptedImports(c.env, config, Date.now(), config.TENANT);
  const row = await c.env.DB.prepare("SELECT * FROM import_jobs WHERE id = ? AND tenant = ?")
    .bind(c.req.param("id") ?? "", config.TENANT)
    .first();
  if (!row) throw new OAuthError("not_found", "no such import job");
  return json(jobOf(row));
}

export async function listImports(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  await markInterruptedImports(c.env, config, Date.now(), config.TENANT);
  const { results } = await c.env.DB.prepare(
    "SELECT * FROM import_jobs WHERE tenant = ? ORDER BY started_at DESC LIMIT 100",
  )
    .bind(config.TENANT)
    .all();
  return json({ imports: results.map(jobOf) });
}

/** A line as read: its number (from 1), its size in bytes, and its text, `null` when longer than MAX_LINE_BYTES. */
interface ReadLine {
  n: number;
  bytes: number;
  text: string | null;
}

// No BOM stripping per line: only the body's first line may start with one (stripped below).
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A line's bytes are not UTF-8 (RFC 8259 §8.1: JSON exchanged between systems is UTF-8). */
class NotUtf8 extends Error {}

/**
 * Splits a body into lines on its `\n` bytes (a multi-byte UTF-8 character never holds one), numbered
 * from 1 (a final line without a newline counts). A line is decoded on its own, so invalid UTF-8 is
 * placed by its line. A line longer than MAX_LINE_BYTES is `null`: its bytes are counted and dropped
 * as they arrive, never held.
 */
async function* lines(body: StreamedBody): AsyncGenerator<ReadLine> {
  let parts: Uint8Array[] = [];
  let size = 0;
  let n = 0;
  const end = (): ReadLine => {
    n++;
    const line = { n, bytes: size, text: null as string | null };
    if (size <= MAX_LINE_BYTES) {
      const whole = new Uint8Array(size);
      let at = 0;
      for (const p of parts) {
        whole.set(p, at);
        at += p.byteLength;
      }
      try {
        line.text = utf8.decode(whole);
      } catch {
        throw new NotUtf8(`line ${n}`);
      }
      if (n === 1 && line.text.startsWith("\uFEFF")) line.text = line.text.slice(1);
    }
    parts = [];
    size = 0;
    return line;
  };
  try {
    for (;;) {
      const chunk = await body.read();
      if (chunk === null) {
        if (size > 0) yield end();
        return;
      }
      let from = 0;
      for (;;) {
        const at = chunk.indexOf(0x0a, from);
        const piece = chunk.subarray(from, at < 0 ? chunk.length : at);
        size += piece.byteLength;
        if (size > MAX_LINE_BYTES) parts = [];
        // The end of a chunk is copied: a kept piece never holds the rest of its chunk in memory.
        else if (piece.byteLength) parts.push(at < 0 ? piece.slice() : piece);
        if (at < 0) break;
        yield end();
        from = at + 1;
      }
    }
  } finally {
    await body.cancel();
  }
}

/** A line that is not a record of its kind, and why. */
class Invalid {
  constructor(readonly reason: string) {}
}

/** A kind's import, with its batch: each line's JSON is validated as it is read, and only the record kept. */
interface Importer {
  /** Validates a line's JSON and keeps its record, or says why not; whether the batch is now full. */
  take(line: number, value: unknown, bytes: number): Invalid | boolean;
  /** Writes what is kept, if anything (whether it did); the next batch starts empty. */
  flush(): Promise<boolean>;
}

/** A batch that closes by lines or by bytes, whichever first. */
class Batcher<T> implements Importer {
  private kept: Kept<T>[] = [];
  private bytes = 0;
  constructor(
    private readonly maxLines: number,
    private readonly validate: (value: unknown) => T | Invalid,
    private readonly write: (batch: Kept<T>[]) => Promise<void>,
  ) {}
  take(line: number, value: unknown, bytes: number): Invalid | boolean {
    const record = this.validate(value);
    if (record instanceof Invalid) return record;
    this.kept.push({ line, record });
    this.bytes += bytes;
    return this.kept.length >= this.maxLines || this.bytes >= BATCH_BYTES;
  }
  async flush(): Promise<boolean> {
    const batch = this.kept;
    this.kept = [];
    this.bytes = 0;
    if (batch.length === 0) return false;
    await this.write(batch);
    return true;
  }
}

export async function runImport(c: Context<AppEnv>): Promise<Response> {
  const kind = c.req.param("kind") as Kind;
  if (!(KINDS as readonly string[]).includes(kind))
    throw new OAuthError("not_found", "imports are of users, entities or grants");
  const type = (c.req.header("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "application/x-ndjson" && type !== "application/jsonl")
    throw new OAuthError("unsupported_media_type", "the body must be application/x-ndjson, one JSON record a line");
  const body = streamingBody(c.req.raw, MAX_JOB_BYTES);
  if (!body) throw new OAuthError("invalid_request", "the body is empty");
  const config = c.get("config");
  const tenant = config.TENANT;
  const now = Date.now();
  const job: ImportJob = {
    id: `imp_${randomToken(12)}`,
    kind,
    status: "running",
    lines: 0,
    created: 0,
    updated: 0,
    unchanged: 0,
    failed: 0,
    errors: [],
    started_at: now,
    updated_at: now,
    finished_at: null,
  };
  await c.env.DB.prepare(
    "INSERT INTO import_jobs (id, tenant, kind, status, started_at, updated_at) VALUES (?, ?, ?, 'running', ?, ?)",
  )
    .bind(job.id, tenant, kind, now, now)
    .run();
  const types = kind === "users" ? new Map<string, EntityType>() : await entityTypes(c.env, tenant);
  const fail = (line: number, error: string) => {
    job.failed++;
    if (job.errors.length < MAX_ERRORS) job.errors.push({ line, error });
  };
  const save = () =>
    c.env.DB.prepare(
      `UPDATE import_jobs SET status = ?, lines = ?, created = ?, updated = ?, unchanged = ?, failed = ?, errors = ?,
         updated_at = ?, finished_at = ? WHERE id = ?`,
    )
      .bind(
        job.status,
        job.lines,
        job.created,
        job.updated,
        job.unchanged,
        job.failed,
        JSON.stringify(job.errors),
        job.updated_at,
        job.finished_at,
        job.id,
      )
      .run();
  // Only the heartbeat: the counts in the row stay those of the last batch written, so an interrupted
  // job's row says what it had done.
  const heartbeat = async () => {
    job.updated_at = Date.now();
    await c.env.DB.prepare("UPDATE import_jobs SET updated_at = ? WHERE id = ? AND status = 'running'")
      .bind(job.updated_at, job.id)
      .run();
  };
  const batcher = importerFor(c, kind, types, job, fail);
  const flush = async () => {
    if (!(await batcher.flush())) return;
    job.updated_at = Date.now();
    await save();
  };
  /** The body's own fault (encoding, size, time): the client's error, answered as such. */
  let refused: OAuthError | null = null;
  let reading = 1;
  try {
    try {
      for await (const { n, bytes, text } of lines(body)) {
        reading = n + 1;
        if (Date.now() - job.updated_at >= HEARTBEAT_MS) await heartbeat();
        // Blank lines count: a body of nothing but newlines is bounded like any other.
        if (n > MAX_JOB_LINES) {
          job.status = "incomplete";
          fail(n, `a job takes at most ${MAX_JOB_LINES} lines; send the rest in another job`);
          break;
        }
        if (text !== null && !text.trim()) continue;
        job.lines++;
        if (text === null) {
          fail(n, `a line is at most ${MAX_LINE_BYTES} bytes`);
          continue;
        }
        let value: unknown;
        try {
          value = JSON.parse(text);
        } catch {
          fail(n, "not a JSON record");
          continue;
        }
        const taken = batcher.take(n, value, bytes);
        if (taken instanceof Invalid) fail(n, taken.reason);
        else if (taken) await flush();
      }
    } catch (err) {
      if (err instanceof NotUtf8) {
        job.lines++;
        refused = invalidRequest("the body is not valid UTF-8");
      } else if (err instanceof OAuthError && err.status < 500) refused = err;
      else throw err;
      job.status = "failed";
      fail(reading, refused.description ?? refused.code);
    }
    // The valid lines before a refused one are written too, so the job's counts are what is stored.
    await flush();
    if (job.status === "running") job.status = "done";
  } catch (err) {
    // What was written stays written (a rerun of the same file finishes the job); the job says where it stopped.
    job.status = "failed";
    fail(
      job.lines,
      err instanceof OAuthError ? err.message : "the import stopped: a store did not answer; run it again",
    );
    refused = null;
  }
  job.finished_at = job.updated_at = Date.now();
  await save();
  if (refused)
    throw new OAuthError(
      refused.code,
      `line ${reading}: ${refused.description ?? refused.code}; import job ${job.id} stopped there, with the lines before it loaded`,
      refused.options,
    );
  return json(job, job.status === "failed" ? 503 : 200, job.status === "failed" ? { "Retry-After": "5" } : {});
}

/** The kind's validation and writes, with its batch. */
function importerFor(
  c: Context<AppEnv>,
  kind: Kind,
  types: Map<string, EntityType>,
  job: Counts,
  fail: Fail,
): Importer {
  if (kind === "users")
    return new Batcher<UserRecord>(BATCH.users, validateUser, (batch) => importUsers(c, batch, job));
  if (kind === "entities")
    return new Batcher<EntityRecord>(
      BATCH.entities,
      (value) => validateEntity(types, value),
      (batch) => importEntities(c, batch, job, fail),
    );
  return new Batcher<GrantRecord>(
    BATCH.grants,
    (value) => {
      const parsed = grantInput.safeParse(value);
      return parsed.success ? parsed.data : new Invalid(issues(parsed.error));
    },
    (batch) => importGrants(c, types, batch, job, fail),
  );
}

type Fail = (line: number, error: string) => void;

function issues(err: z.ZodError): string {
  return err.issues.map((i) => `${i.path.join(".") || "record"}: ${i.message}`).join("; ");
}

function validateUser(value: unknown): UserRecord | Invalid {
  const parsed = userLine.safeParse(value);
  if (!parsed.success) return new Invalid(issues(parsed.error));
  const email = normalizeEmail(parsed.data.email);
  if (!email) return new Invalid("email: not a valid address");
  return { email, name: parsed.data.name ?? null };
}

function validateEntity(types: Map<string, EntityType>, value: unknown): EntityRecord | Invalid {
  const parsed = entityInput.safeParse(value);
  if (!parsed.success) return new Invalid(issues(parsed.error));
  if (!types.has(parsed.data.type)) return new Invalid(`type: no entity type ${parsed.data.type}`);
  if (!parsed.data.external_id) return new Invalid("external_id: required in an import (it makes a rerun an update)");
  return parsed.data;
}

async function importUsers(c: Context<AppEnv>, batch: Kept<UserRecord>[], job: Counts) {
  const valid = new Map<string, UserRecord>();
  for (const { record } of batch) {
    // A later line for the same address wins, as a rerun would.
    if (valid.has(record.email)) job.unchanged++;
    valid.set(record.email, record);
  }
  const now = Date.now();
  const rows = [...valid.values()].map((u) => ({ id: newUserId(), email: u.email, name: u.name }));
  // One statement for the batch (one bound JSON array, not a parameter per field: D1 takes 100).
  const { results } = await c.env.DB.prepare(
    `INSERT INTO users (id, tenant, email, name, created_at, updated_at)
     SELECT j.value ->> 'id', ?1, j.value ->> 'email', j.value ->> 'name', ?2, ?2 FROM json_each(?3) AS j WHERE true
     ON CONFLICT(tenant, email) DO UPDATE SET name = excluded.name, updated_at = excluded.updated_at
       WHERE excluded.name IS NOT NULL AND users.name IS NOT excluded.name
     RETURNING id, email, created_at`,
  )
    .bind(c.get("config").TENANT, now, JSON.stringify(rows))
    .all<{ id: string; email: string; created_at: number }>();
  const ours = new Set(rows.map((r) => r.id));
  const created = results.filter((r) => ours.has(r.id));
  job.created += created.length;
  job.updated += results.length - created.length;
  job.unchanged += rows.length - results.length;
  await rememberInShards(c, created, now);
}

async function importEntities(c: Context<AppEnv>, batch: Kept<EntityRecord>[], job: Counts, fail: Fail) {
  const results = await writeEntities(
    c.env,
    c.get("config"),
    batch.map((i) => i.record),
    Date.now(),
  );
  results.forEach((r, i) => {
    const line = (batch[i] as Kept<EntityRecord>).line;
    if (r.status === "created") job.created++;
    else if (r.status === "updated") job.updated++;
    else if (r.status === "unchanged") job.unchanged++;
    else fail(line, r.status === "type_conflict" ? "external_id: an entity of another type has it" : "not found");
  });
}

async function importGrants(
  c: Context<AppEnv>,
  types: Map<string, EntityType>,
  batch: Kept<GrantRecord>[],
  job: Counts,
  fail: Fail,
) {
  const config = c.get("config");
  const parsed = batch.map(({ line, record }) => ({ line, g: record }));
  // The users, by id or address, in one D1 read; those without a grants shard get one.
  const emails = parsed.flatMap((p) => (p.g.email !== undefined ? [normalizeEmail(p.g.email) ?? ""] : []));
  const ids = parsed.flatMap((p) => (p.g.user_id !== undefined ? [p.g.user_id] : []));
  const users =
    emails.length + ids.length === 0
      ? []
      : (
          await c.env.DB.prepare(
            // The listed ids and addresses looked up by key: CROSS JOIN makes SQLite loop over the list
            // (with `IN (SELECT ... json_each)` or a plain join it scanned the tenant's million users).
            `SELECT u.id, u.email, u.entity_shard FROM json_each(?2) AS j CROSS JOIN users AS u ON u.id = j.value AND u.tenant = ?1
             UNION SELECT u.id, u.email, u.entity_shard FROM json_each(?3) AS j CROSS JOIN users AS u ON u.tenant = ?1 AND u.email = j.value`,
          )
            .bind(config.TENANT, JSON.stringify(ids), JSON.stringify(emails))
            .all<{ id: string; email: string; entity_shard: string | null }>()
        ).results;
  const shards = await assignEntityShards(c.env, config, users);
  const byId = new Map(users.map((u) => [u.id, u]));
  const byEmail = new Map(users.map((u) => [u.email, u]));
  const externals = await resolveExternalIds(
    c.env,
    config,
    parsed.flatMap((p) => [p.g.entity_external_id, p.g.target_external_id].filter((v): v is string => v !== undefined)),
  );
  const items: { line: number; item: GrantItem }[] = [];
  for (const { line, g } of parsed) {
    let subject: GrantSubject | null = null;
    if (g.user_id !== undefined || g.email !== undefined) {
      const u = g.user_id !== undefined ? byId.get(g.user_id) : byEmail.get(normalizeEmail(g.email as string) ?? "");
      const shard = u ? shards.get(u.id) : undefined;
      if (u && shard) subject = { kind: "user", id: u.id, email: u.email, entity_shard: shard };
    } else {
      const id = g.entity_id ?? externals.get(g.entity_external_id as string)?.id;
      const ref = id ? parseId(config, "entity", id)?.ref : undefined;
      if (id && ref) subject = { kind: "entity", id, entity_shard: shardAddress(ref) };
    }
    if (!subject) {
      fail(line, "no such subject");
      continue;
    }
    const target = g.target_id ?? externals.get(g.target_external_id as string)?.id;
    if (!target) {
      fail(line, "no such target entity");
      continue;
    }
    items.push({ line, item: { subject, target, roles: g.roles, permissions: g.permissions } });
  }
  if (items.length === 0) return;
  const outcomes = await writeGrants(
    c.env,
    config,
    types,
    items.map((i) => i.item),
    Date.now(),
  );
  outcomes.forEach((o, i) => {
    if (o.status === "created") job.created++;
    else if (o.status === "updated") job.updated++;
    else if (o.status === "unchanged") job.unchanged++;
    else if (o.status === "error") fail((items[i] as { line: number }).line, o.error);
  });
}
