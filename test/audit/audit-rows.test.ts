import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { auditListSql } from "../../workers/op-mgmt/src/audit";
import { sweepAuditEvents } from "../../workers/op-mgmt/src/retention";
import { loadConfig } from "../../workers/shared/config";
import { createTenant } from "../tenants/support";

const DAY = 86_400_000;

/**
 * What an audit event costs in D1 (issue 28): the table is keyed by (tenant, at, id) WITHOUT ROWID,
 * so an event is one row, plus one index row for a user and one for an email. It was 6 or 7.
 */
describe("audit events in D1", () => {
  const insert = (id: string, user: string | null, emailKey: string | null) =>
    env.DB.prepare(
      "INSERT OR IGNORE INTO audit_events (id, at, kind, user_id, email_key, client_id, ip, detail, tenant) VALUES (?, ?, 'sign_in', ?, ?, 'c', '192.0.2.1', '{}', 'default')",
    )
      .bind(id, Date.now(), user, emailKey)
      .run();

  it("costs 1 row, plus 1 for its user and 1 for its email; a repeated flush costs nothing", async () => {
    const tag = `rows-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
    expect((await insert(`${tag}-both`, "u1", "e1")).meta.rows_written).toBe(3);
    expect((await insert(`${tag}-email`, null, "e1")).meta.rows_written).toBe(2);
    expect((await insert(`${tag}-none`, null, null)).meta.rows_written).toBe(1);
    const again = env.DB.prepare(
      "INSERT OR IGNORE INTO audit_events (id, at, kind, tenant) SELECT id, at, kind, tenant FROM audit_events WHERE id = ?",
    ).bind(`${tag}-both`);
    expect((await again.run()).meta.rows_written).toBe(0);
  });

  it("a tenant's trail newest first reads its key's range; a user's or an address's reads its index, in order", async () => {
    const plan = async (sql: string) =>
      (
        await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
          .bind(...Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => "x"))
          .all<{ detail: string }>()
      ).results
        .map((r) => r.detail)
        .join("; ");
    const where = ["tenant = ?", "kind IN (?, ?)", "(at < ? OR (at = ? AND id < ?))"];
    expect(await plan(auditListSql(where, null))).toBe("SEARCH audit_events USING PRIMARY KEY (tenant=?)");
    expect(await plan(auditListSql([...where, "user_id = ?"], "user"))).toBe(
      "SEARCH audit_events USING INDEX audit_events_by_user (tenant=? AND user_id=?)",
    );
    expect(await plan(auditListSql([...where, "email_key = ?"], "email"))).toBe(
      "SEARCH audit_events USING INDEX audit_events_by_email (tenant=? AND email_key=?)",
    );
  });
});

describe("audit retention, tenant by tenant", () => {
  it("deletes every tenant's events past retention, reading each tenant's own range", async () => {
    const now = Date.now();
    const tag = `ret-t-${now}-${Math.random().toString(36).slice(2, 8)}`;
    const tenant = await createTenant();
    await env.DB.prepare(
      "INSERT INTO audit_events (id, at, kind, user_id, tenant) VALUES (?, ?, 'sign_in', ?, 'default'), (?, ?, 'sign_in', ?, ?), (?, ?, 'sign_in', ?, ?)",
    )
      .bind(
        `${tag}-d-old`,
        now - 91 * DAY,
        tag,
        `${tag}-t-old`,
        now - 92 * DAY,
        tag,
        tenant.id,
        `${tag}-t-new`,
        now - 1000,
        tag,
        tenant.id,
      )
      .run();
    const swept = await sweepAuditEvents(env as never, loadConfig(env as never), now);
    expect(swept.deleted).toBeGreaterThanOrEqual(2);
    const left = await env.DB.prepare("SELECT id FROM audit_events WHERE user_id = ? ORDER BY at")
      .bind(tag)
      .all<{ id: string }>();
    expect(left.results.map((r) => r.id)).toEqual([`${tag}-t-new`]);
  });
});
