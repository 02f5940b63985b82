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

/** A page's entry for an event: its key in the month's events table, and its kind. */
export type PagedEvent = [subject: string, at: number, id: string, kind: string];

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
 * The statements that write a flush's events: per month, its tables (if new), the events, and one
 * page per tenant and minute. Every insert is OR IGNORE on a key an event or page always has the same
 * way, so a repeated flush writes nothing.
 */
export function auditWrites(db: D1Database, rows: AuditRow[]): D1PreparedStatement[] {
  const byMonth = new Map<string, AuditRow[]>();
  for (const r of rows) {
    const month = monthOf(r.at);
    byMonth.set(month, [...(byMonth.get(month) ?? []), r]);
  }
  const statements: D1PreparedStatement[] = [];
  for (const [month, events] of byMonth) {
    for (const create of createMonth(month)) statements.push(db.prepare(create));
    const withTenant = events.map((e) => ({ ...e, tenant: e.tenant ?? "default", subject: subjectOf(e) }));
    statements.push(
      db
        .prepare(
          `INSERT OR IGNORE INTO ${eventsTable(month)} (tenant, subject, at, id, kind, user_id, email_key, client_id, ip, detail)
           SELECT json_extract(value, '$.tenant'), json_extract(value, '$.subject'), json_extract(value, '$.at'),
             json_extract(value, '$.id'), json_extract(value, '$.kind'), json_extract(value, '$.user_id'),
             json_extract(value, '$.email_key'), json_extract(value, '$.client_id'), json_extract(value, '$.ip'),
             json_extract(value, '$.detail')
           FROM json_each(?)`,
        )
        .bind(JSON.stringify(withTenant)),
    );
    const pages = new Map<string, typeof withTenant>();
    for (const e of withTenant) {
      const key = `${e.tenant} ${Math.floor(e.at / PAGE_SPAN_MS)}`;
      pages.set(key, [...(pages.get(key) ?? []), e]);
    }
    const pageRows = [...pages.values()].map((page) => {
      const sorted = [...page].sort((a, b) => a.at - b.at || (a.id < b.id ? -1 : 1));
      return {
        tenant: sorted[0]?.tenant,
        at: sorted.at(-1)?.at,
        id: sorted[0]?.id,
        first_at: sorted[0]?.at,
        sign_ins: sorted.filter((e) => e.kind === "sign_in").length,
        events: JSON.stringify(sorted.map((e): PagedEvent => [e.subject, e.at, e.id, e.kind])),
      };
    });
    statements.push(
      db
        .prepare(
          `INSERT OR IGNORE INTO ${pagesTable(month)} (tenant, at, id, first_at, sign_ins, events)
           SELECT json_extract(value, '$.tenant'), json_extract(value, '$.at'), json_extract(value, '$.id'),
             json_extract(value, '$.first_at'), json_extract(value, '$.sign_ins'), json_extract(value, '$.events')
           FROM json_each(?)`,
        )
        .bind(JSON.stringify(pageRows)),
    );
  }
  return statements;
}

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
    // CROSS JOIN: the list drives, each user a seek of the month's key (tenant, subject).
    const { results } = await db
      .prepare(
        `SELECT j.value AS id, (SELECT MAX(a.at) FROM ${eventsTable(month)} a
           WHERE a.tenant = ? AND a.subject = j.value AND a.kind = 'sign_in' AND a.at >= ?) AS at
         FROM json_each(?) AS j`,
      )
      .bind(tenant, floor, JSON.stringify(missing))
      .all<{ id: string; at: number | null }>();
    for (const r of results) if (r.at !== null) latest.set(r.id, r.at);
    missing = missing.filter((id) => !latest.has(id));
  }
  return users.map((u) => {
    const at = latest.get(u.id);
    return at !== undefined && at > (u.last_login_at ?? 0) ? { ...u, last_login_at: at } : u;
  });
}
