import type { Context, Next } from "hono";
import {
  atOf,
  auditMonths,
  eventsOfRow,
  eventsTable,
  idOf,
  monthBounds,
  PAGE_SPAN_MS,
  type PagedEvent,
  pageEntries,
  pagesTable,
  ROW_SPAN_MS,
} from "../../../durable-objects/contract/audit-trail";
import { AUDIT_KINDS, type AuditEvent, type AuditKind } from "../../../durable-objects/contract/verbs";
import { audit, auditEmailKey } from "../../shared/events/audit";
import { normalizeEmail } from "../../shared/people/email";
import { OAuthError } from "../../shared/platform/errors";
import { json } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { queryLimit, readCursor, writeCursor } from "./validation";

const MAX_LIMIT = 1000;
export const AUDIT_PARAMS = new Set(["user", "email", "kind", "since", "until", "cursor", "limit"]);

/** An `audit_events` row as D1 returns it: the event, with `detail` still JSON text. */
type Row = Omit<AuditEvent, "detail"> & { detail: string | null };

const bad = (description: string) => new OAuthError("invalid_request", description);

/** A time bound: epoch milliseconds or an ISO 8601 date. */
function time(name: string, value: string | undefined): number | null {
  if (value === undefined) return null;
  const ms = /^[0-9]{1,15}$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isFinite(ms)) throw bad(`${name} must be epoch milliseconds or an ISO 8601 date`);
  return ms;
}

/** Where the previous page ended: the last event's (at, id). */
const isPosition = (c: unknown): c is { at: number; id: string } => {
  const p = c as { at?: unknown; id?: unknown } | null;
  return (
    typeof p === "object" &&
    p !== null &&
    typeof p.at === "number" &&
    Number.isSafeInteger(p.at) &&
    typeof p.id === "string" &&
    p.id.length <= 64
  );
};

/**
 * The legacy table's page query (schema/0013: events from before the monthly tables). Its key is
 * (tenant, at, id), which SQLite's planner, without statistics, prefers even for one user's events in
 * a large tenant: a lookup by user or email names its index.
 */
export function auditListSql(where: string[], by: "user" | "email" | null): string {
  const index = by ? ` INDEXED BY audit_events_by_${by}` : "";
  return `SELECT id, at, kind, user_id, email_key, client_id, ip, detail FROM audit_events${index}
     ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY at DESC, id DESC LIMIT ?`;
}

/** Newest first: by time, then id. */
const newestFirst = (a: Row, b: Row) => b.at - a.at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

interface Filter {
  tenant: string;
  kinds: string[] | null;
  /** Inclusive lower and exclusive upper time bounds, retention and the cursor applied. */
  from: number;
  to: number;
  cursor: { at: number; id: string } | null;
}

const passes = (f: Filter, r: { at: number; id: string; kind: string }) =>
  r.at >= f.from &&
  r.at < f.to &&
  (!f.cursor || r.at < f.cursor.at || (r.at === f.cursor.at && r.id < f.cursor.id)) &&
  (!f.kinds || f.kinds.includes(r.kind));

/** SQL conditions and binds for a month's events table or the legacy one. */
function conditions(f: Filter): { where: string[]; binds: (string | number)[] } {
  const where = ["tenant = ?", "at >= ?", "at < ?"];
  const binds: (string | number)[] = [f.tenant, f.from, f.to];
  if (f.kinds) {
    where.push(`kind IN (${f.kinds.map(() => "?").join(", ")})`);
    binds.push(...f.kinds);
  }
  if (f.cursor) {
    where.push("(at < ? OR (at = ? AND id < ?))");
    binds.push(f.cursor.at, f.cursor.at, f.cursor.id);
  }
  return { where, binds };
}

/**
 * A month's events of some subjects (a user, an address): ranges of its key. A row holds a login's
 * events (issue 44), keyed by its first, the others at most ROW_SPAN_MS after it: rows are read
 * newest first from ROW_SPAN_MS past the upper bound, their events filtered, until `n` are found
 * newer than any row left could hold.
 */
async function subjectEvents(db: D1Database, month: string, subjects: string[], f: Filter, n: number): Promise<Row[]> {
  const found: Row[] = [];
  const top = (f.cursor ? Math.min(f.to, f.cursor.at + 1) : f.to) + ROW_SPAN_MS;
  let before: { at: number; id: string } | null = null;
  for (;;) {
    const { results }: D1Result<Row & { more: string | null }> = await db
      .prepare(
        `SELECT id, at, kind, user_id, email_key, client_id, ip, detail, more FROM ${eventsTable(month)}
         WHERE tenant = ? AND subject IN (${subjects.map(() => "?").join(", ")}) AND at >= ? AND at < ?
         ${before ? "AND (at < ? OR (at = ? AND id < ?))" : ""} ORDER BY at DESC, id DESC LIMIT ${ROWS_PER_READ}`,
      )
      .bind(f.tenant, ...subjects, f.from - ROW_SPAN_MS, top, ...(before ? [before.at, before.at, before.id] : []))
      .all();
    for (const r of results) for (const e of eventsOfRow(r)) if (passes(f, e)) found.push(e as Row);
    const last: { at: number; id: string } | undefined = results.at(-1);
    if (!last || results.length < ROWS_PER_READ) break;
    found.sort(newestFirst);
    const nth = found[n - 1];
    if (nth && nth.at > last.at + ROW_SPAN_MS) break;
    before = { at: last.at, id: last.id };
  }
  return found.sort(newestFirst).slice(0, n);
}

const ROWS_PER_READ = 200;

/**
 * A month's events of the whole tenant, from its pages, newest page first. A page ends less than
 * PAGE_SPAN_MS after its first event, so the pages read start there; reading stops once `n` events
 * are found that are newer than every page left. The events found are then read by their keys.
 */
async function tenantEvents(db: D1Database, month: string, f: Filter, n: number): Promise<Row[]> {
  const found: PagedEvent[] = [];
  const newer = (a: PagedEvent, b: PagedEvent) =>
    atOf(b) - atOf(a) || (idOf(a) < idOf(b) ? 1 : idOf(a) > idOf(b) ? -1 : 0);
  let before: { at: number; id: string } | null = null;
  const top = (f.cursor ? Math.min(f.to, f.cursor.at + 1) : f.to) + PAGE_SPAN_MS;
  for (;;) {
    const { results }: D1Result<{ at: number; id: string; events: string }> = await db
      .prepare(
        `SELECT at, id, events FROM ${pagesTable(month)} WHERE tenant = ? AND at >= ? AND at < ?
         ${before ? "AND (at < ? OR (at = ? AND id < ?))" : ""} ORDER BY at DESC, id DESC LIMIT ${PAGES_PER_READ}`,
      )
      .bind(f.tenant, f.from, top, ...(before ? [before.at, before.at, before.id] : []))
      .all();
    for (const page of results)
      for (const e of pageEntries(page.events)) if (passes(f, { at: atOf(e), id: idOf(e), kind: e[3] })) found.push(e);
    const last: { at: number; id: string } | undefined = results.at(-1);
    if (!last || results.length < PAGES_PER_READ) break;
    found.sort(newer);
    const nth = found[n - 1];
    // Every page left ends at or before `last.at`: none holds an event newer than the nth found.
    if (nth && atOf(nth) > last.at) break;
    before = { at: last.at, id: last.id };
  }
  // Two flushes racing on a login's row may both have listed an event (audit-trail.ts): once here.
  const seen = new Set<string>();
  const keys = found
    .sort(newer)
    .filter((e) => !seen.has(idOf(e)) && seen.add(idOf(e)) !== undefined)
    .slice(0, n);
  if (keys.length === 0) return [];
  const wanted = new Set(keys.map(idOf));
  // The list drives (CROSS JOIN): each row one seek of the month's key; its events picked by id.
  const rowKeys = [...new Map(keys.map((e) => [`${e[0]} ${e[1]} ${e[2]}`, [e[0], e[1], e[2]]])).values()];
  const { results } = await db
    .prepare(
      `SELECT a.id, a.at, a.kind, a.user_id, a.email_key, a.client_id, a.ip, a.detail, a.more
       FROM json_each(?) AS j CROSS JOIN ${eventsTable(month)} AS a
       WHERE a.tenant = ? AND a.subject = json_extract(j.value, '$[0]') AND a.at = json_extract(j.value, '$[1]')
         AND a.id = json_extract(j.value, '$[2]')`,
    )
    .bind(JSON.stringify(rowKeys), f.tenant)
    .all<Row & { more: string | null }>();
  return results
    .flatMap((r) => eventsOfRow(r) as Row[])
    .filter((e) => wanted.has(e.id))
    .sort(newestFirst);
}

const PAGES_PER_READ = 100;

/**
 * `GET /admin/v1/audit?user=&email=&kind=&since=&until=&cursor=&limit=`: the audit trail, newest
 * first. `kind` takes one kind or several, comma-separated; `email` is matched by its HMAC (the trail
 * holds no address), and with it the events of the user who has that address now; `since` is
 * inclusive and `until` exclusive. Events arrive within a few seconds (they are written in batches),
 * and are kept `audit_retention_days`. `next_cursor` is null on the last page.
 */
export async function listAudit(c: Context<AppEnv>): Promise<Response> {
  const q = c.req.query();
  for (const name of Object.keys(q)) if (!AUDIT_PARAMS.has(name)) throw bad(`unknown parameter ${name}`);
  const config = c.get("config");
  const db = c.env.DB;
  const tenant = config.TENANT;
  if (q.user !== undefined && !/^[A-Za-z0-9_-]{1,100}$/.test(q.user)) throw bad("user is not a user id");
  let email: { key: string; address: string } | null = null;
  if (q.email !== undefined) {
    const address = normalizeEmail(q.email);
    if (!address) throw bad("email is not a valid address");
    email = { key: await auditEmailKey(config, address), address };
  }
  let kinds: string[] | null = null;
  if (q.kind !== undefined) {
    kinds = q.kind.split(",");
    if (!kinds.every((k): k is AuditKind => (AUDIT_KINDS as readonly string[]).includes(k)))
      throw bad(`kind must be among ${AUDIT_KINDS.join(", ")}`);
  }
  const since = time("since", q.since);
  const until = time("until", q.until);
  const cursor = readCursor(q.cursor, isPosition);
  const limit = queryLimit(c, 100, MAX_LIMIT);
  const now = Date.now();
  const f: Filter = {
    tenant,
    kinds,
    from: Math.max(since ?? 0, now - config.POLICY.audit_retention_days * 86_400_000),
    to: until ?? Number.MAX_SAFE_INTEGER,
    cursor,
  };
  const upper = Math.min(f.to, cursor ? cursor.at + 1 : f.to);

  // Whose events: a user's, an address's (its HMAC, and its user's now), or the tenant's.
  let subjects: string[] | null = null;
  if (q.user !== undefined) subjects = [q.user];
  if (email) {
    const user = await db
      .prepare("SELECT id FROM users WHERE tenant = ? AND email = ?")
      .bind(tenant, email.address)
      .first<{ id: string }>();
    const own = [`e:${email.key}`, ...(user ? [user.id] : [])];
    subjects = subjects ? subjects.filter((s) => own.includes(s)) : own;
  }

  const n = limit + 1;
  const months = (await auditMonths(db)).filter((m) => {
    const { start, end } = monthBounds(m);
    return end > f.from && start < upper;
  });
  const fromMonths = await Promise.all(
    months.map((m) =>
      subjects === null
        ? tenantEvents(db, m, f, n)
        : subjects.length
          ? subjectEvents(db, m, subjects, f, n)
          : Promise.resolve([] as Row[]),
    ),
  );
  // Events from before the monthly tables (schema/0013), until retention has taken them all.
  const legacy = conditions(f);
  if (q.user !== undefined) {
    legacy.where.push("user_id = ?");
    legacy.binds.push(q.user);
  }
  if (email) {
    legacy.where.push("email_key = ?");
    legacy.binds.push(email.key);
  }
  const { results: older } = await db
    .prepare(auditListSql(legacy.where, q.user !== undefined ? "user" : email ? "email" : null))
    .bind(...legacy.binds, n)
    .all<Row>();

  const results = [...fromMonths.flat(), ...older].sort(newestFirst).slice(0, n);
  const page = results.slice(0, limit);
  const last = page.at(-1);
  return json({
    events: page.map((r) => ({
      id: r.id,
      at: new Date(r.at).toISOString(),
      kind: r.kind,
      user_id: r.user_id,
      email_key: r.email_key,
      client_id: r.client_id,
      ip: r.ip,
      detail: r.detail ? (JSON.parse(r.detail) as unknown) : null,
    })),
    next_cursor: results.length > limit && last ? writeCursor({ at: last.at, id: last.id }) : null,
  });
}

/** Every successful change through the admin API is an `admin_change` event (method, path, status). */
export async function auditAdminChanges(c: Context<AppEnv>, next: Next): Promise<void> {
  await next();
  if (c.req.method === "GET" || c.req.method === "HEAD" || c.req.method === "OPTIONS" || c.res.status >= 400) return;
  audit(c, {
    kind: "admin_change",
    detail: {
      method: c.req.method,
      path: new URL(c.req.url).pathname,
      status: c.res.status,
      ...(c.get("adminOperator") ? { operator: c.get("adminOperator") } : {}),
    },
  });
}
