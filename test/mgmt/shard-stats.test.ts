import { describe, expect, it } from "vitest";
import { admin, call, fullLogin, registerClient } from "../support/harness";

interface StoreStats {
  total: number;
  imbalance: number | null;
  shards: { generation: number; shard: number; served: number }[];
}

async function stats(): Promise<Record<string, StoreStats>> {
  const res = await admin("/stats");
  expect(res.status).toBe(200);
  return ((await res.json()) as { stores: Record<string, StoreStats> }).stores;
}

describe("per-shard request counts (GET /admin/v1/stats)", () => {
  it("lists every shard of every store and counts the verb calls a login makes", async () => {
    const before = await stats();
    expect(Object.keys(before).sort()).toEqual(["challenge", "code", "refresh", "revocation", "session"]);
    for (const store of Object.values(before)) expect(store.shards).toHaveLength(3);

    const client = await registerClient();
    await fullLogin(client);
    const after = await stats();
    const delta = (store: string) => (after[store]?.total ?? 0) - (before[store]?.total ?? 0);
    // beginLogin, bindEmail, pendingLogin, completeLogin, resumeLogin
    expect(delta("session")).toBe(5);
    // takeIpQuota x2, issueChallenge, verifyChallenge
    expect(delta("challenge")).toBe(4);
    // issueCode, consumeCode
    expect(delta("code")).toBe(2);
    // createFamily
    expect(delta("refresh")).toBe(1);
    // The login itself does not touch revocations; userinfo would.
    expect(delta("revocation")).toBe(0);
  });

  it("requires the admin token", async () => {
    expect((await call("/admin/v1/stats")).status).toBe(401);
    expect((await call("/admin/v1/stats", { headers: { Authorization: "Bearer nope" } })).status).toBe(401);
  });
});
