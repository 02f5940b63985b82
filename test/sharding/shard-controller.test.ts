import { abortAllDurableObjects, env } from "cloudflare:test";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { runShardController } from "../../workers/op-mgmt/src/shard-controller";
import { loadConfig } from "../../workers/shared/config/config";
import { forgetLiveGenerations } from "../../workers/shared/routing/live-shards";
import { admin, fullLogin, registerClient, uniqueEmail, withVars } from "../support/harness";

async function clean() {
  await env.DB.batch([
    env.DB.prepare("DELETE FROM shard_generations"),
    env.DB.prepare("DELETE FROM shard_samples"),
    env.DB.prepare("DELETE FROM shard_controller"),
  ]);
  forgetLiveGenerations();
}
beforeEach(clean);
afterAll(clean);

const controllerEnv = (over: Record<string, unknown> = {}) =>
  withVars({
    POLICY: JSON.stringify({
      client_cache_seconds: 0,
      shard_controller: {
        enabled: true,
        ceiling_per_shard: 0.5,
        floor_per_shard: 0,
        runs: 1,
        min_interval_minutes: 1,
        max_shards: 8,
        ...over,
      },
    }),
  });

describe("the shard controller (issue 13)", () => {
  it("does nothing unless enabled (but size the entity shards, issue 24)", async () => {
    const decisions = await runShardController(env as never, loadConfig(env), Date.now());
    expect(decisions.map((d) => [d.store, d.action])).toEqual([["entity", "none"]]);
  });

  it("appends an entity generation with twice the shards once a shard holds more than entity_shard_split_bytes (issue 24)", async () => {
    const e = withVars({
      POLICY: JSON.stringify({
        client_cache_seconds: 0,
        entity_shard_split_bytes: 16 * 1024 ** 2,
        shard_controller: { enabled: true },
      }),
    });
    const config = loadConfig(e);
    const small = await runShardController(e as never, config, Date.now());
    expect(small.find((d) => d.store === "entity")?.action).toBe("none");
    // One shard past the limit: 20 MB of ballast written straight into its SQLite.
    const stub = env.ENTITIES.get(env.ENTITIES.idFromName("entity:g0:s0"));
    const { runInDurableObject } = await import("cloudflare:test");
    await runInDurableObject(stub, (_o, state) => {
      state.storage.sql.exec("CREATE TABLE IF NOT EXISTS ballast (n INTEGER PRIMARY KEY, b BLOB)");
      for (let i = 0; i < 20; i++) state.storage.sql.exec("INSERT INTO ballast (b) VALUES (zeroblob(1048576))");
    });
    const grown = await runShardController(e as never, config, Date.now());
    expect(grown.find((d) => d.store === "entity")).toMatchObject({ action: "grow", from: 16, to: 32 });
    const listed = (await (await admin("/shards", {}, e)).json()) as {
      stores: Record<string, { generations: number[] }>;
    };
    expect(listed.stores.entity?.generations).toEqual([16, 32]);
    await runInDurableObject(stub, (_o, state) => {
      state.storage.sql.exec("DROP TABLE ballast");
    });
  });

  it("still decides when shards were evicted and started again between two runs (their counts since the start)", async () => {
    const e = controllerEnv();
    const config = loadConfig(e);
    const t0 = Date.now();
    await runShardController(e as never, config, t0);
    // Every object restarts, as idle ones are evicted: the counters the first run read are gone.
    await abortAllDurableObjects();
    const client = await registerClient({}, e);
    for (let i = 0; i < 6; i++) await fullLogin(client, uniqueEmail("evicted"), { env: e });
    const second = await runShardController(e as never, config, Date.now() + 2_000);
    const session = second.find((d) => d.store === "session");
    expect(session?.busiest).not.toBeNull();
    expect(session).toMatchObject({ action: "grow", from: 3, to: 6 });
  });

  it("samples first, then doubles a store whose busiest shard ran above the ceiling, as a live generation", async () => {
    const e = controllerEnv();
    const config = loadConfig(e);
    const t0 = Date.now();
    // The first run only records each shard's counter: no rate yet.
    const first = await runShardController(e as never, config, t0);
    const stores = first.filter((d) => d.store !== "entity");
    expect(stores.map((d) => d.action)).toEqual(["none", "none", "none", "none", "none"]);
    expect(stores.every((d) => d.busiest === null)).toBe(true);

    // Six logins in the next two seconds: each session shard of three takes calls well above 0.5/s.
    const client = await registerClient({}, e);
    for (let i = 0; i < 6; i++) await fullLogin(client, uniqueEmail("ctl"), { env: e });
    const second = await runShardController(e as never, config, t0 + 2_000);
    const session = second.find((d) => d.store === "session");
    expect(session).toMatchObject({ action: "grow", from: 3, to: 6 });
    expect(session?.busiest).toBeGreaterThan(0.5);
    const listed = (await (await admin("/shards", {}, e)).json()) as {
      stores: Record<string, { generations: number[]; issue_from: (string | null)[] }>;
    };
    expect(listed.stores.session?.generations).toEqual([3, 6]);
    expect(listed.stores.session?.issue_from[1]).toBe(new Date(t0 + 2_000 + 90_000).toISOString());

    // While that generation is pending the controller does not append another.
    for (let i = 0; i < 3; i++) await fullLogin(client, uniqueEmail("ctl"), { env: e });
    const third = await runShardController(e as never, config, t0 + 4_000);
    expect(third.find((d) => d.store === "session")?.action).not.toBe("grow");
    const again = (await (await admin("/shards", {}, e)).json()) as typeof listed;
    expect(again.stores.session?.generations).toEqual([3, 6]);
  });

  it("halves a store whose every shard stayed below the floor, after the runs it asks for", async () => {
    const e = controllerEnv({ ceiling_per_shard: 1000, floor_per_shard: 100, runs: 2 });
    const config = loadConfig(e);
    const t0 = Date.now();
    await runShardController(e as never, config, t0);
    const once = await runShardController(e as never, config, t0 + 60_000);
    expect(once.find((d) => d.store === "code")?.action).toBe("none"); // one cold run of the two it needs
    const twice = await runShardController(e as never, config, t0 + 120_000);
    expect(twice.find((d) => d.store === "code")).toMatchObject({ action: "shrink", from: 3, to: 1 });
  });
});
