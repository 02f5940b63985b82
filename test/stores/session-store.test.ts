import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { SessionInfo } from "../../durable-objects/contract/verbs";
import { sql } from "../support/harness";

const T0 = 1_900_000_000_000;

let n = 0;
const fresh = () => env.SESSIONS.get(env.SESSIONS.idFromName(`test-session-${++n}-${Math.random()}`));
const session = (over: Partial<SessionInfo> = {}): SessionInfo => ({
  sub: "usr_1",
  email: "a@example.com",
  sid: `sid-${++n}`,
  auth_time: Math.floor(T0 / 1000),
  expires_at: T0 + 86_400_000,
  ...over,
});

/** A verified login: the session a transaction makes (startSession's named arguments). */
const start = (s: ReturnType<typeof fresh>, txHash: string, sessionHash: string, info: SessionInfo, now = T0) =>
  s.startSession({ txHash, sessionHash, session: info, now });

describe("SessionStore", () => {
  it("stores a session once, atomically, even under concurrency (A7: op-auth derives its id from the transaction)", async () => {
    const s = fresh();
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => start(s, "tx-c", "sh-c", session({ sid: `sid-c-${i}` }), T0 + 1)),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    const sessions = await sql(s, "SELECT session_hash FROM sessions WHERE sid LIKE 'sid-c-%'");
    expect(sessions).toHaveLength(1);
    // Finished: the transaction's session is not made again, and the refused ones wrote nothing.
    expect(await start(s, "tx-c", "sh-c", session(), T0 + 3)).toBe(false);
    expect(await sql(s, "SELECT COUNT(*) AS n FROM sessions")).toEqual([{ n: 1 }]);
  });

  it("keeps a transaction spent for as long as the session it made, even after a logout", async () => {
    const s = fresh();
    const info = session();
    expect(await start(s, "tx", "sh", info)).toBe(true);
    expect(await s.session("sh", T0 + 1)).toEqual(info);
    expect(await sql(s, "SELECT tx_hash FROM sessions WHERE session_hash = 'sh'")).toEqual([{ tx_hash: "tx" }]);
    expect(await s.endSession("sh")).toBe(info.sid);
    // Ended: the row is gone. A `redirect_to` replayed within its transaction's lifetime would need
    // the ended session's cookie, and the session it remade would carry the ended `sid`, which the
    // logout marked revoked: its code is refused at the token endpoint (token/authorization-code.test.ts).
    expect(await s.session("sh", T0 + 2)).toBeNull();
  });

  it("stores a session already past its expiry once: its bucket's end may have passed", async () => {
    const s = fresh();
    const info = session({ expires_at: Date.now() - 1_200_000 });
    expect(await start(s, "tx-late", "sh-late", info, Date.now())).toBe(true);
    expect(await start(s, "tx-late", "sh-late", info, Date.now())).toBe(false);
  });

  it("serves a session until its absolute expiry", async () => {
    const s = fresh();
    const info = session({ expires_at: T0 + 1000 });
    await start(s, "tx", "sh", info);
    expect(await s.session("sh", T0 + 999)).toEqual(info);
    expect(await s.session("sh", T0 + 1000)).toBeNull();
    expect(await s.session("nope", T0)).toBeNull();
  });

  it("ends a session and returns its sid once", async () => {
    const s = fresh();
    const info = session();
    await start(s, "tx", "sh", info);
    expect(await s.endSession("sh")).toBe(info.sid);
    expect(await s.endSession("sh")).toBeNull();
    expect(await s.session("sh", T0)).toBeNull();
  });

  it("keeps sessions in expiry buckets, which the alarm drops whole once their end has passed (issue 28)", async () => {
    const s = fresh();
    const now = Date.now();
    await start(s, "tx-live", "sh-live", session({ expires_at: now + 86_400_000 }), now);
    // Expired long enough ago that its bucket's end (5 minutes wide, for it) has passed too.
    await start(s, "tx-2", "sh-dead", session({ expires_at: now - 600_000 }), now);
    expect(await s.session("sh-dead", now)).toBeNull();
    const tables = () =>
      sql<{ name: string }>(s, "SELECT name FROM sqlite_master WHERE name GLOB 'sessions__e*' ORDER BY name");
    expect(await tables()).toHaveLength(2);
    expect(await runDurableObjectAlarm(s)).toBe(true);
    expect(await sql(s, "SELECT session_hash FROM sessions")).toEqual([{ session_hash: "sh-live" }]);
    // The live session's bucket ends after it: a day's session, in a bucket six hours wide.
    const [live] = await tables();
    const end = Number(/__e(\d+)$/.exec(live?.name ?? "")?.[1]) * 1000;
    expect(end).toBeGreaterThanOrEqual(now + 86_400_000);
    expect(end).toBeLessThanOrEqual(now + 86_400_000 + 6 * 3_600_000);
    expect(await s.session("sh-live", now)).not.toBeNull();
  });

  it("finds a session in whichever bucket holds it, and refuses its hash again in any of them (one lookup statement)", async () => {
    const s = fresh();
    const now = Date.now();
    // Lifetimes of an hour, a day and thirty days: three buckets of three widths.
    const lives = [3_600_000, 86_400_000, 30 * 86_400_000];
    const infos = lives.map((life, i) => session({ sid: `sid-b${i}`, expires_at: now + life }));
    for (const [i, info] of infos.entries()) expect(await start(s, `tx-b${i}`, `sh-b${i}`, info, now)).toBe(true);
    const buckets = await sql(s, "SELECT name FROM sqlite_master WHERE name GLOB 'sessions__e*'");
    expect(buckets).toHaveLength(3);
    for (const [i, info] of infos.entries()) expect(await s.session(`sh-b${i}`, now)).toEqual(info);
    // The same session hash from another transaction, headed for another bucket: refused, nothing written.
    expect(await start(s, "tx-other", "sh-b0", session({ expires_at: now + 30 * 86_400_000 }), now)).toBe(false);
    expect(await start(s, "tx-other", "sh-b2", session({ expires_at: now + 3_600_000 }), now)).toBe(false);
    expect(await sql(s, "SELECT COUNT(*) AS n FROM sessions")).toEqual([{ n: 3 }]);
    expect(await s.session("sh-none", now)).toBeNull();
  });

  it("upgrades a sessions table from before sealed transactions, keeping its sessions", async () => {
    const name = `test-session-upgrade-${Math.random()}`;
    const old = env.SESSIONS.get(env.SESSIONS.idFromName(name));
    // The table as the previous version created it, with a live session, then a restart of the object.
    await runInDurableObject(old, (_i, state) => {
      state.storage.sql.exec("DROP INDEX IF EXISTS sessions_tx");
      state.storage.sql.exec("DROP TABLE IF EXISTS sessions");
      state.storage.sql.exec(`CREATE TABLE sessions (session_hash TEXT PRIMARY KEY, sid TEXT NOT NULL, sub TEXT NOT NULL,
        email TEXT NOT NULL, auth_time INTEGER NOT NULL, expires_at INTEGER NOT NULL)`);
      state.storage.sql.exec(
        "INSERT INTO sessions VALUES ('sh-old', 'sid-old', 'usr_1', 'a@example.com', 1, ?)",
        T0 + 1000,
      );
    });
    const upgraded = env.SESSIONS.get(env.SESSIONS.idFromName(name));
    await runInDurableObject(upgraded, (instance) => {
      // A new instance over the same storage runs the upgrades when first used.
      const fresh = new (instance.constructor as new (ctx: DurableObjectState, env: unknown) => unknown)(
        (instance as unknown as { ctx: DurableObjectState }).ctx,
        env,
      ) as { schemaReady(): void };
      fresh.schemaReady();
    });
    expect((await upgraded.session("sh-old", T0))?.sid).toBe("sid-old");
    expect(await start(upgraded, "tx-new", "sh-new", session())).toBe(true);
    expect(await start(upgraded, "tx-new", "sh-new", session())).toBe(false);
  });

  it("rebuilds tables of an older layout once, keeping their rows: sessions WITHOUT ROWID, the audit outbox without AUTOINCREMENT (issue 28)", async () => {
    const name = `test-session-layout-${Math.random()}`;
    const old = env.SESSIONS.get(env.SESSIONS.idFromName(name));
    await runInDurableObject(old, (_i, state) => {
      const q = state.storage.sql;
      q.exec("DROP TABLE IF EXISTS sessions");
      q.exec("DROP TABLE IF EXISTS audit_outbox");
      q.exec(`CREATE TABLE sessions (session_hash TEXT PRIMARY KEY, sid TEXT NOT NULL, sub TEXT NOT NULL,
        email TEXT NOT NULL, auth_time INTEGER NOT NULL, expires_at INTEGER NOT NULL, tx_hash TEXT)`);
      q.exec("CREATE UNIQUE INDEX sessions_tx ON sessions(tx_hash)");
      q.exec("INSERT INTO sessions VALUES ('sh-old', 'sid-old', 'usr_1', 'a@example.com', 1, ?, 'tx-old')", T0 + 1000);
      q.exec(`CREATE TABLE audit_outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, at INTEGER NOT NULL,
        kind TEXT NOT NULL, user_id TEXT, email_key TEXT, client_id TEXT, ip TEXT, detail TEXT, tenant TEXT)`);
      q.exec("INSERT INTO audit_outbox (id, at, kind) VALUES ('ev-old', 1, 'sign_in')");
    });
    const rebuilt = env.SESSIONS.get(env.SESSIONS.idFromName(name));
    const ddl = await runInDurableObject(rebuilt, (instance, state) => {
      const fresh = new (instance.constructor as new (ctx: DurableObjectState, env: unknown) => unknown)(
        (instance as unknown as { ctx: DurableObjectState }).ctx,
        env,
      ) as { schemaReady(): void };
      fresh.schemaReady();
      return Object.fromEntries(
        state.storage.sql
          .exec<{ name: string; sql: string }>(
            "SELECT name, sql FROM sqlite_master WHERE name IN ('sessions', 'audit_outbox', 'sessions_tx')",
          )
          .toArray()
          .map((r) => [r.name, r.sql]),
      );
    });
    expect(ddl.sessions).toMatch(/WITHOUT ROWID/);
    expect(ddl.audit_outbox).not.toMatch(/AUTOINCREMENT/);
    // Its indexes are made again; its rows are there; the transaction it spent stays spent.
    expect(ddl.sessions_tx).toMatch(/UNIQUE INDEX/);
    expect((await rebuilt.session("sh-old", T0))?.sid).toBe("sid-old");
    expect(await start(rebuilt, "tx-old", "sh-replay", session())).toBe(false);
    expect(await rebuilt.auditBacklog()).toBe(1);

    // A session with its sign_in event: 1 row for the session, in its expiry bucket, which carries
    // the event (issue 44: it was 2, the event an outbox row). It was 4 before issue 28 (the session's
    // key, expiry and transaction entries) and, before that, 6. The bucket's table is made by the first
    // session (2 rows).
    const signIn = {
      id: "ev-new",
      at: T0,
      kind: "sign_in",
      user_id: "usr_1",
      email_key: null,
      client_id: null,
      ip: null,
      detail: null,
    };
    const first = { txHash: "tx-first", sessionHash: "sh-first", session: session(), now: T0 };
    await rebuilt.startSession({ ...first, signIn: { ...signIn, id: "ev-first" } as never });
    const before = (await rebuilt.stats()).rows_written;
    expect(
      await rebuilt.startSession({
        txHash: "tx-new",
        sessionHash: "sh-new",
        session: session(),
        now: T0,
        signIn: signIn as never,
      }),
    ).toBe(true);
    expect((await rebuilt.stats()).rows_written - before).toBe(1);
  });
});
