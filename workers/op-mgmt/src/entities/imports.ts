import type { Context } from "hono";
import { z } from "zod";
import type { AppEnv } from "../../../shared/app";
import { randomToken } from "../../../shared/crypto";
import { displayName } from "../../../shared/display-name";
import { normalizeEmail } from "../../../shared/email";
import { OAuthError } from "../../../shared/errors";
import { json, streamingBody } from "../../../shared/http";
import { parseId, shardAddress } from "../../../shared/router";
import { newUserId } from "../../../shared/users";
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
 * record a line. The body is read as a stream and written a batch of lines at a time, each batch with
 * one call per shard it touches; the job's row in D1 (`GET /admin/v1/imports/{id}`) shows its
 * progress after each batch, and the first errors by line. Every record is an upsert (users by
 * address, entities by `external_id`, grants by subject and target) and an unchanged one is not
 * written: a rerun changes nothing, and jobs may run in parallel. A malformed line is reported; the
 * other lines load.
 */

const KINDS = ["users", "entities", "grants"] as const;
type Kind = (typeof KINDS)[number];
/**
 * Lines a batch writes at once, by kind. Each batch commits once per shard it touches, and a commit is
 * what a local write costs most: larger batches, fewer commits (a grant touches two shards and D1).
 */
const BATCH: Record<Kind, number> = { users: 5_000, entities: 5_000, grants: 2_000 };
/** A job's lines: past it, the rest is refused (send it as another job); it keeps a request within a Worker's CPU limit. */
export const MAX_JOB_LINES = 200_000;
const MAX_LINE_BYTES = 16_384;
/** Errors kept on a job (its counts cover every line). */
const MAX_ERRORS = 100;

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

interface Line {
  line: number;
  value: unknown;
}

const userLine = z
  .object({
    email: z.string().max(254),
    name: displayName(200).optional(),
  })
  .strict();

export interface ImportJob extends Counts {
  id: string;
  kind: Kind;
  status: "running" | "done" | "incomplete" | "failed";
  errors: LineError[];
  started_at: number;
  updated_at: number;
  finished_at: number | null;
}

const jobOf = (row: Record<string, unknown>): ImportJob => {
  const { tenant: _, errors, ...rest } = row;
  return { ...(rest as Omit<ImportJob, "errors">), errors: JSON.parse(errors as string) as LineError[] };
};

export async function getImport(c: Context<AppEnv>): Promise<Response> {
  const row = await c.env.DB.prepare("SELECT * FROM import_jobs WHERE id = ? AND tenant = ?")
    .bind(c.req.param("id") ?? "", c.get("config").TENANT)
    .first();
  if (!row) throw new OAuthError("not_found", "no such import job");
  return json(jobOf(row));
}

export async function listImports(c: Context<AppEnv>): Promise<Response> {
  const { results } = await c.env.DB.prepare(
    "SELECT * FROM import_jobs WHERE tenant = ? ORDER BY started_at DESC LIMIT 100",
  )
    .bind(c.get("config").TENANT)
    .all();
  return json({ imports: results.map(jobOf) });
}

/**
 * Splits a byte stream into lines, numbered from 1 (a final line without a newline counts). A line
 * longer than MAX_LINE_BYTES is `null`, skipped without being held.
 */
async function* lines(body: ReadableStream<Uint8Array>): AsyncGenerator<{ n: number; text: string | null }> {
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
  let rest = "";
  let n = 0;
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    let chunk: string;
    try {
      chunk = done ? decoder.decode() : decoder.decode(value, { stream: true });
    } catch {
      throw new OAuthError("invalid_request", `the body is not valid UTF-8 after line ${n}`);
    }
    rest += chunk;
    let at = rest.indexOf("\n");
    while (at >= 0) {
      yield { n: ++n, text: rest.slice(0, at) };
      rest = rest.slice(at + 1);
      at = rest.indexOf("\n");
    }
    if (rest.length > MAX_LINE_BYTES) {
      yield { n: ++n, text: null };
      // The rest of that line is dropped as it arrives.
      for (;;) {
        const next = await reader.read();
        if (next.done) return;
        const text = decoder.decode(next.value, { stream: true });
        const end = text.indexOf("\n");
        if (end >= 0) {
          rest = text.slice(end + 1);
          break;
        }
      }
    }
    if (done) {
      if (rest.length) yield { n: ++n, text: rest };
      return;
    }
  }
}

export async function runImport(c: Context<AppEnv>): Promise<Response> {
  const kind = c.req.param("kind") as Kind;
  if (!(KINDS as readonly string[]).includes(kind))
    throw new OAuthError("not_found", "imports are of users, entities or grants");
  const type = (c.req.header("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "application/x-ndjson" && type !== "application/jsonl")
    throw new OAuthError("unsupported_media_type", "the body must be application/x-ndjson, one JSON record a line");
  const body = streamingBody(c.req.raw);
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
  const flush = async (batch: Line[]) => {
    if (batch.length === 0) return;
    if (kind === "users") await importUsers(c, batch, job, fail);
    else if (kind === "entities") await importEntities(c, types, batch, job, fail);
    else await importGrants(c, types, batch, job, fail);
    job.updated_at = Date.now();
    await save();
  };
  let batch: Line[] = [];
  try {
    for await (const { n, text } of lines(body)) {
      if (text !== null && !text.trim()) continue;
      if (n > MAX_JOB_LINES) {
        job.status = "incomplete";
        fail(n, `a job takes at most ${MAX_JOB_LINES} lines; send the rest in another job`);
        break;
      }
      job.lines++;
      if (text === null || text.length > MAX_LINE_BYTES) {
        fail(n, `a line is at most ${MAX_LINE_BYTES} bytes`);
        continue;
      }
      try {
        batch.push({ line: n, value: JSON.parse(text) });
      } catch {
        fail(n, "not a JSON record");
        continue;
      }
      if (batch.length >= BATCH[kind]) {
        await flush(batch);
        batch = [];
      }
    }
    await flush(batch);
    if (job.status === "running") job.status = "done";
  } catch (err) {
    // What was written stays written (a rerun of the same file finishes the job); the job says where it stopped.
    job.status = "failed";
    fail(
      job.lines,
      err instanceof OAuthError ? err.message : "the import stopped: a store did not answer; run it again",
    );
  }
  job.finished_at = job.updated_at = Date.now();
  await save();
  return json(job, job.status === "failed" ? 503 : 200, job.status === "failed" ? { "Retry-After": "5" } : {});
}

type Fail = (line: number, error: string) => void;

function issues(err: z.ZodError): string {
  return err.issues.map((i) => `${i.path.join(".") || "record"}: ${i.message}`).join("; ");
}

async function importUsers(c: Context<AppEnv>, batch: Line[], job: Counts, fail: Fail) {
  const valid = new Map<string, { email: string; name: string | null; line: number }>();
  for (const l of batch) {
    const parsed = userLine.safeParse(l.value);
    if (!parsed.success) {
      fail(l.line, issues(parsed.error));
      continue;
    }
    const email = normalizeEmail(parsed.data.email);
    if (!email) {
      fail(l.line, "email: not a valid address");
      continue;
    }
    // A later line for the same address wins, as a rerun would.
    if (valid.has(email)) job.unchanged++;
    valid.set(email, { email, name: parsed.data.name ?? null, line: l.line });
  }
  if (valid.size === 0) return;
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

async function importEntities(
  c: Context<AppEnv>,
  types: Map<string, EntityType>,
  batch: Line[],
  job: Counts,
  fail: Fail,
) {
  const items: { line: number; input: z.infer<typeof entityInput> }[] = [];
  for (const l of batch) {
    const parsed = entityInput.safeParse(l.value);
    if (!parsed.success) fail(l.line, issues(parsed.error));
    else if (!types.has(parsed.data.type)) fail(l.line, `type: no entity type ${parsed.data.type}`);
    else if (!parsed.data.external_id) fail(l.line, "external_id: required in an import (it makes a rerun an update)");
    else items.push({ line: l.line, input: parsed.data });
  }
  if (items.length === 0) return;
  const results = await writeEntities(
    c.env,
    c.get("config"),
    items.map((i) => i.input),
    Date.now(),
  );
  results.forEach((r, i) => {
    const line = (items[i] as { line: number }).line;
    if (r.status === "created") job.created++;
    else if (r.status === "updated") job.updated++;
    else if (r.status === "unchanged") job.unchanged++;
    else fail(line, r.status === "type_conflict" ? "external_id: an entity of another type has it" : "not found");
  });
}

async function importGrants(
  c: Context<AppEnv>,
  types: Map<string, EntityType>,
  batch: Line[],
  job: Counts,
  fail: Fail,
) {
  const config = c.get("config");
  const parsed: { line: number; g: z.infer<typeof grantInput> }[] = [];
  for (const l of batch) {
    const p = grantInput.safeParse(l.value);
    if (p.success) parsed.push({ line: l.line, g: p.data });
    else fail(l.line, issues(p.error));
  }
  if (parsed.length === 0) return;
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
