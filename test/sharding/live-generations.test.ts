import { env } from "cloudflare:test";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { forgetLiveGenerations } from "../../workers/shared/live-shards";
import {
  admin,
  fullLogin,
  idParts,
  pinClock,
  refreshGrant,
  registerClient,
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

  it("appends no generation past the last one an id can name (issue 27 item 13, in part)", async () => {
    // As if 1,295 generations had been appended: the row alone (a gap, so nothing routes by it).
    const past = Date.now() - 3_600_000;
    await env.DB.prepare(
      "INSERT INTO shard_generations (store, gen, shards, issue_from, created_at) VALUES ('code', 1295, 2, ?, ?)",
    )
      .bind(past, past)
      .run();
    try {
      const res = await admin("/shards", { method: "POST", json: { store: "code", shards: 2 } });
      expect(res.status).toBe(409);
      expect(((await res.json()) as { error_description: string }).error_description).toContain(
        "the most an id can name",
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
});
