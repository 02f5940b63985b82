/**
 * The audit trail in D1, by month (issue 28). Each month has two tables, made by the first flush that
 * has an event of that month:
 *
 * - `audit_<yyyymm>`: one row per event, keyed (tenant, subject, at, id) WITHOUT ROWID, where the
 *   subject is the user, or `e:<email HMAC>` for an event with an address and no user, or `-`. A
 *   user's or an address's events are a range of the key, and an event is one billed row: no index.
 * - `audit_pages_<yyyymm>`: the events of one flush, one tenant and one minute, as one row keyed
 *   (tenant, at, id) (`at` the page's newest event, `id` its first event's) that lists each event's
 *   key and kind (`[subject, at, id, kind]`). The tenant's trail by time, the kind filter and the
 *   sign-in count read these: a flush of n events writes one page row, not n index entries.
 *
 * Retention drops a month's two tables once the whole month is past it: `DROP TABLE` writes no
 * billed row, where deleting the events wrote one each. `audit_events` (schema/0003, 0013) holds the
 * events from before, read beside the months and deleted by retention as before until it is empty.
 */

/** A page holds at most a minute of events, so the events before a time are in pages ending less than a minute after it. */
export const PAGE_SPAN_MS = 60_000;

/** An event as the outbox stores it (`detail` JSON text). */
export interface AuditRow {
  id: string;
  at: number;
  kind: string;
  user_id: string | null;
  email_key: string | null;
  client_id: string | null;
  ip: string | null;
  detail: string | null;
  tenant: string | null;
}

export const monthOf = (at: number): string => {
  const d = new Date(at);
  return `${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, "0")}`;
};

/** The first instant of a month and of the next one. */
export function monthBounds(month: string): { start: number; end: number } {
  const y = Number(month.slice(0, 4));
  const m = Number(month.slice(4, 6)) - 1;
  return { start: Date.UTC(y, m, 1), end: Date.UTC(y, m + 1, 1) };
}

/**
 * A page's entry for an event: the key of its row in the month's events table, and its kind; for an
 * event in a row's `more` (issue 44), its own time and id after them.
 */
export type PagedEvent =
  | [subject: string, at: number, id: string, kind: string]
  | [subject: string, at: number, id: string, kind: string, eventAt: number, eventId: string];

export const eventsTable = (month: string) => `audit_${month}`;
export const pagesTable = (month: string) => `audit_pages_${month}`;

export function subjectOf(e: { user_id: string | null; email_key: string | null }): string {
  return e.user_id ?? (e.email_key ? `e:${e.email_key}` : "-");
}

const MONTH_RE = /^\d{6}$/;

function createMonth(month: string): string[] {
  if (!MONTH_RE.test(month)) throw new Error(`not a month: ${month}`);
  return [
    `CREATE TABLE IF NOT EXISTS ${eventsTable(month)} (
      tenant TEXT NOT NULL,
      subject TEXT NOT NULL,
      at INTEGER NOT NULL,
      id TEXT NOT NULL,
      kind TEXT NOT NULL,
      user_id TEXT,
      email_key TEXT,
      client_id TEXT,
      ip TEXT,
      detail TEXT,
      more TEXT,
      PRIMARY KEY (tenant, subject, at, id)) WITHOUT ROWID`,
    `CREATE TABLE IF NOT EXISTS ${pagesTable(month)} (
      tenant TEXT NOT NULL,
      at INTEGER NOT NULL,
      id TEXT NOT NULL,
      first_at INTEGER NOT NULL,
      sign_ins INTEGER NOT NULL,
      events TEXT NOT NULL,
      PRIMARY KEY (tenant, at, id)) WITHOUT ROWID`,
  ];
}

/**
 * Issue 44: a login's events in one row. The events a login's records carry (durable-objects/carried-audit.ts)
 * reach D1 together, as a group, from whichever record flushes first: the refresh family carries the
 * code's `code_sent`, the session's `sign_in` and its own `token_issued`. A group's events of one
 * subject are one row, keyed by the first of them (its anchor, in the row's own columns); the others
 * are the row's `more` (a JSON array of events). A login's records carry the same first events, so
 * every record of a login names the same row: the first to flush writes it, a later one with events
 * the row lacks adds them (`more`, merged by event id), and one with nothing new writes nothing.
 * A row's events are at most ROW_SPAN_MS after its anchor (a login's transaction lives at most an hour).
 */
export const ROW_SPAN_MS = 2 * 3_600_000;

/** An event of a row's `more`, whole (`detail` as JSON text, as the row's own). */
type MoreEvent = Omit<AuditRow, "tenant">;

/** The fields a `more` event stores only where they differ from its row's anchor. */
const SHARED_WITH_ANCHOR = ["user_id", "email_key", "client_id", "ip"] as const;

/**
 * A `more` event as stored: `id`, `at` and `kind` always (the merge below and `withLastLogin` read
 * them in SQL), `detail` as JSON itself rather than JSON text inside JSON, and of the anchor's fields
 * only those that differ from it (a login's events share user, address and IP: stored whole, they
 * were about 200 of the row's bytes). Rows written before store every field, with `detail` as text.
 */
type StoredMoreEvent = Pick<MoreEvent, "id" | "at" | "kind"> &
  Partial<Pick<MoreEvent, (typeof SHARED_WITH_ANCHOR)[number]>> & { detail?: unknown };

function storedMore(e: MoreEvent, anchor: Omit<AuditRow, "tenant">): StoredMoreEvent {
  const stored: StoredMoreEvent = { id: e.id, at: e.at, kind: e.kind };
  for (const k of SHARED_WITH_ANCHOR) if (e[k] !== anchor[k]) stored[k] = e[k];
  if (e.detail !== null) {
    const parsed = safeParse(e.detail);
    // Only an object is stored as JSON: a string on reading is text from a row written before.
    stored.detail = typeof parsed === "object" && parsed !== null ? parsed : e.detail;
  }
  return stored;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function moreFromStored(e: StoredMoreEvent, anchor: Omit<AuditRow, "tenant">): MoreEvent {
  const whole = { id: e.id, at: e.at, kind: e.kind } as MoreEvent;
  for (const k of SHARED_WITH_ANCHOR) whole[k] = k in e ? (e[k] ?? null) : anchor[k];
  whole.detail =
    e.detail === undefined || e.detail === null
      ? null
      : typeof e.detail === "string"
        ? e.detail
        : JSON.stringify(e.detail);
  return whole;
}

/** Months whose events table this isolate has seen with its `more` column. */
const monthsWithMore = new Set<string>();

/**
 * Makes a month's tables, and gives a table made before issue 44 its `more` column (once per isolate
 * and month: a failed probe is the only sign, so the ALTER runs only when it fails).
 */
async function monthReady(db: D1Database, month: string): Promise<void> {
  if (monthsWithMore.has(month)) return;
  await db.batch(createMonth(month).map((s) => db.prepare(s)));
  try {
    await db.prepare(`SELECT more FROM ${eventsTable(month)} LIMIT 0`).all();
  } catch {
    await db.prepare(`ALTER TABLE ${eventsTable(month)} ADD COLUMN more TEXT`).run();
  }
  monthsWithMore.add(month);
}

/** A row to write: its key and anchor, and the other events it must hold. */
interface RowPlan {
  tenant: string;
  subject: string;
  anchor: AuditRow;
  more: MoreEvent[];
}

/** Groups of events (a login's, or one event alone) as the rows they make: per group and subject, one. */
function rowsOf(groups: AuditRow[][]): RowPlan[] {
  const rows = new Map<string, RowPlan>();
  for (const group of groups) {
    const bySubject = new Map<string, RowPlan>();
    // In the group's own order, not by time: every record of a login carries its events in the order
    // the login made them, so each record's flush names the same anchor for a subject, whatever the
    // clocks of the machines that stamped them (two events of one millisecond, or a skewed clock,
    // would otherwise anchor two copies of a login's row).
    for (const e of group) {
      const subject = subjectOf(e);
      const plan = bySubject.get(subject);
      if (!plan) bySubject.set(subject, { tenant: e.tenant ?? "default", subject, anchor: e, more: [] });
      else if (plan.anchor.id !== e.id && !plan.more.some((m) => m.id === e.id)) plan.more.push(moreOf(e));
    }
    for (const plan of bySubject.values()) {
      const key = `${plan.tenant}\u0000${plan.subject}\u0000${plan.anchor.at}\u0000${plan.anchor.id}`;
      const seen = rows.get(key);
      if (!seen) rows.set(key, plan);
      else for (const m of plan.more) if (!seen.more.some((x) => x.id === m.id)) seen.more.push(m);
    }
  }
  return [...rows.values()];
}

const moreOf = (e: AuditRow): MoreEvent => ({
  id: e.id,
  at: e.at,
  kind: e.kind,
  user_id: e.user_id,
  email_key: e.email_key,
  client_id: e.client_id,
  ip: e.ip,
  detail: e.detail,
});

/** A row's events: its anchor, then its `more`. */
export function eventsOfRow<R extends Omit<AuditRow, "tenant"> & { more?: string | null }>(row: R): MoreEvent[] {
  const { more, ...anchor } = row;
  const rest = more ? (JSON.parse(more) as StoredMoreEvent[]) : [];
  return [moreOf({ ...anchor, tenant: null }), ...rest.map((e) => moreFromStored(e, anchor))];
}

/**
 * Writes groups of events to the trail (issue 44): per month, the rows that are missing or lack some
 * of their events, and one page per tenant and minute listing only the events new to D1. First reads
 * which rows exist (rows read cost a thousandth of rows written), so a record whose events a later
 * record of its login already wrote writes nothing. Returns the events new to D1, for the webhook
 * queues. Two flushes racing on one row both write it, merged by event id; a page may then list an
 * event twice, which the reader drops.
 */
export async function writeAuditGroups(db: D1Database, groups: AuditRow[][]): Promise<AuditRow[]> {
  const byMonth = new Map<string, RowPlan[]>();
  for (const plan of rowsOf(groups)) {
    const month = monthOf(plan.anchor.at);
    byMonth.set(month, [...(byMonth.get(month) ?? []), plan]);
  }
  const fresh: AuditRow[] = [];
  for (const [month, plans] of byMonth) {
    await monthReady(db, month);
    const keys = plans.map((p) => [p.tenant, p.subject, p.anchor.at, p.anchor.id]);
    const { results: existing } = await db
      .prepare(
        `SELECT a.tenant, a.subject, a.at, a.id, a.more FROM json_each(?) AS j CROSS JOIN ${eventsTable(month)} AS a
         WHERE a.tenant = json_extract(j.value, '$[0]') AND a.subject = json_extract(j.value, '$[1]')
           AND a.at = json_extract(j.value, '$[2]') AND a.id = json_extract(j.value, '$[3]')`,
      )
      .bind(JSON.stringify(keys))
      .all<{ tenant: string; subject: string; at: number; id: string; more: string | null }>();
    const stored = new Map(
      existing.map((r) => [
        `${r.tenant}\u0000${r.subject}\u0000${r.at}\u0000${r.id}`,
        new Set([r.id, ...(r.more ? (JSON.parse(r.more) as StoredMoreEvent[]).map((e) => e.id) : [])]),
      ]),
    );
    const writes: { plan: RowPlan; added: PagedEvent[] }[] = [];
    for (const plan of plans) {
      const has = stored.get(`${plan.tenant}\u0000${plan.subject}\u0000${plan.anchor.at}\u0000${plan.anchor.id}`);
      const added: PagedEvent[] = [];
      if (!has) added.push([plan.subject, plan.anchor.at, plan.anchor.id, plan.anchor.kind]);
      for (const m of plan.more)
        if (!has?.has(m.id)) added.push([plan.subject, plan.anchor.at, plan.anchor.id, m.kind, m.at, m.id]);
      if (added.length === 0) continue;
      writes.push({ plan, added });
      if (!has) fresh.push({ ...plan.anchor, tenant: plan.anchor.tenant ?? null });
      for (const m of plan.more) if (!has?.has(m.id)) fresh.push({ ...m, tenant: plan.anchor.tenant ?? null });
    }
    if (writes.length === 0) continue;
    const rows = writes.map(({ plan }) => ({
      tenant: plan.tenant,
      subject: plan.subject,
      at: plan.anchor.at,
      id: plan.anchor.id,
      kind: plan.anchor.kind,
      user_id: plan.anchor.user_id,
      email_key: plan.anchor.email_key,
      client_id: plan.anchor.client_id,
      ip: plan.anchor.ip,
      detail: plan.anchor.detail,
      more: plan.more.length ? JSON.stringify(plan.more.map((m) => storedMore(m, plan.anchor))) : null,
    }));
    const pages = new Map<string, { tenant: string; entries: PagedEvent[] }>();
    for (const { plan, added } of writes)
      for (const e of added) {
        const key = `${plan.tenant} ${Math.floor(atOf(e) / PAGE_SPAN_MS)}`;
        const page = pages.get(key) ?? { tenant: plan.tenant, entries: [] };
        page.entries.push(e);
        pages.set(key, page);
      }
    const pageRows = [...pages.values()].map(({ tenant, entries }) => {
      // In the order they were added (a row's events together, which `storedPage` relies on); the
      // page's key and bounds from its events' times.
      const sorted = [...entries].sort((a, b) => atOf(a) - atOf(b) || (idOf(a) < idOf(b) ? -1 : 1));
      const first = sorted[0] as PagedEvent;
      return {
        tenant,
        at: atOf(sorted.at(-1) as PagedEvent),
        id: idOf(first),
        first_at: atOf(first),
        sign_ins: sorted.filter((e) => e[3] === "sign_in").length,
        events: JSON.stringify(storedPage(entries)),
      };
    });
    const table = eventsTable(month);
    // ON CONFLICT: a row another flush wrote meanwhile gets the events it lacks, merged by id; the
    // WHERE makes a merge that adds nothing write nothing. (`WHERE true`: SQLite's upsert after a SELECT.)
    await db.batch([
      db
        .prepare(
          `INSERT INTO ${table} (tenant, subject, at, id, kind, user_id, email_key, client_id, ip, detail, more)
           SELECT json_extract(value, '$.tenant'), json_extract(value, '$.subject'), json_extract(value, '$.at'),
             json_extract(value, '$.id'), json_extract(value, '$.kind'), json_extract(value, '$.user_id'),
             json_extract(value, '$.email_key'), json_extract(value, '$.client_id'), json_extract(value, '$.ip'),
             json_extract(value, '$.detail'), json_extract(value, '$.more')
           FROM json_each(?) WHERE true
           ON CONFLICT (tenant, subject, at, id) DO UPDATE SET more = (
             SELECT json_group_array(json(v)) FROM (
               SELECT value AS v FROM json_each(COALESCE(${table}.more, '[]'))
               UNION ALL
               SELECT value FROM json_each(COALESCE(excluded.more, '[]'))
               WHERE json_extract(value, '$.id') NOT IN (SELECT json_extract(value, '$.id') FROM json_each(COALESCE(${table}.more, '[]')))))
           WHERE EXISTS (SELECT 1 FROM json_each(COALESCE(excluded.more, '[]')) AS n
             WHERE json_extract(n.value, '$.id') NOT IN (SELECT json_extract(value, '$.id') FROM json_each(COALESCE(${table}.more, '[]'))))`,
        )
        .bind(JSON.stringify(rows)),
      db
        .prepare(
          `INSERT OR IGNORE INTO ${pagesTable(month)} (tenant, at, id, first_at, sign_ins, events)
           SELECT json_extract(value, '$.tenant'), json_extract(value, '$.at'), json_extract(value, '$.id'),
             json_extract(value, '$.first_at'), json_extract(value, '$.sign_ins'), json_extract(value, '$.events')
           FROM json_each(?)`,
        )
        .bind(JSON.stringify(pageRows)),
    ]);
  }
  return fresh;
}

/**
 * A page's entries as stored: an entry whose row is the one of the entry before it is written
 * `[kind, eventAt, eventId]` (a login's events are one row: its second and third entries repeated the
 * row's subject, time and id, about half of the page's bytes). Readers expand them (`pageEntries`).
 */
type StoredPageEntry = PagedEvent | [kind: string, eventAt: number, eventId: string];

function storedPage(entries: PagedEvent[]): StoredPageEntry[] {
  let row = "";
  return entries.map((e) => {
    const key = `${e[0]}\u0000${e[1]}\u0000${e[2]}`;
    const same = key === row;
    row = key;
    return same ? [e[3], atOf(e), idOf(e)] : e;
  });
}

/** A page's `events` column as entries, each with its row's key. */
export function pageEntries(json: string): PagedEvent[] {
  let last: PagedEvent | undefined;
  return (JSON.parse(json) as StoredPageEntry[]).flatMap((e): PagedEvent[] => {
    if (e.length !== 3) {
      last = e;
      return [e];
    }
    if (!last) return []; // not written so: a short entry always follows its row's first
    const [kind, at, id] = e;
    return [[last[0], last[1], last[2], kind, at, id]];
  });
}

/**
 * SQL for a page entry's kind and time, for `json_each` over a page's `events` as `alias` (short
 * entries, and the event's own time in an entry of 6).
 */
export const pageEntrySql = (alias: string) => ({
  kind: `CASE json_array_length(${alias}.value) WHEN 3 THEN json_extract(${alias}.value, '$[0]') ELSE json_extract(${alias}.value, '$[3]') END`,
  at: `CASE json_array_length(${alias}.value) WHEN 3 THEN json_extract(${alias}.value, '$[1]') WHEN 6 THEN json_extract(${alias}.value, '$[4]') ELSE json_extract(${alias}.value, '$[1]') END`,
});

/** A page entry's event time and id: its own, for an event of a row's `more` (entries of 6). */
export const atOf = (e: PagedEvent): number => e[4] ?? e[1];
export const idOf = (e: PagedEvent): string => e[5] ?? e[2];

/** The months that have tables, newest first. */
export async function auditMonths(db: D1Database): Promise<string[]> {
  const { results } = await db
    .prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'audit_pages_[0-9][0-9][0-9][0-9][0-9][0-9]'",
    )
    .all<{ name: string }>();
  return results
    .map((r) => r.name.slice("audit_pages_".length))
    .filter((m) => MONTH_RE.test(m))
    .sort()
    .reverse();
}

/** Drops every month whose end is at or before `cutoff`; returns the months dropped. */
export async function dropMonthsBefore(db: D1Database, cutoff: number): Promise<string[]> {
  const old = (await auditMonths(db)).filter((m) => monthBounds(m).end <= cutoff);
  if (old.length)
    await db.batch(
      old.flatMap((m) => [
        db.prepare(`DROP TABLE IF EXISTS ${eventsTable(m)}`),
        db.prepare(`DROP TABLE IF EXISTS ${pagesTable(m)}`),
      ]),
    );
  return old;
}

/**
 * Users with `last_login_at` from the trail: their newest `sign_in` within retention, or the column
 * kept from before (the flush no longer writes users: issue 28). One keyed read per user and month.
 */
export async function withLastLogin<U extends { id: string; last_login_at: number | null }>(
  db: D1Database,
  tenant: string,
  users: U[],
  now: number,
  retentionDays: number,
): Promise<U[]> {
  if (users.length === 0) return users;
  const floor = now - retentionDays * 86_400_000;
  const latest = new Map<string, number>();
  let missing = users.map((u) => u.id);
  for (const month of await auditMonths(db)) {
    if (monthBounds(month).end <= floor || missing.length === 0) break;
    // CROSS JOIN: the list drives, each user a seek of the month's key (tenant, subject). A sign-in
    // is a row's own event or one of its `more` (issue 44: a login's events are one row).
    const { results } = await db
      .prepare(
        `SELECT j.value AS id, NULLIF(MAX(
           COALESCE((SELECT MAX(a.at) FROM ${eventsTable(month)} a
             WHERE a.tenant = ?1 AND a.subject = j.value AND a.kind = 'sign_in' AND a.at >= ?2), 0),
           COALESCE((SELECT MAX(json_extract(m.value, '$.at')) FROM ${eventsTable(month)} a, json_each(COALESCE(a.more, '[]')) m
             WHERE a.tenant = ?1 AND a.subject = j.value AND a.at >= ?3 AND json_extract(m.value, '$.kind') = 'sign_in'
               AND json_extract(m.value, '$.at') >= ?2), 0)), 0) AS at
         FROM json_each(?4) AS j`,
      )
      .bind(tenant, floor, floor - ROW_SPAN_MS, JSON.stringify(missing))
      .all<{ id: string; at: number | null }>();
    for (const r of results) if (r.at !== null) latest.set(r.id, r.at);
    missing = missing.filter((id) => !latest.has(id));
  }
  return users.map((u) => {
    const at = latest.get(u.id);
    return at !== undefined && at > (u.last_login_at ?? 0) ? { ...u, last_login_at: at } : u;
  });
}
