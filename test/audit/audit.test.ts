import { abortAllDurableObjects, env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { decodeJwt } from "jose";
import { describe, expect, it, vi } from "vitest";
import { AUDIT_FLUSH_DELAY_MS, type AuditBuffer } from "../../durable-objects/audit-buffer";
import { carriedGroups } from "../../durable-objects/carried-audit";
import { auditEvent } from "../../durable-objects/contract/audit-event";
import { eventsTable, monthOf } from "../../durable-objects/contract/audit-trail";
import type { AuditEvent } from "../../durable-objects/contract/verbs";
import {
  admin,
  auditEvents,
  call,
  fullLogin,
  policy,
  refreshGrant,
  registerClient,
  runAlarmSettled,
  type Store,
  shardStub,
  sql,
  stubForId,
  uniqueEmail,
  withVars,
  writeBehindStub,
} from "../support/harness";
import { createTenant } from "../tenants/support";

/** The test config has no `audit` entry in SHARDS: the default, 4 shards in generation 0. */
const auditShards = () => [0, 1, 2, 3].map((s) => writeBehindStub("audit", s) as DurableObjectStub<AuditBuffer>);

const STORES: Store[] = ["session", "challenge", "code", "revocation", "refresh"];
/** The test config's shards of every store (4 each, generation 0). */
const storeShards = () => STORES.flatMap((store) => [0, 1, 2, 3].map((s) => shardStub(store, 0, s)));

const mailShards = () => [0, 1, 2, 3].map((s) => writeBehindStub("mail", s));

/** What the alarms would do a few seconds from now: flush every audit buffer and outbox to D1. */
async function flushAll(): Promise<void> {
  for (const stub of [...auditShards(), ...storeShards(), ...mailShards()]) await runAlarmSettled(stub);
}

type OutboxRow = { kind: string; user_id: string | null; email_key: string | null; detail: string };
const outbox = (stub: DurableObjectStub) =>
  sql<OutboxRow>(stub, "SELECT kind, user_id, email_key, detail FROM audit_outbox ORDER BY seq");

/** Issue 44: the events a store's rows carry (`audit`), in a table and its expiry buckets. */
const carried = async (stub: DurableObjectStub, base: string) =>
  runInDurableObject(stub, (_i, state) => {
    const out: AuditEvent[] = [];
    for (const { name } of state.storage.sql
      .exec<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND (name = ? OR name GLOB ?)",
        base,
        `${base}__e*`,
      )
      .toArray())
      for (const { audit } of state.storage.sql
        .exec<{ audit: string | null }>(`SELECT audit FROM ${name} WHERE audit IS NOT NULL`)
        .toArray())
        for (const group of carriedGroups(audit as string)) out.push(...group);
    return out;
  });

const d1Count = async (where: string, ...binds: unknown[]) =>
  (
    await env.DB.prepare(`SELECT COUNT(*) AS n FROM ${await auditEvents()} WHERE ${where}`)
      .bind(...binds)
      .first<{ n: number }>()
  )?.n;

async function list(
  query: string,
): Promise<{ events: (Omit<AuditEvent, "at"> & { at: string })[]; next_cursor: string | null }> {
  const res = await admin(`/audit?${query}`);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as never;
}

let tag = 0;
const events = (n: number, input: Partial<Parameters<typeof auditEvent>[0]> = {}, at = Date.now()) =>
  Array.from({ length: n }, (_, i) =>
    auditEvent({ kind: "code_failed", user: `usr_test_${++tag}`, ...input }, "10.0.0.1", at + i),
  );

describe("audit trail", () => {
  it("records a login, a refresh reuse, a logout and admin changes, once the buffers flush", async () => {
    const testEnv = withVars({ POLICY: policy({ refresh_grace_seconds: 0 }) });
    const client = await registerClient({}, testEnv);
    const email = uniqueEmail("audit");
    const { tokens, browser } = await fullLogin(client, email, { env: testEnv });
    const sub = decodeJwt(tokens.id_token).sub as string;
    // Buffered, not yet in D1: the login did not wait for a D1 write.
    expect(await d1Count("user_id = ?", sub)).toBe(0);

    const first = await refreshGrant(client, tokens.refresh_token as string, {}, testEnv);
    expect(first.status).toBe(200);
    const reuse = await refreshGrant(client, tokens.refresh_token as string, {}, testEnv);
    expect(reuse.status).toBe(400);
    const out = await browser.fetch(`/logout?id_token_hint=${tokens.id_token}`);
    expect(out.status).toBe(200);

    await flushAll();
    const byUser = await list(`user=${sub}`);
    expect(byUser.events.map((e) => e.kind).sort()).toEqual([
      "refresh_reuse",
      "sign_in",
      "token_issued",
      "token_issued",
    ]);
    expect(byUser.events.find((e) => e.kind === "token_issued")?.client_id).toBe(client.client_id);

    // An address's events, and those of the user who has it now (issue 28: a user's events are keyed by the user).
    const byEmail = await list(`email=${encodeURIComponent(email.toUpperCase())}`);
    expect(byEmail.events.map((e) => e.kind).sort()).toEqual([
      "code_sent",
      "refresh_reuse",
      "sign_in",
      "token_issued",
      "token_issued",
    ]);
    expect(byEmail.events.find((e) => e.kind === "code_sent")?.detail).toEqual({ transport: "dev", attempt: 1 });

    const logouts = (await list("kind=logout&limit=1000")).events.filter((e) => e.client_id === client.client_id);
    expect(logouts).toHaveLength(1);
    const changes = (await list("kind=admin_change&limit=1000")).events;
    expect(changes.some((e) => (e.detail as { path: string }).path === "/admin/v1/clients")).toBe(true);

    // Nothing secret in the trail: no code, token or address.
    const all = JSON.stringify((await env.DB.prepare(`SELECT * FROM ${await auditEvents()}`).all()).results);
    expect(all).not.toContain(email);
    expect(all).not.toContain(tokens.refresh_token as string);
    expect(all).not.toContain(tokens.access_token);
  });

  it("writes a login's sign-in and token events in the store calls that make them true", async () => {
    const client = await registerClient({});
    const { tokens, tx } = await fullLogin(client, uniqueEmail("outbox"));
    const sub = decodeJwt(tokens.id_token).sub as string;
    const sessionShard = stubForId("session", tx);
    // Where the code was spent: its refresh family, whose row is the spend (issue 28), in its own shard.
    const codeShard = stubForId("refresh", (tokens.refresh_token as string).split(".")[0] as string);

    // Issue 44: on the session's row and the family's (which also carries the session's), no outbox
    // row, no AuditBuffer call, no D1 yet.
    const signIn = (await carried(sessionShard, "sessions")).filter((e) => e.user_id === sub);
    expect(signIn.map((e) => e.kind)).toEqual(["sign_in"]);
    // The user's first sign-in created it (a sign-up): the event says so, for the user.created webhook.
    expect(signIn[0]?.detail).toEqual({ sid: decodeJwt(tokens.id_token).sid, created: true, method: "email_code" });
    const family = (await carried(codeShard, "families")).filter((e) => e.user_id === sub);
    expect(family.map((e) => [e.kind, e.detail])).toEqual([
      ["sign_in", signIn[0]?.detail],
      ["token_issued", { grant_type: "authorization_code" }],
    ]);
    expect(await outbox(sessionShard)).toEqual([]);
    expect(await outbox(codeShard)).toEqual([]);
    expect(await d1Count("user_id = ?", sub)).toBe(0);
    // The family's alarm is due within the flush delay; the session's later, once the code is past use.
    const alarmOf = (stub: DurableObjectStub) => runInDurableObject(stub, (_i, state) => state.storage.getAlarm());
    expect((await alarmOf(codeShard)) as number).toBeLessThanOrEqual(Date.now() + AUDIT_FLUSH_DELAY_MS);
    expect((await alarmOf(sessionShard)) as number).toBeGreaterThan(Date.now() + AUDIT_FLUSH_DELAY_MS);

    // The family's alarm writes the login's events to D1, as one row of the user's; the session's then
    // finds them there and writes nothing.
    await runDurableObjectAlarm(codeShard);
    expect(await d1Count("user_id = ?", sub)).toBe(2);
    const rows = async () =>
      (
        await env.DB.prepare(`SELECT COUNT(*) AS n FROM ${eventsTable(monthOf(Date.now()))} WHERE subject = ?`)
          .bind(sub)
          .first<{ n: number }>()
      )?.n;
    expect(await rows()).toBe(1);
    await runDurableObjectAlarm(sessionShard);
    expect(await d1Count("user_id = ?", sub)).toBe(2);
    expect(await rows()).toBe(1);
  });

  it("after a flush, waits at least 5 s before the next one, so a slow trickle of logins shares alarms", async () => {
    const stub = shardStub("refresh", 0, 2);
    const next = await runInDurableObject(stub, async (instance, state) => {
      (instance as unknown as { schemaReady(): void }).schemaReady();
      const carried = (instance as unknown as { carried: { note(t: string, k: unknown[], due: number): void } })
        .carried;
      const now = Date.now();
      // One row due now, the next half a second on (rows gone from the table: the flush skips them).
      carried.note("families", ["gone-1"], now - 1);
      carried.note("families", ["gone-2"], now + 500);
      await (instance as unknown as { alarm(): Promise<void> }).alarm();
      return { now, alarm: await state.storage.getAlarm() };
    });
    // Each alarm is a billed row and request, each flush a D1 page row: the second login waits for more.
    expect(next.alarm).not.toBeNull();
    expect(next.alarm as number).toBeGreaterThanOrEqual(next.now + 5_000);
  });

  it("keeps a store's audit events while D1 fails, and still sweeps expired rows", async () => {
    const stub = shardStub("session", 0, 3);
    const tag = `usr_d1down_${Date.now()}`;
    await runInDurableObject(stub, async (instance, state) => {
      // The store makes its schema when first used.
      (instance as unknown as { schemaReady(): void }).schemaReady();
      state.storage.sql.exec(
        "INSERT INTO audit_outbox (id, at, kind, user_id) VALUES (?, ?, 'sign_in', ?)",
        `evt-${tag}`,
        Date.now(),
        tag,
      );
      state.storage.sql.exec(
        "INSERT INTO sessions (session_hash, sid, sub, email, auth_time, expires_at) VALUES (?, 'sid', 'usr', 'e', 1, ?)",
        `expired-${tag}`,
        Date.now() - 1,
      );
      // D1 fails (its D1_ERROR) for this alarm run; the shard's storage is the real one.
      const env = (instance as unknown as { env: { DB: D1Database } }).env;
      const db = env.DB;
      const fail = () => Promise.reject(new Error("D1_ERROR: Network connection lost."));
      env.DB = { prepare: () => ({ bind: () => ({}) }), batch: fail } as unknown as D1Database;
      try {
        await (instance as unknown as { alarm(): Promise<void> }).alarm();
      } finally {
        env.DB = db;
      }
    });
    expect((await outbox(stub)).filter((e) => e.user_id === tag)).toHaveLength(1);
    expect(await sql(stub, "SELECT session_hash FROM sessions WHERE session_hash = ?", `expired-${tag}`)).toEqual([]);
    const retryAt = await runInDurableObject(stub, (_i, state) => state.storage.getAlarm());
    expect(retryAt as number).toBeGreaterThan(Date.now());

    await runDurableObjectAlarm(stub);
    expect((await outbox(stub)).filter((e) => e.user_id === tag)).toEqual([]);
    expect(await d1Count("user_id = ?", tag)).toBe(1);
  });

  it("records a wrong code and a lockout", async () => {
    const testEnv = withVars({ POLICY: policy({ email_failures_per_hour: 2 }) });
    const client = await registerClient({}, testEnv);
    const email = uniqueEmail("lock");
    const { Browser, pkce } = await import("../support/harness");
    const browser = new Browser({ env: testEnv });
    const tx = await browser.startLogin(client, (await pkce()).challenge);
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    for (const expected of [400, 400, 429, 429])
      expect((await browser.postJson("/email-code/verify", { tx, email, code: "000000" })).status).toBe(expected);
    await flushAll();
    // The first wrong code, then the one that locked; tries at the locked address write nothing.
    const kinds = (await list(`email=${encodeURIComponent(email)}`)).events.map((e) => e.kind);
    expect(kinds).toEqual(["lockout", "code_failed", "code_sent"]);
  });

  it("writes nothing for wrong codes at an address no code was sent to (issue 27 item 10)", async () => {
    const client = await registerClient();
    const victim = uniqueEmail("victim");
    const { Browser, pkce } = await import("../support/harness");
    const browser = new Browser();
    const tx = await browser.startLogin(client, (await pkce()).challenge);
    for (let i = 0; i < 20; i++)
      expect((await browser.postJson("/email-code/verify", { tx, email: victim, code: "123456" })).status).toBe(400);
    await flushAll();
    expect((await list(`email=${encodeURIComponent(victim)}`)).events).toEqual([]);
  });

  it("buffers a burst and writes it in one flush; a restart of the buffer loses nothing", async () => {
    const [stub] = auditShards() as [DurableObjectStub<AuditBuffer>];
    const burst = events(60);
    for (let i = 0; i < burst.length; i += 10) await stub.append(burst.slice(i, i + 10));
    const ids = burst.map((e) => e.id);
    const inD1 = () => d1Count(`id IN (${ids.map(() => "?").join(",")})`, ...ids);
    expect(await inD1()).toBe(0);
    // One flush a few seconds out, not one D1 write per event.
    const alarm = await runInDurableObject(stub, (_i, state) => state.storage.getAlarm());
    expect(alarm).toBeGreaterThan(Date.now() + AUDIT_FLUSH_DELAY_MS - 2_000);

    // The object restarts (a deploy, an eviction): the events are in its storage, not its memory.
    await abortAllDurableObjects();
    const [restarted] = auditShards() as [DurableObjectStub<AuditBuffer>];
    expect(await restarted.buffered()).toBeGreaterThanOrEqual(60);
    await runDurableObjectAlarm(restarted);
    expect(await inD1()).toBe(60);
    expect(await restarted.buffered()).toBe(0);

    // A flush that runs twice (a crash after the D1 write) writes each event once.
    await restarted.append(burst.slice(0, 5));
    await runDurableObjectAlarm(restarted);
    expect(await inD1()).toBe(60);

    // A full buffer flushes at once (the alarm is due now, or has already run).
    await restarted.append(events(100));
    const soon = await runInDurableObject(restarted, (_i, state) => state.storage.getAlarm());
    expect(soon === null || soon <= Date.now()).toBe(true);
    // The due alarm may already be running (its D1 write under way), when there is none left to run.
    await runDurableObjectAlarm(restarted);
    await vi.waitFor(async () => expect(await restarted.buffered()).toBe(0), { timeout: 10_000, interval: 50 });
  });

  it("answers a user's last_login_at from the trail's newest sign_in, and writes no users row for it (issue 28)", async () => {
    const res = await admin("/users", { method: "POST", json: { email: uniqueEmail("last") } });
    const user = (await res.json()) as { id: string };
    const [stub] = auditShards() as [DurableObjectStub<AuditBuffer>];
    const shown = async () =>
      ((await (await admin(`/users/${user.id}`)).json()) as { last_login_at: number | null }).last_login_at;
    const stored = async () =>
      (
        await env.DB.prepare("SELECT last_login_at FROM users WHERE id = ?")
          .bind(user.id)
          .first<{ last_login_at: number | null }>()
      )?.last_login_at;
    expect(await shown()).toBeNull();
    const t0 = Date.now() - 120_000;
    for (const offset of [0, 60_000, 30_000]) {
      await stub.append([auditEvent({ kind: "sign_in", user: user.id }, null, t0 + offset)]);
      await runDurableObjectAlarm(stub);
    }
    // Another kind of event later does not count as a sign-in.
    await stub.append([auditEvent({ kind: "logout", user: user.id }, null, t0 + 90_000)]);
    await runDurableObjectAlarm(stub);
    expect(await shown()).toBe(t0 + 60_000);
    expect(await stored()).toBeNull();
    // The list says the same.
    const listed = (await (await admin(`/users?email=${encodeURIComponent("x@example.com")}`)).json()) as object;
    expect(listed).toEqual({ users: [] });
  });

  it("lists newest first with an opaque cursor, and filters by kind and time", async () => {
    const user = `usr_page_${Date.now()}`;
    const t0 = Date.now() - 3_600_000;
    const mine = [
      ...events(3, { user, kind: "sign_in" }, t0),
      ...events(2, { user, kind: "token_issued" }, t0 + 10),
      ...events(1, { user, kind: "logout" }, t0 + 10), // same millisecond as a token_issued: ordered by id
    ];
    const [stub] = auditShards() as [DurableObjectStub<AuditBuffer>];
    await stub.append(mine);
    await runDurableObjectAlarm(stub);

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Awaited<ReturnType<typeof list>> = await list(
        `user=${user}&limit=2${cursor ? `&cursor=${cursor}` : ""}`,
      );
      expect(page.events.length).toBeLessThanOrEqual(2);
      seen.push(...page.events.map((e) => e.id));
      cursor = page.next_cursor;
    } while (cursor);
    const expected = [...mine].sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : -1)).map((e) => e.id);
    expect(seen).toEqual(expected);

    expect((await list(`user=${user}&kind=token_issued,logout`)).events).toHaveLength(3);
    const since = new Date(t0 + 1).toISOString();
    expect((await list(`user=${user}&since=${since}`)).events.map((e) => e.kind).sort()).toEqual([
      "logout",
      "sign_in",
      "sign_in",
      "token_issued",
      "token_issued",
    ]);
    expect((await list(`user=${user}&until=${t0 + 1}`)).events).toHaveLength(1);

    for (const bad of ["kind=nope", "cursor=garbage", "limit=0", "since=yesterday", "colour=blue"])
      expect((await admin(`/audit?${bad}`)).status, bad).toBe(400);
    expect((await call("/admin/v1/audit")).status).toBe(401);
  });

  it("lists a tenant's trail from its monthly pages: newest first across minutes and months, by kind, within retention (issue 28)", async () => {
    const tenant = await createTenant();
    const now = Date.now();
    const at = (ago: number) => now - ago;
    const mine = [
      // Last month (or earlier: 40 days back), then minutes apart today, and two in one millisecond.
      ...events(2, { kind: "sign_in", tenant: tenant.id }, at(40 * 86_400_000)),
      ...events(3, { kind: "code_failed", tenant: tenant.id }, at(3 * 60_000)),
      ...events(2, { kind: "sign_in", tenant: tenant.id }, at(90_000)),
      ...events(1, { kind: "logout", tenant: tenant.id }, at(90_000)),
    ];
    // Past retention (90 days by default): kept until its month is dropped, never listed.
    const old = events(1, { kind: "sign_in", tenant: tenant.id }, at(100 * 86_400_000));
    const [stub] = auditShards() as [DurableObjectStub<AuditBuffer>];
    await stub.append([...mine, ...old]);
    await runDurableObjectAlarm(stub);

    const path = `/tenants/${tenant.id}/audit`;
    const page = async (q: string) => {
      const res = await admin(`${path}?${q}`);
      expect(res.status, await res.clone().text()).toBe(200);
      return (await res.json()) as { events: { id: string; kind: string }[]; next_cursor: string | null };
    };
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const p: Awaited<ReturnType<typeof page>> = await page(`limit=3${cursor ? `&cursor=${cursor}` : ""}`);
      seen.push(...p.events.map((e) => e.id));
      cursor = p.next_cursor;
    } while (cursor);
    const expected = [...mine].sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : -1)).map((e) => e.id);
    expect(seen).toEqual(expected);
    expect((await page("kind=sign_in&limit=10")).events).toHaveLength(4);
    expect((await page(`kind=sign_in&since=${at(86_400_000)}`)).events).toHaveLength(2);
    // The tenant's sign-ins in the last day, from the pages' counts.
    const stats = (await (await admin(`/tenants/${tenant.id}/stats`)).json()) as { sign_ins_24h: number };
    expect(stats.sign_ins_24h).toBe(2);
  }, 30_000);

  it("pages a tenant's trail through more pages than one read takes, in order, with none lost or repeated (issue 28)", async () => {
    const tenant = await createTenant();
    const now = Date.now();
    // 160 minutes of events, one flush: a page per minute (the reads take 100 pages at a time), two
    // events in every fifth minute, one of them a sign_in.
    const mine = Array.from({ length: 160 }, (_, i) => [
      ...events(1, { kind: "code_failed", tenant: tenant.id }, now - i * 60_000 - 1_000),
      ...(i % 5 === 0 ? events(1, { kind: "sign_in", tenant: tenant.id }, now - i * 60_000 - 2_000) : []),
    ]).flat();
    const [stub] = auditShards() as [DurableObjectStub<AuditBuffer>];
    await stub.append(mine);
    await runDurableObjectAlarm(stub);
    await vi.waitFor(async () => expect(await stub.buffered()).toBe(0), { timeout: 10_000, interval: 50 });

    const expected = [...mine].sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : -1)).map((e) => e.id);
    for (const [query, want] of [
      ["limit=7", expected],
      ["limit=150", expected],
      [
        "kind=sign_in&limit=3",
        mine
          .filter((e) => e.kind === "sign_in")
          .sort((a, b) => b.at - a.at)
          .map((e) => e.id),
      ],
      // Fewer sign-ins in the first 100 pages than the limit: the read goes on past them.
      [
        "kind=sign_in&limit=30",
        mine
          .filter((e) => e.kind === "sign_in")
          .sort((a, b) => b.at - a.at)
          .map((e) => e.id),
      ],
    ] as const) {
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const res = await admin(`/tenants/${tenant.id}/audit?${query}${cursor ? `&cursor=${cursor}` : ""}`);
        expect(res.status).toBe(200);
        const page = (await res.json()) as { events: { id: string }[]; next_cursor: string | null };
        seen.push(...page.events.map((e) => e.id));
        cursor = page.next_cursor;
      } while (cursor);
      expect(seen, query).toEqual(want);
    }
  }, 60_000);
});
