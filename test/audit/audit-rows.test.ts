import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { carriedGroups } from "../../durable-objects/carried-audit";
import {
  type AuditRow,
  auditMonths,
  eventsOfRow,
  eventsTable,
  monthOf,
  pageEntries,
  pagesTable,
  writeAuditGroups,
} from "../../durable-objects/contract/audit-trail";
import { storedEvents } from "../../durable-objects/contract/carried-events";
import { meteredD1, newD1Meter } from "../../durable-objects/contract/d1-meter";
import type { AuditEvent } from "../../durable-objects/contract/verbs";
import { sweepAuditEvents } from "../../workers/op-mgmt/src/retention";
import { signInsBetween } from "../../workers/op-mgmt/src/stats";
import { loadConfig } from "../../workers/shared/config/config";
import { auditEvents } from "../support/harness";
import { createTenant } from "../tenants/support";

const DAY = 86_400_000;

/**
 * What an audit event costs in D1 (issue 28): one row in its month's table, keyed (tenant, subject,
 * at, id) WITHOUT ROWID, and a flush's events of one tenant and minute share one page row. It was 2
 * or 3 a event (the table before the months, with an index by user and one by email), and 6 or 7
 * before that.
 */
describe("audit events in D1, by month", () => {
  const row = (id: string, at: number, user: string | null, emailKey: string | null, tenant = "default"): AuditRow => ({
    id,
    at,
    kind: "sign_in",
    user_id: user,
    email_key: emailKey,
    client_id: "c",
    ip: "192.0.2.1",
    detail: "{}",
    tenant,
  });
  const written = async (rows: AuditRow[]) => {
    const meter = newD1Meter();
    await writeAuditGroups(
      meteredD1(env.DB, meter),
      rows.map((r) => [r]),
    );
    return meter.rows_written;
  };

  it("costs 1 row an event, whatever it names, and 1 page row per tenant and minute; a repeated flush costs nothing", async () => {
    const tag = `rows-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
    const now = Date.now();
    await written([row(`${tag}-warm`, now, null, null)]); // the month's tables exist
    const rows = [
      row(`${tag}-both`, now, `${tag}-u1`, "e1"),
      row(`${tag}-email`, now + 1, null, "e1"),
      row(`${tag}-none`, now + 2, null, null),
    ];
    // Three events and, a minute apart at most, one page (or two if the minute turned between them).
    const first = await written(rows);
    expect(first === 4 || first === 5).toBe(true);
    expect(await written(rows)).toBe(0);
    const month = monthOf(now);
    const stored = await env.DB.prepare(`SELECT id, subject FROM ${eventsTable(month)} WHERE id LIKE ? ORDER BY id`)
      .bind(`${tag}-%`)
      .all<{ id: string; subject: string }>();
    expect(stored.results).toEqual([
      { id: `${tag}-both`, subject: `${tag}-u1` },
      { id: `${tag}-email`, subject: "e:e1" },
      { id: `${tag}-none`, subject: "-" },
      { id: `${tag}-warm`, subject: "-" },
    ]);
  });

  it("writes a login's events once, as one row, whichever of its records flushes first, even when its events share a millisecond", async () => {
    const tag = `login-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
    const now = Date.now();
    // One millisecond for all three, ids that sort against the login's order: the anchor must not
    // depend on the clocks (issue 44's carried events: each record flushes the events it carries).
    const sent = { ...row(`${tag}-z`, now, `${tag}-u`, "e"), kind: "code_sent" };
    const signIn = row(`${tag}-m`, now, `${tag}-u`, "e");
    const issued = { ...row(`${tag}-a`, now, `${tag}-u`, "e"), kind: "token_issued" };
    const meter = newD1Meter();
    const db = meteredD1(env.DB, meter);
    // The family (all three) first, then the session (two), then the address's row (one).
    await writeAuditGroups(db, [[sent, signIn, issued]]);
    const after = meter.rows_written;
    await writeAuditGroups(db, [[sent, signIn]]);
    await writeAuditGroups(db, [[sent]]);
    expect(meter.rows_written).toBe(after);
    // And the other way round: each later record adds only what the row lacks, to the same row.
    const tag2 = `b-${tag}`;
    const sent2 = { ...sent, id: `${tag2}-z` };
    const signIn2 = { ...signIn, id: `${tag2}-m` };
    const issued2 = { ...issued, id: `${tag2}-a` };
    await writeAuditGroups(db, [[sent2]]);
    await writeAuditGroups(db, [[sent2, signIn2]]);
    await writeAuditGroups(db, [[sent2, signIn2, issued2]]);
    const month = monthOf(now);
    for (const t of [tag, tag2]) {
      const { results } = await env.DB.prepare(`SELECT id, more FROM ${eventsTable(month)} WHERE id LIKE ?`)
        .bind(`${t}-%`)
        .all<{ id: string; more: string | null }>();
      expect(results).toHaveLength(1);
      expect(results[0]?.id).toBe(`${t}-z`);
      expect((JSON.parse(results[0]?.more ?? "[]") as { id: string }[]).map((e) => e.id).sort()).toEqual([
        `${t}-a`,
        `${t}-m`,
      ]);
    }
  });

  it("stores a row's later events with only what differs from its first, and reads them back whole (rows written whole before too)", async () => {
    const tag = `compact-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
    const now = Date.now();
    const sent = {
      ...row(`${tag}-1`, now, `${tag}-u`, "e"),
      kind: "code_sent",
      client_id: null,
      detail: '{"attempt":1}',
    };
    const signIn = {
      ...row(`${tag}-2`, now + 5, `${tag}-u`, "e"),
      client_id: null,
      detail: '{"sid":"s","created":true}',
    };
    const issued = { ...row(`${tag}-3`, now + 9, `${tag}-u`, "e"), kind: "token_issued", ip: null, detail: null };
    await writeAuditGroups(env.DB, [[sent, signIn, issued]]);
    const month = monthOf(now);
    const stored = await env.DB.prepare(
      `SELECT id, at, kind, user_id, email_key, client_id, ip, detail, more FROM ${eventsTable(month)} WHERE id = ?`,
    )
      .bind(`${tag}-1`)
      .first<Parameters<typeof eventsOfRow>[0] & { more: string }>();
    if (!stored) throw new Error("no row");
    // The sign-in shares everything with the code's event but its detail, kept as JSON, not text;
    // the token's event differs in its client and its IP (null is stored, absent means the anchor's).
    expect(JSON.parse(stored.more)).toEqual([
      { id: `${tag}-2`, at: now + 5, kind: "sign_in", detail: { sid: "s", created: true } },
      { id: `${tag}-3`, at: now + 9, kind: "token_issued", client_id: "c", ip: null },
    ]);
    const whole = ({ tenant: _, ...e }: AuditRow) => e;
    expect(eventsOfRow(stored)).toEqual([whole(sent), whole(signIn), whole(issued)]);
    // The harness's SQL view (and so the trail's readers in SQL) sees the same events.
    const viewed = await env.DB.prepare(
      `SELECT id, at, kind, user_id, email_key, client_id, ip, detail FROM ${await auditEvents()} WHERE id LIKE ? ORDER BY id`,
    )
      .bind(`${tag}-%`)
      .all();
    expect(viewed.results).toEqual([whole(sent), whole(signIn), whole(issued)]);
    // Its page lists the row once in full, then the row's later events by kind, time and id alone.
    const page = await env.DB.prepare(`SELECT events FROM ${pagesTable(month)} WHERE id = ?`)
      .bind(`${tag}-1`)
      .first<{ events: string }>();
    expect(JSON.parse(page?.events ?? "[]")).toEqual([
      [`${tag}-u`, now, `${tag}-1`, "code_sent"],
      ["sign_in", now + 5, `${tag}-2`],
      ["token_issued", now + 9, `${tag}-3`],
    ]);
    expect(pageEntries(page?.events ?? "[]")).toEqual([
      [`${tag}-u`, now, `${tag}-1`, "code_sent"],
      [`${tag}-u`, now, `${tag}-1`, "sign_in", now + 5, `${tag}-2`],
      [`${tag}-u`, now, `${tag}-1`, "token_issued", now + 9, `${tag}-3`],
    ]);
    // The bill's count of logins reads the sign-in's own time from its short entry.
    expect(await signInsBetween(env.DB, now + 5, now + 6)).toBe(1);
    expect(await signInsBetween(env.DB, now, now + 5)).toBe(0);
    // A row written before (each later event whole, its detail as text) reads the same.
    const before = { ...stored, more: JSON.stringify([whole(signIn), whole(issued)]) };
    expect(eventsOfRow(before)).toEqual([whole(sent), whole(signIn), whole(issued)]);
  });

  it("a user's or an address's events are a range of the month's key; the tenant's trail a range of its pages' key", async () => {
    const month = monthOf(Date.now());
    await written([row(`plan-${Date.now()}`, Date.now(), "u", null)]);
    const plan = async (sql: string) =>
      (
        await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
          .bind(...Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => "x"))
          .all<{ detail: string }>()
      ).results
        .map((r) => r.detail)
        .join("; ");
    expect(
      await plan(
        `SELECT id FROM ${eventsTable(month)} WHERE tenant = ? AND subject IN (?, ?) AND at >= ? ORDER BY at DESC, id DESC LIMIT ?`,
      ),
    ).toMatch(/^SEARCH audit_\d{6} USING PRIMARY KEY \(tenant=\? AND subject=\? AND at>\?\)/);
    expect(
      await plan(
        `SELECT events FROM ${pagesTable(month)} WHERE tenant = ? AND at >= ? AND at < ? ORDER BY at DESC LIMIT 100`,
      ),
    ).toBe(`SEARCH ${pagesTable(month)} USING PRIMARY KEY (tenant=? AND at>? AND at<?)`);
  });

  it("retention drops a month's tables whole once the month is past it, and writes no row for it", async () => {
    const now = Date.now();
    const tag = `drop-${now}`;
    const long = Date.UTC(2020, 0, 15);
    await written([row(`${tag}-old`, long, tag, null), row(`${tag}-new`, now, tag, null)]);
    expect(await auditMonths(env.DB)).toContain("202001");
    const swept = await sweepAuditEvents(env as never, loadConfig(env as never), now);
    expect(swept.months_dropped).toContain("202001");
    expect(await auditMonths(env.DB)).not.toContain("202001");
    expect(await auditMonths(env.DB)).toContain(monthOf(now));
    const left = await env.DB.prepare(`SELECT id FROM ${await auditEvents()} WHERE user_id = ?`)
      .bind(tag)
      .all<{ id: string }>();
    expect(left.results.map((r) => r.id)).toEqual([`${tag}-new`]);
  });
});

describe("audit retention of the table from before the months, tenant by tenant", () => {
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

describe("a login's events as a carrier row stores them (issue 44)", () => {
  const login = (tenant?: string): AuditEvent[] => [
    {
      id: "e1",
      at: 1,
      kind: "code_sent",
      user_id: "usr_1",
      email_key: "k",
      client_id: null,
      ip: "192.0.2.1",
      detail: { attempt: 1 },
      ...(tenant ? { tenant } : {}),
    },
    {
      id: "e2",
      at: 2,
      kind: "sign_in",
      user_id: "usr_1",
      email_key: "k",
      client_id: null,
      ip: "192.0.2.1",
      detail: { sid: "s" },
      ...(tenant ? { tenant } : {}),
    },
    {
      id: "e3",
      at: 3,
      kind: "token_issued",
      user_id: "usr_1",
      email_key: null,
      client_id: "app",
      ip: "198.51.100.7",
      detail: null,
      ...(tenant ? { tenant } : {}),
    },
  ];
  it("reads back exactly what it stored, the shared fields once, and rows stored whole before it", () => {
    for (const events of [login(), login("acme")]) {
      const stored = JSON.stringify(storedEvents(events));
      expect(carriedGroups(stored)).toEqual([events]);
      expect(stored.length).toBeLessThan(JSON.stringify(events).length * 0.7);
      expect(carriedGroups(JSON.stringify(events))).toEqual([events]);
      expect(carriedGroups(JSON.stringify({ tx1: storedEvents(events), tx2: events }))).toEqual([events, events]);
    }
  });
});
