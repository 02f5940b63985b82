import type { Context, Next } from "hono";
import { AUDIT_KINDS, type AuditEvent, type AuditKind } from "../../../durable-objects/contract";
import type { AppEnv } from "../../shared/app";
import { audit, auditEmailKey } from "../../shared/audit";
import { normalizeEmail } from "../../shared/email";
import { OAuthError } from "../../shared/errors";
import { json } from "../../shared/http";
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
 * The page query. The table's key is (tenant, at, id) (schema/0013), which SQLite's planner, without
 * statistics, prefers even for one user's events in a large tenant: a lookup by user or email names
 * its index, so it reads that user's rows, already in order, and nothing else.
 */
export function auditListSql(where: string[], by: "user" | "email" | null): string {
  const index = by ? ` INDEXED BY audit_events_by_${by}` : "";
  return `SELECT id, at, kind, user_id, email_key, client_id, ip, detail FROM audit_events${index}
     ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY at DESC, id DESC LIMIT ?`;
}

/**
 * `GET /admin/v1/audit?user=&email=&kind=&since=&until=&cursor=&limit=`: the audit trail, newest
 * first. `kind` takes one kind or several, comma-separated; `email` is matched by its HMAC (the trail
 * holds no address); `since` is inclusive and `until` exclusive. Events arrive within a few seconds
 * (they are written in batches). `next_cursor` is null on the last page.
 */
export async function listAudit(c: Context<AppEnv>): Promise<Response> {
  const q = c.req.query();
  for (const name of Object.keys(q)) if (!AUDIT_PARAMS.has(name)) throw bad(`unknown parameter ${name}`);
  const where: string[] = [];
  const binds: (string | number)[] = [];

  if (q.user !== undefined) {
    if (!/^[A-Za-z0-9_-]{1,100}$/.test(q.user)) throw bad("user is not a user id");
    where.push("user_id = ?");
    binds.push(q.user);
  }
  if (q.email !== undefined) {
    const email = normalizeEmail(q.email);
    if (!email) throw bad("email is not a valid address");
    where.push("email_key = ?");
    binds.push(await auditEmailKey(c.get("config"), email));
  }
  if (q.kind !== undefined) {
    const kinds = q.kind.split(",");
    if (!kinds.every((k): k is AuditKind => (AUDIT_KINDS as readonly string[]).includes(k)))
      throw bad(`kind must be among ${AUDIT_KINDS.join(", ")}`);
    where.push(`kind IN (${kinds.map(() => "?").join(", ")})`);
    binds.push(...kinds);
  }
  const since = time("since", q.since);
  const until = time("until", q.until);
  if (since !== null) {
    where.push("at >= ?");
    binds.push(since);
  }
  if (until !== null) {
    where.push("at < ?");
    binds.push(until);
  }
  // A tenant's trail only: the platform's own paths read the default tenant's (issue 23).
  where.unshift("tenant = ?");
  binds.unshift(c.get("config").TENANT);
  const cursor = readCursor(q.cursor, isPosition);
  if (cursor) {
    where.push("(at < ? OR (at = ? AND id < ?))");
    binds.push(cursor.at, cursor.at, cursor.id);
  }
  const limit = queryLimit(c, 100, MAX_LIMIT);

  const { results } = await c.env.DB.prepare(
    auditListSql(where, q.user !== undefined ? "user" : q.email !== undefined ? "email" : null),
  )
    .bind(...binds, limit + 1)
    .all<Row>();
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
    detail: { method: c.req.method, path: new URL(c.req.url).pathname, status: c.res.status },
  });
}
