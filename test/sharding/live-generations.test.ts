import {
  createExecutionContext,
  createScheduledController,
  env,
  runInDurableObject,
  waitOnExecutionContext,
} from "cloudflare:test";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import mgmt from "../../workers/op-mgmt/src/index";
import { loadConfig } from "../../workers/shared/config/config";
import { DRAIN_MS } from "../../workers/shared/routing/generations";
import { parseId } from "../../workers/shared/routing/ids";
import { forgetLiveGenerations, withLiveShards } from "../../workers/shared/routing/live-shards";
import { allShards } from "../../workers/shared/routing/shard-refs";
import {
  admin,
  fullLogin,
  idParts,
  loginForCode,
  pinClock,
  redeem,
  refreshGrant,
  registerClient,
  shardStub,
  type Tokens,
  uniqueEmail,
  verifyJwt,
} from "../support/harness";

afterEach(() => {
  vi.useRealTimers();
});

afterAll(async () => {
  // Shared storage: leave no live generation behind for other tests.
  await env.DB.prepare("DELETE FROM shard_generations").run();
  forgetLiveGenerations();
});

const genOf = (id: string) => idParts(id.split(".")[0] as string).gen;

describe("shard generations appended live (issue 13)", () => {
  it("appends a generation through the admin API; every id keeps its route and new ids go to it from issue_from", async () => {
    const at = pinClock();
    const t0 = Date.now();
    const client = await registerClient();
    const before = await fullLogin(client, uniqueEmail("live-before"));
    expect(genOf(before.browser.cookies.get("kw_session") as string)).toBe(0);

    const res = await admin("/shards", { method: "POST", json: { store: "session", shards: 5 } });
    expect(res.status, await res.clone().text()).toBe(201);
    const appended = (await res.json()) as { generation: number; issue_from: string };
    // The test config has one generation of 3; the cache is 30 s, so issued into a minute after it.
    expect(appended).toMatchObject({ store: "session", generation: 1, shards: 5 });
    expect(Date.parse(appended.issue_from)).toBe(t0 + 90_000);
    const listed = (await (await admin("/shards")).json()) as {
      stores: Record<string, { generation: number; generations: number[]; issue_from: (string | null)[] }>;
    };
    expect(listed.stores.session).toMatchObject({
      generation: 0,
      generations: [3, 5],
      issue_from: [null, appended.issue_from],
    });
    // One pending generation at a time.
    expect((await admin("/shards", { method: "POST", json: { store: "session", shards: 7 } })).status).toBe(409);

    // Before issue_from: new sessions still go to generation 0.
    at(60_000);
    const during = await fullLogin(client, uniqueEmail("live-during"));
    expect(genOf(during.browser.cookies.get("kw_session") as string)).toBe(0);
    // From issue_from: to generation 1; the refresh tokens of earlier logins still rotate.
    at(91_000);
    const after = await fullLogin(client, uniqueEmail("live-after"));
    expect(genOf(after.browser.cookies.get("kw_session") as string)).toBe(1);
    expect(idParts(after.browser.cookies.get("kw_session") as string).shard).toBeLessThan(5);
    const rotated = await refreshGrant(client, before.tokens.refresh_token as string);
    expect(rotated.status, await rotated.clone().text()).toBe(200);
    const next = (await rotated.json()) as Tokens;
    expect((await verifyJwt(next.id_token, { audience: client.client_id })).payload.sid).toBe(
      (await verifyJwt(before.tokens.id_token, { audience: client.client_id })).payload.sid,
    );
  });

  it("refuses anything but an append of a known store with a count from 1 to 1024", async () => {
    for (const bad of [
      { store: "nope", shards: 2 },
      { store: "code", shards: 0 },
      { store: "code", shards: 2000 },
      { store: "code" },
      { store: "code", shards: 2, gen: 0 },
    ]) {
      const res = await admin("/shards", { method: "POST", json: bad });
      expect(res.status, JSON.stringify(bad)).toBe(400);
    }
    expect((await admin("/shards", { method: "DELETE" })).status).toBe(404);
    expect((await admin("/shards", { method: "PUT", json: { store: "code", shards: 2 } })).status).toBe(404);
  });

  it("keeps fewer generations live than an id can tell apart (issue 38 item 14)", async () => {
    // Generation 1,295 began an hour ago: generation 0 is not drained, so 1,296 generations are live.
    const past = Date.now() - 3_600_000;
    await env.DB.prepare(
      "INSERT INTO shard_generations (store, gen, shards, issue_from, created_at) VALUES ('code', 1295, 2, ?, ?)",
    )
      .bind(past, past)
      .run();
    forgetLiveGenerations();
    try {
      const res = await admin("/shards", { method: "POST", json: { store: "code", shards: 2 } });
      expect(res.status).toBe(409);
      expect(((await res.json()) as { error_description: string }).error_description).toContain(
        "the most ids can tell apart",
      );
      const { results } = await env.DB.prepare(
        "SELECT gen FROM shard_generations WHERE store = 'code' AND gen > 1295",
      ).all();
      expect(results).toEqual([]);
    } finally {
      await env.DB.prepare("DELETE FROM shard_generations WHERE store = 'code' AND gen = 1295").run();
      forgetLiveGenerations();
    }
  });

  it("numbers generations past 1,295 once the old ones are drained: ids name them modulo 1,296 and still route (issue 38 item 14)", async () => {
    const at = pinClock();
    const client = await registerClient();
    // As if 1,296 generations had come and gone: only the newest row is left, begun past the drain horizon.
    const began = Date.now() - DRAIN_MS.code - 60_000;
    await env.DB.prepare(
      "INSERT INTO shard_generations (store, gen, shards, issue_from, created_at) VALUES ('code', 1296, 3, ?, ?)",
    )
      .bind(began, began)
      .run();
    forgetLiveGenerations();
    try {
      const config = await withLiveShards(env, loadConfig(env));
      const { code, verifier } = await loginForCode(client, uniqueEmail("wrap"));
      // The id names generation 0 (1,296 modulo 1,296), which is drained: it routes to 1,296.
      expect(genOf(code)).toBe(0);
      expect(parseId(config, "code", code.split(".")[0])?.ref.gen).toBe(1296);
      expect(allShards(config, "code").map((r) => r.gen)).toEqual([1296, 1296, 1296]);
      const redeemed = await redeem(client, code, verifier);
      expect(redeemed.status, await redeemed.clone().text()).toBe(200);
      // And the next generation is appended after it.
      at(1_000);
      const res = await admin("/shards", { method: "POST", json: { store: "code", shards: 4 } });
      expect(res.status, await res.clone().text()).toBe(201);
      expect(((await res.json()) as { generation: number }).generation).toBe(1297);
    } finally {
      await env.DB.prepare("DELETE FROM shard_generations WHERE store = 'code'").run();
      forgetLiveGenerations();
    }
  });

  it("deletes the rows of drained generations in the hourly cron, and the generations after them keep routing (issue 38 item 14)", async () => {
    const now = Date.now();
    const at = pinClock(now);
    const client = await registerClient();
    const insert = env.DB.prepare(
      "INSERT INTO shard_generations (store, gen, shards, issue_from, created_at) VALUES ('code', ?, ?, ?, ?)",
    );
    // Generation 1 gave way to 2 ten days ago, and 3 is issued into ten minutes from now: 0 and 1 are
    // drained, 2 is current, 3 pending.
    const days = (n: number) => now - n * 86_400_000;
    await env.DB.batch([
      insert.bind(1, 2, days(20), days(20)),
      insert.bind(2, 5, days(10), days(10)),
      insert.bind(3, 6, now + 600_000, now),
    ]);
    forgetLiveGenerations();
    try {
      // A code of generation 2, redeemed after the cron.
      const old = await loginForCode(client, uniqueEmail("retire-before"));
      expect(genOf(old.code)).toBe(2);

      const ctx = createExecutionContext();
      await mgmt.scheduled(createScheduledController({ scheduledTime: now, cron: "17 * * * *" }), env as never, ctx);
      await waitOnExecutionContext(ctx);
      const { results } = await env.DB.prepare(
        "SELECT gen FROM shard_generations WHERE store = 'code' ORDER BY gen",
      ).all<{ gen: number }>();
      expect(results.map((r) => r.gen)).toEqual([2, 3]);

      // Read anew: SHARDS' generation 0, a hole where 1 was, then 2 and 3.
      forgetLiveGenerations();
      const listed = (await (await admin("/shards")).json()) as {
        stores: Record<string, { generation: number; first_live_generation: number; generations: number[] }>;
      };
      expect(listed.stores.code).toMatchObject({ generation: 2, first_live_generation: 2, generations: [5, 6] });
      const config = await withLiveShards(env, loadConfig(env));
      expect(new Set(allShards(config, "code").map((r) => r.gen))).toEqual(new Set([2, 3]));
      const redeemed = await redeem(client, old.code, old.verifier);
      expect(redeemed.status, await redeemed.clone().text()).toBe(200);
      // From its issue_from, new codes go to generation 3, past the hole.
      at(601_000);
      const fresh = await loginForCode(client, uniqueEmail("retire-after"));
      expect(genOf(fresh.code)).toBe(3);
      const redeemedFresh = await redeem(client, fresh.code, fresh.verifier);
      expect(redeemedFresh.status, await redeemedFresh.clone().text()).toBe(200);
      // A second run finds nothing more to retire.
      const again = createExecutionContext();
      await mgmt.scheduled(createScheduledController({ scheduledTime: now, cron: "17 * * * *" }), env as never, again);
      await waitOnExecutionContext(again);
      const { results: kept } = await env.DB.prepare("SELECT gen FROM shard_generations WHERE store = 'code'").all();
      expect(kept).toHaveLength(2);
    } finally {
      await env.DB.prepare("DELETE FROM shard_generations WHERE store = 'code'").run();
      forgetLiveGenerations();
    }
  });

  it("retires a drained generation: its ids are refused unparsed, and fan-outs and stats skip it (issue 27 item 13)", async () => {
    const start = Date.now();
    const at = pinClock(start);
    const client = await registerClient();
    // A code in generation 0 of the code store, never redeemed.
    const old = await loginForCode(client, uniqueEmail("drain"));
    expect(genOf(old.code)).toBe(0);
    const res = await admin("/shards", { method: "POST", json: { store: "code", shards: 4 } });
    const appended = (await res.json()) as { generation: number; issue_from: string };
    expect(appended.generation).toBe(1);
    const began = Date.parse(appended.issue_from);

    // Just before the drain horizon, generation 0 is still routed.
    at(began - start + DRAIN_MS.code - 1_000);
    forgetLiveGenerations();
    let config = await withLiveShards(env, loadConfig(env));
    expect(parseId(config, "code", old.code.split(".")[0])).not.toBeNull();
    expect(allShards(config, "code").some((r) => r.gen === 0)).toBe(true);

    // Past it, generation 0 is drained: refused before any storage call, and no longer listed or woken.
    at(began - start + DRAIN_MS.code + 1_000);
    forgetLiveGenerations();
    config = await withLiveShards(env, loadConfig(env));
    expect(parseId(config, "code", old.code.split(".")[0])).toBeNull();
    expect(allShards(config, "code").every((r) => r.gen === 1)).toBe(true);
    const listed = (await (await admin("/shards")).json()) as {
      stores: Record<string, { first_live_generation: number }>;
    };
    expect(listed.stores.code?.first_live_generation).toBe(1);
    expect(listed.stores.session?.first_live_generation).toBe(0);
    const stats = (await (await admin("/stats")).json()) as {
      stores: Record<string, { shards: { generation: number }[] }>;
    };
    expect(stats.stores.code?.shards.map((s) => s.generation)).toEqual([1, 1, 1, 1]);
    // The old code: invalid_grant, as any unknown code.
    const redeemed = await redeem(client, old.code, old.verifier);
    expect(redeemed.status).toBe(400);
    expect(((await redeemed.json()) as { error: string }).error).toBe("invalid_grant");
  });

  it("wakes a new generation's shards for stats without creating their storage (issue 27 item 13)", async () => {
    const res = await admin("/shards", { method: "POST", json: { store: "refresh", shards: 16 } });
    expect(res.status, await res.clone().text()).toBe(201);
    const { generation } = (await res.json()) as { generation: number };
    forgetLiveGenerations();
    const stats = (await (await admin("/stats")).json()) as {
      stores: Record<string, { shards: { generation: number; served: number; rows_written: number }[] }>;
    };
    const fresh = stats.stores.refresh?.shards.filter((s) => s.generation === generation) ?? [];
    expect(fresh).toHaveLength(16);
    expect(fresh.every((s) => s.served === 0 && s.rows_written === 0)).toBe(true);
    // Asked for its counters only, a shard holds no table.
    for (const shard of [0, 7, 15]) {
      const tables = await runInDurableObject(
        shardStub("refresh", generation, shard),
        (_i, state) => state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'").toArray().length,
      );
      expect(tables, `shard ${shard}`).toBe(0);
    }
  });
});
