import { describe, expect, it } from "vitest";
import { appendInput } from "../../workers/op-mgmt/src/shards";
import {
  ENTITY_BYTES,
  MAX_SHARDS,
  PEAK_CALLS_PER_SHARD,
  planEntityShards,
  planShards,
} from "../../workers/shared/config/shard-plan";
import { admin, fullLogin, registerClient } from "../support/harness";

describe("the shard planner (issue 13)", () => {
  it("gives each store enough shards for its peak calls, and says when the warm floor cannot hold", () => {
    const plan = planShards({ peak: 300, typical: 100, refresh_per_login: 6, userinfo_per_s: 50 });
    const by = Object.fromEntries(plan.map((p) => [p.store, p]));
    // The challenge shard takes 2 calls a login: 600/s at peak needs 2 shards.
    expect(by.challenge).toMatchObject({ calls_per_login: 2, peak_calls_per_s: 600, shards: 2 });
    // Each refresh adds a rotation and a revocation check; userinfo adds revocation reads.
    expect(by.refresh).toMatchObject({ calls_per_login: 7, peak_calls_per_s: 2100, shards: 7 });
    expect(by.revocation).toMatchObject({ peak_calls_per_s: 2150, shards: 8 });
    for (const p of plan) expect(p.peak_per_shard).toBeLessThanOrEqual(PEAK_CALLS_PER_SHARD);
    // A spiky, quiet service: the peak needs 4 shards, the typical load keeps only 1 warm.
    const spiky = planShards({ peak: 1200, typical: 2 });
    const session = spiky.find((p) => p.store === "session");
    expect(session?.shards).toBe(4);
    expect(session?.reasoning).toContain("the bounds cross");
    expect(planShards({ peak: 0, typical: 0 }).every((p) => p.shards === 1)).toBe(true);
  });

  it("proposes no count the admin API refuses, however large the traffic (issue 27 item 13)", async () => {
    const plan = planShards({ peak: 1_000_000, typical: 500_000, refresh_per_login: 4, userinfo_per_s: 100_000 });
    for (const p of plan) {
      expect(p.shards, p.store).toBeLessThanOrEqual(MAX_SHARDS);
      expect(appendInput.safeParse({ store: p.store, shards: p.shards }).success, p.store).toBe(true);
    }
    const challenge = plan.find((p) => p.store === "challenge");
    expect(challenge?.shards).toBe(MAX_SHARDS);
    expect(challenge?.reasoning).toContain(`capped at ${MAX_SHARDS}`);
    // The same through the API: every count it proposes, it accepts.
    const res = await admin("/shards/plan", { method: "POST", json: { peak: 1_000_000, typical: 500_000 } });
    const served = (await res.json()) as { shards: Record<string, number> };
    for (const [store, shards] of Object.entries(served.shards))
      expect(appendInput.safeParse({ store, shards }).success, store).toBe(true);
  });

  it("serves the same plan at POST /admin/v1/shards/plan, validated", async () => {
    const res = await admin("/shards/plan", { method: "POST", json: { peak: 300, typical: 100 } });
    expect(res.status, await res.clone().text()).toBe(200);
    const { plan, shards } = (await res.json()) as {
      plan: { store: string; shards: number }[];
      shards: Record<string, number>;
    };
    expect(plan).toEqual(planShards({ peak: 300, typical: 100 }));
    expect(shards).toEqual({ session: 1, challenge: 2, code: 1, refresh: 1, revocation: 1 });
    for (const bad of [
      { peak: -1, typical: 0 },
      { peak: 10, typical: 20 },
      { peak: 10 },
      { peak: 1, typical: 1, x: 1 },
    ]) {
      const r = await admin("/shards/plan", { method: "POST", json: bad });
      expect(r.status, JSON.stringify(bad)).toBe(400);
    }
  });

  it("plans from the calls the stores take now (measured), per region, and refuses a bad window", async () => {
    const client = await registerClient();
    const planned = admin("/shards/plan", {
      method: "POST",
      json: { measured: { window_seconds: 1, peak_factor: 4 } },
    });
    // Logins while the planner watches the counters.
    const logins = (async () => {
      for (let i = 0; i < 3; i++) await fullLogin(client);
    })();
    const [res] = await Promise.all([planned, logins]);
    expect(res.status, await res.clone().text()).toBe(200);
    const body = (await res.json()) as {
      window_seconds: number;
      peak_factor: number;
      regions: Record<
        string,
        {
          measured: Record<string, number>;
          plan: {
            store: string;
            peak_calls_per_s: number;
            typical_calls_per_s: number;
            calls_per_login: number | null;
          }[];
          shards: Record<string, number>;
        }
      >;
    };
    expect(body).toMatchObject({ window_seconds: 1, peak_factor: 4 });
    const global = body.regions.global;
    expect(global?.measured.challenge).toBeGreaterThan(0);
    for (const p of global?.plan ?? []) {
      expect(p.calls_per_login).toBeNull();
      expect(p.typical_calls_per_s).toBe(global?.measured[p.store]);
      expect(p.peak_calls_per_s).toBeCloseTo((global?.measured[p.store] ?? 0) * 4, 0);
    }
    expect(Object.keys(global?.shards ?? {}).sort()).toEqual(["challenge", "code", "refresh", "revocation", "session"]);
    for (const bad of [
      { measured: { window_seconds: 0 } },
      { measured: { window_seconds: 31 } },
      { measured: { peak_factor: 0.5 } },
      { measured: {}, peak: 1 },
    ]) {
      const r = await admin("/shards/plan", { method: "POST", json: bad });
      expect(r.status, JSON.stringify(bad)).toBe(400);
    }
  });
});

describe("the entity store's plan (issue 24)", () => {
  it("is sized by the entities it will hold: at most 2 GiB a shard, never fewer than 16", () => {
    expect(planEntityShards(1_000_000).shards).toBe(16);
    const big = planEntityShards(500_000_000);
    expect(big.shards).toBe(Math.ceil((500_000_000 * ENTITY_BYTES) / 2 ** 31));
    expect(big.bytes_per_shard).toBeLessThanOrEqual(2 ** 31);
    expect(planEntityShards(1e12).shards).toBe(MAX_SHARDS);
  });
});
