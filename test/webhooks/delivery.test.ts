import { abortAllDurableObjects, env, runInDurableObject } from "cloudflare:test";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import { forgetWebhookSubscribers } from "../../durable-objects/webhook-handoff";
import { webhookUrlProblem } from "../../workers/shared/events/webhooks/endpoints";
import {
  admin,
  auditEvents,
  Browser,
  form,
  fullLogin,
  latestCode,
  pinClock,
  pkce,
  policy,
  registerClient,
  runAlarmSettled,
  type Store,
  shardStub,
  sql,
  uniqueEmail,
  withVars,
  writeBehindStub,
} from "../support/harness";

// Webhooks (issue 25): events from the audit trail, delivered at least once by the WebhookOutbox to a
// real receiver (the Node HTTP server of test/support/global-setup.ts), signed by the Standard Webhooks
// scheme and checked with its reference verifier (npm standardwebhooks).

afterEach(() => vi.useRealTimers());

const receiverPort = () => (env as unknown as { TEST_MAIL_PEERS: { httpPort: number } }).TEST_MAIL_PEERS.httpPort;
let hookCounter = 0;
/** A receiver URL; its name's prefix picks its behaviour (`down-`, `fail<N>-`, `redirect-`). */
const receiver = (prefix = "ok") => {
  const name = `${prefix}-${++hookCounter}-${Math.random().toString(36).slice(2, 8)}`;
  return { name, url: `http://127.0.0.1:${receiverPort()}/hooks/${name}` };
};

interface Received {
  at: number;
  headers: Record<string, string>;
  body: string;
  answered: number;
}
async function received(name: string): Promise<Received[]> {
  const res = await fetch(`http://127.0.0.1:${receiverPort()}/hooks/${name}`);
  return ((await res.json()) as { received: Received[] }).received;
}
async function setReceiver(name: string, state: "up" | "down"): Promise<void> {
  await fetch(`http://127.0.0.1:${receiverPort()}/hooks-control/${name}?state=${state}`, { method: "POST" });
}

interface Endpoint {
  id: string;
  secret: string;
  url: string;
  enabled: boolean;
  events: string[];
}
async function createEndpoint(url: string, events: string[] = ["*"]): Promise<Endpoint> {
  // Events of earlier tests still in an outbox are handed over now, before this endpoint exists.
  await flushAudit();
  const res = await admin("/webhooks", { method: "POST", json: { url, events, description: "test" } });
  expect(res.status, await res.clone().text()).toBe(201);
  // The stores read a tenant's endpoints at most every 5 s per isolate; the test does not wait for that.
  forgetWebhookSubscribers();
  return (await res.json()) as Endpoint;
}

/** The endpoint's WebhookOutbox shard, by the address D1 keeps for it. */
async function queueOf(endpoint: { id: string }): Promise<DurableObjectStub> {
  const row = await env.DB.prepare("SELECT shard FROM webhook_endpoints WHERE id = ?")
    .bind(endpoint.id)
    .first<{ shard: string }>();
  return env.WEBHOOKS.get(env.WEBHOOKS.idFromName(row?.shard as string));
}

const STORES: Store[] = ["session", "challenge", "code", "revocation", "refresh"];
/** Every audit outbox and buffer flushes to D1 and hands its events to the webhook queues (the alarms). */
async function flushAudit(): Promise<void> {
  for (const stub of [
    ...STORES.flatMap((s) => [0, 1, 2].map((n) => shardStub(s, 0, n))),
    ...[0, 1, 2, 3].map((n) => writeBehindStub("audit", n)),
  ])
    await runAlarmSettled(stub);
}

/** One run of the queue's alarm: every due message is attempted. */
async function deliver(endpoint: { id: string }): Promise<void> {
  await runAlarmSettled(await queueOf(endpoint));
}

const messagesOf = async (endpoint: { id: string }) =>
  sql<{ id: string; status: string; attempts: number; next_at: number; first_at: number }>(
    await queueOf(endpoint),
    "SELECT id, status, attempts, next_at, first_at FROM messages WHERE endpoint_id = ? ORDER BY created_at, id",
    endpoint.id,
  );

const verify = (secret: string, r: Received) =>
  new Webhook(secret).verify(r.body, {
    "webhook-id": r.headers["webhook-id"] as string,
    "webhook-timestamp": r.headers["webhook-timestamp"] as string,
    "webhook-signature": r.headers["webhook-signature"] as string,
  }) as { type: string; tenant: string; timestamp: string; data: Record<string, unknown>; api_version: number };

describe("webhooks: delivery (issue 25)", () => {
  it("delivers a sign-in that a Standard Webhooks verifier accepts, and nothing the endpoint did not ask for", async () => {
    const hook = receiver();
    const endpoint = await createEndpoint(hook.url, ["user.signed_in"]);
    expect(endpoint.secret).toMatch(/^whsec_/);
    const client = await registerClient();
    const { tokens } = await fullLogin(client, uniqueEmail("hook"));
    // A wrong code (user.sign_in_failed), which this endpoint did not subscribe to.
    const browser = new Browser();
    const email = uniqueEmail("typo");
    const tx = await browser.startLogin(client, (await pkce()).challenge);
    await browser.postJson("/email-code/generate", { tx, email });
    const real = await latestCode(email);
    await browser.postJson("/email-code/verify", { tx, email, code: real === "000000" ? "111111" : "000000" });

    await flushAudit();
    await deliver(endpoint);
    const got = await received(hook.name);
    expect(got).toHaveLength(1);
    const message = got[0] as Received;
    expect(message.headers["content-type"]).toBe("application/json");
    const payload = verify(endpoint.secret, message);
    expect(payload).toMatchObject({ type: "user.signed_in", tenant: "default", api_version: 1 });
    const sub = JSON.parse(atob((tokens.id_token.split(".")[1] as string).replace(/-/g, "+").replace(/_/g, "/"))).sub;
    expect(payload.data.user_id).toBe(sub);
    // A tampered body fails the same verifier.
    expect(() =>
      verify(endpoint.secret, { ...message, body: message.body.replace("signed_in", "signed_up") }),
    ).toThrow();
    // Delivered once: the queue says so, and another run sends nothing again.
    expect((await messagesOf(endpoint)).map((m) => m.status)).toEqual(["delivered"]);
    await deliver(endpoint);
    expect(await received(hook.name)).toHaveLength(1);
    // The attempt is visible to the operator.
    const attempts = (await (await admin(`/webhooks/${endpoint.id}/attempts`)).json()) as {
      attempts: { status: number; error: string | null; next_at: string | null }[];
    };
    expect(attempts.attempts).toMatchObject([{ status: 200, error: null, next_at: null }]);
  });

  it("announces a sign-up as user.created, once: a returning user's sign-in creates nothing", async () => {
    const at = pinClock();
    const hook = receiver();
    const endpoint = await createEndpoint(hook.url, ["user.created"]);
    const client = await registerClient();
    const email = uniqueEmail("signup");
    const first = await fullLogin(client, email);
    at(61_000); // past the address's resend interval
    await fullLogin(client, email, { browser: new Browser() });
    await flushAudit();
    await deliver(endpoint);
    const got = await received(hook.name);
    expect(got).toHaveLength(1);
    const payload = verify(endpoint.secret, got[0] as Received);
    const sub = JSON.parse(
      atob((first.tokens.id_token.split(".")[1] as string).replace(/-/g, "+").replace(/_/g, "/")),
    ).sub;
    expect(payload).toMatchObject({ type: "user.created", data: { user_id: sub, via: "sign_up" } });
  });

  it("announces a grant its client revoked (RFC 7009) as grant.revoked", async () => {
    const hook = receiver();
    const endpoint = await createEndpoint(hook.url, ["grant.revoked"]);
    const client = await registerClient();
    const { tokens } = await fullLogin(client, uniqueEmail("revoke"));
    expect((await form(client, { token: tokens.refresh_token as string }, "/revoke")).status).toBe(200);
    await flushAudit();
    await deliver(endpoint);
    const got = await received(hook.name);
    expect(got).toHaveLength(1);
    expect(verify(endpoint.secret, got[0] as Received)).toMatchObject({
      type: "grant.revoked",
      data: { client_id: client.client_id },
    });
  });

  it("retries a receiver that is down, keeps the queue across a restart, and delivers each message once when it is back", async () => {
    const at = pinClock();
    const hook = receiver("down");
    const endpoint = await createEndpoint(hook.url, ["user.signed_in"]);
    const client = await registerClient();
    await fullLogin(client, uniqueEmail("down1"));
    await fullLogin(client, uniqueEmail("down2"));
    await flushAudit();
    await deliver(endpoint);
    let messages = await messagesOf(endpoint);
    expect(messages.map((m) => [m.status, m.attempts])).toEqual([
      ["pending", 1],
      ["pending", 1],
    ]);
    // The first retry comes about 5 s later (with jitter), not at once.
    for (const m of messages) expect(m.next_at - m.first_at).toBeGreaterThanOrEqual(4_000);
    // Every Durable Object restarts: nothing of the queue was in memory.
    await abortAllDurableObjects();
    at(10_000);
    await deliver(endpoint);
    messages = await messagesOf(endpoint);
    expect(messages.map((m) => [m.status, m.attempts])).toEqual([
      ["pending", 2],
      ["pending", 2],
    ]);
    await setReceiver(hook.name, "up");
    at(10_000 + 60_000);
    await deliver(endpoint);
    expect((await messagesOf(endpoint)).map((m) => m.status)).toEqual(["delivered", "delivered"]);
    const got = await received(hook.name);
    expect(got.map((r) => r.answered)).toEqual([503, 503, 503, 503, 200, 200]);
    // Each message reached the receiver (a 200) once, under the same webhook-id as its failed tries.
    const delivered = got.filter((r) => r.answered === 200).map((r) => r.headers["webhook-id"]);
    expect(new Set(delivered).size).toBe(2);
    expect(new Set(got.map((r) => r.headers["webhook-id"]))).toEqual(new Set(delivered));
    for (const r of got) verify(endpoint.secret, r);
  });

  it("brings an endpoint's backlog forward once a delivery to it succeeds, each message delivered once (issue 38 item 12a)", async () => {
    const start = Date.now();
    const at = pinClock(start);
    const hook = receiver("down");
    const endpoint = await createEndpoint(hook.url, ["webhook.test"]);
    for (let i = 0; i < 3; i++) await admin(`/webhooks/${endpoint.id}/test`, { method: "POST" });
    // Four failed attempts each (5 s, 30 s, 2 min, then the 10-minute step), the receiver down at each.
    let now = 0;
    for (let attempt = 0; attempt < 4; attempt++) {
      await deliver(endpoint);
      now = Math.max(...(await messagesOf(endpoint)).map((m) => m.next_at)) - start;
      if (attempt < 3) at(now);
    }
    const backlog = await messagesOf(endpoint);
    expect(backlog.map((m) => [m.status, m.attempts])).toEqual(Array(3).fill(["pending", 4]));
    const waiting = Math.min(...backlog.map((m) => m.next_at));
    // The receiver answers again: a new message, due now, is delivered ...
    await setReceiver(hook.name, "up");
    const later = now - 600_000 * 0.8 + 1_000;
    at(later);
    expect(start + later).toBeLessThan(waiting - 60_000);
    await admin(`/webhooks/${endpoint.id}/test`, { method: "POST" });
    await deliver(endpoint);
    // ... and the backlog is due within seconds, not at its 10-minute step.
    const brought = (await messagesOf(endpoint)).filter((m) => m.status === "pending");
    expect(brought).toHaveLength(3);
    for (const m of brought) expect(m.next_at - (start + later)).toBeLessThanOrEqual(5_000);
    at(later + 5_000);
    await deliver(endpoint);
    expect((await messagesOf(endpoint)).map((m) => m.status)).toEqual(Array(4).fill("delivered"));
    // Each message reached the receiver (a 200) once.
    const ok = (await received(hook.name)).filter((r) => r.answered === 200).map((r) => r.headers["webhook-id"]);
    expect(ok).toHaveLength(4);
    expect(new Set(ok).size).toBe(4);
    // Another success finds nothing more to bring forward.
    await admin(`/webhooks/${endpoint.id}/test`, { method: "POST" });
    await deliver(endpoint);
    expect((await received(hook.name)).filter((r) => r.answered === 200)).toHaveLength(5);
  });

  it("upgrades a queue from before the backlog was brought forward, keeping its messages", async () => {
    const name = `test-webhook-upgrade-${Math.random()}`;
    const old = env.WEBHOOKS.get(env.WEBHOOKS.idFromName(name));
    // The messages table as issue 25 made it, with a pending message, then a new instance over it.
    await runInDurableObject(old, (_i, state) => {
      state.storage.sql.exec(`CREATE TABLE messages (key TEXT PRIMARY KEY, id TEXT NOT NULL, endpoint_id TEXT NOT NULL,
        tenant TEXT NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL,
        first_at INTEGER NOT NULL, next_at INTEGER NOT NULL, last_status INTEGER, last_error TEXT,
        created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID`);
      state.storage.sql.exec(
        "INSERT INTO messages VALUES ('m1:e1', 'm1', 'e1', 'default', 'webhook.test', '{}', 'pending', 2, 1, 2, 503, 'answered 503', 1, ?)",
        Date.now() + 86_400_000,
      );
    });
    const upgraded = env.WEBHOOKS.get(env.WEBHOOKS.idFromName(name));
    const columns = await runInDurableObject(upgraded, (instance, state) => {
      const fresh = new (instance.constructor as new (ctx: DurableObjectState, env: unknown) => unknown)(
        (instance as unknown as { ctx: DurableObjectState }).ctx,
        env,
      ) as { schemaReady(): void };
      fresh.schemaReady();
      return state.storage.sql
        .exec<{ name: string }>("SELECT name FROM pragma_table_info('messages')")
        .toArray()
        .map((c) => c.name);
    });
    expect(columns).toContain("brought_forward");
    const kept = (await (upgraded as unknown as { listMessages: (...a: unknown[]) => Promise<unknown[]> }).listMessages(
      "e1",
      "pending",
      10,
    )) as { id: string; attempts: number }[];
    expect(kept.map((m) => [m.id, m.attempts])).toEqual([["m1", 2]]);
  });

  it("fails a message after a day of retries (the dead letter), and replays it on demand", async () => {
    const start = Date.now();
    const at = pinClock(start);
    const hook = receiver("down");
    const endpoint = await createEndpoint(hook.url, ["webhook.test"]);
    expect((await admin(`/webhooks/${endpoint.id}/test`, { method: "POST" })).status).toBe(202);
    let attempts = 0;
    for (let i = 0; i < 30; i++) {
      const [m] = await messagesOf(endpoint);
      if (m?.status !== "pending") break;
      at((m.next_at as number) - start);
      await deliver(endpoint);
      attempts++;
    }
    const [dead] = await messagesOf(endpoint);
    expect(dead?.status).toBe("failed");
    // Retried with growing delays for the whole day, then given up.
    expect(attempts).toBeGreaterThanOrEqual(8);
    expect(Date.now() - start).toBeGreaterThanOrEqual(86_400_000);
    const failed = (await (await admin(`/webhooks/${endpoint.id}/messages?status=failed`)).json()) as {
      messages: { id: string; attempts: number }[];
    };
    expect(failed.messages).toHaveLength(1);
    // The receiver is back: replay the dead letter by its id.
    await setReceiver(hook.name, "up");
    const replay = await admin(`/webhooks/${endpoint.id}/replay`, {
      method: "POST",
      json: { message_id: failed.messages[0]?.id },
    });
    expect(await replay.json()).toEqual({ replayed: 1 });
    await deliver(endpoint);
    expect((await messagesOf(endpoint)).map((m) => m.status)).toEqual(["delivered"]);
    // Replay by time: everything since the start, delivered again (the receiver deduplicates by id).
    const since = await admin(`/webhooks/${endpoint.id}/replay`, {
      method: "POST",
      json: { since: new Date(start - 1000).toISOString() },
    });
    expect(await since.json()).toEqual({ replayed: 1 });
    await deliver(endpoint);
    const ok = (await received(hook.name)).filter((r) => r.answered === 200);
    expect(ok).toHaveLength(2);
    expect(ok[0]?.headers["webhook-id"]).toBe(ok[1]?.headers["webhook-id"]);
  });

  it("signs with both secrets while a rotated one overlaps, then with the new one alone", async () => {
    const start = Date.now();
    const at = pinClock(start);
    const hook = receiver();
    const endpoint = await createEndpoint(hook.url, ["webhook.test"]);
    const rotated = await admin(`/webhooks/${endpoint.id}/rotate-secret`, {
      method: "POST",
      json: { overlap_seconds: 3600 },
    });
    const { secret } = (await rotated.json()) as { secret: string };
    expect(secret).not.toBe(endpoint.secret);
    await admin(`/webhooks/${endpoint.id}/test`, { method: "POST" });
    await deliver(endpoint);
    const [during] = await received(hook.name);
    expect(during?.headers["webhook-signature"]?.split(" ")).toHaveLength(2);
    // A receiver on either secret accepts it.
    expect(verify(endpoint.secret, during as Received).type).toBe("webhook.test");
    expect(verify(secret, during as Received).type).toBe("webhook.test");
    // After the overlap, only the new secret signs.
    at(3_601_000);
    await admin(`/webhooks/${endpoint.id}/test`, { method: "POST" });
    await deliver(endpoint);
    const after = (await received(hook.name))[1] as Received;
    expect(after.headers["webhook-signature"]?.split(" ")).toHaveLength(1);
    expect(() => verify(endpoint.secret, after)).toThrow();
    expect(verify(secret, after).type).toBe("webhook.test");
  });

  it("disables an endpoint that keeps failing, with an audit event, and fails its messages until it is enabled", async () => {
    const start = Date.now();
    const at = pinClock(start);
    const hook = receiver("down");
    const endpoint = await createEndpoint(hook.url, ["webhook.test"]);
    // 50 messages, each attempted once: 50 failed attempts in a row ...
    for (let i = 0; i < 50; i++) await admin(`/webhooks/${endpoint.id}/test`, { method: "POST" });
    // An alarm run attempts what its time allows (fewer on a loaded machine): run it until all 50 were tried.
    const failures = () =>
      env.DB.prepare("SELECT enabled, consecutive_failures FROM webhook_endpoints WHERE id = ?")
        .bind(endpoint.id)
        .first<{ enabled: number; consecutive_failures: number }>();
    let row = await failures();
    for (let i = 0; i < 20 && (row?.consecutive_failures ?? 0) < 50; i++) {
      await deliver(endpoint);
      row = await failures();
    }
    // ... but not yet failing for three days: still enabled. (A slow run may also have retried one whose
    // backoff ran out while the others were tried: 50 or more in a row, never fewer.)
    expect(row?.enabled).toBe(1);
    expect(row?.consecutive_failures).toBeGreaterThanOrEqual(50);
    at(3 * 86_400_000 + 1_000);
    await deliver(endpoint);
    row = await env.DB.prepare("SELECT enabled, consecutive_failures FROM webhook_endpoints WHERE id = ?")
      .bind(endpoint.id)
      .first<{ enabled: number; consecutive_failures: number }>();
    expect(row?.enabled).toBe(0);
    const view = (await (await admin(`/webhooks/${endpoint.id}`)).json()) as {
      enabled: boolean;
      disabled_reason: string;
    };
    expect(view.enabled).toBe(false);
    expect(view.disabled_reason).toContain("failed attempts in a row");
    // The audit event, once the queue's own outbox flushes.
    await deliver(endpoint);
    const event = await env.DB.prepare(
      `SELECT detail FROM ${await auditEvents()} WHERE kind = 'webhook_disabled' AND detail LIKE ?`,
    )
      .bind(`%${endpoint.id}%`)
      .first<{ detail: string }>();
    expect(event).not.toBeNull();
    // Disabled: its remaining messages fail without a request; enabling it and replaying sends them.
    const before = (await received(hook.name)).length;
    at(3 * 86_400_000 + 120_000);
    await deliver(endpoint);
    await deliver(endpoint);
    expect((await received(hook.name)).length).toBe(before);
    await setReceiver(hook.name, "up");
    const enabled = await admin(`/webhooks/${endpoint.id}`, { method: "PATCH", json: { enabled: true } });
    expect(((await enabled.json()) as { enabled: boolean; consecutive_failures: number }).consecutive_failures).toBe(0);
    const replay = await admin(`/webhooks/${endpoint.id}/replay`, {
      method: "POST",
      json: { since: new Date(start - 1000).toISOString() },
    });
    expect(((await replay.json()) as { replayed: number }).replayed).toBe(50);
    await deliver(endpoint);
    await deliver(endpoint);
    expect((await messagesOf(endpoint)).every((m) => m.status === "delivered")).toBe(true);
  });

  it("follows no redirect: a 3xx is a failed attempt", async () => {
    const hook = receiver("redirect");
    const endpoint = await createEndpoint(hook.url, ["webhook.test"]);
    await admin(`/webhooks/${endpoint.id}/test`, { method: "POST" });
    await deliver(endpoint);
    const attempts = (await (await admin(`/webhooks/${endpoint.id}/attempts`)).json()) as {
      attempts: { status: number; error: string; next_at: string | null }[];
    };
    expect(attempts.attempts[0]).toMatchObject({ status: 302, error: "redirects are not followed" });
    expect(attempts.attempts[0]?.next_at).not.toBeNull();
    expect(await received(`ok-${hook.name}`)).toHaveLength(0);
  });
});

describe("webhooks: endpoints (issue 25)", () => {
  it("refuses URLs that could reach inside: private, link-local, non-https, credentials", async () => {
    for (const url of [
      "https://10.0.0.5/hook",
      "https://192.168.1.1/hook",
      "https://169.254.169.254/latest",
      "https://[fe80::1]/hook",
      "https://[::ffff:10.0.0.1]/hook",
      "http://example.com/hook",
      "https://user:pw@example.com/hook",
      "ftp://example.com/hook",
      "not a url",
    ]) {
      const res = await admin("/webhooks", { method: "POST", json: { url, events: ["*"] } });
      expect(res.status, url).toBe(400);
    }
    expect(
      (
        await admin("/webhooks", {
          method: "POST",
          json: { url: "https://hooks.example.com/x", events: ["user.nope"] },
        })
      ).status,
    ).toBe(400);
    // In production, https only and no loopback.
    expect(webhookUrlProblem("http://127.0.0.1:9/x", true)).not.toBeNull();
    expect(webhookUrlProblem("https://127.0.0.1/x", true)).not.toBeNull();
    expect(webhookUrlProblem("https://hooks.example.com/x", true)).toBeNull();
    for (const hidden of [
      "https://[::a9fe:a9fe]/x",
      "https://[64:ff9b::a00:1]/x",
      "https://[ff02::1]/x",
      "https://localhost./x",
    ])
      expect(webhookUrlProblem(hidden, true), hidden).not.toBeNull();
  });

  it("shows the secret once, keeps it sealed, and lists, changes and deletes endpoints per tenant", async () => {
    const hook = receiver();
    const endpoint = await createEndpoint(hook.url, ["user.signed_in", "user.locked"]);
    const read = (await (await admin(`/webhooks/${endpoint.id}`)).json()) as Record<string, unknown>;
    expect(read.secret).toBeUndefined();
    expect(read.events).toEqual(["user.signed_in", "user.locked"]);
    const row = await env.DB.prepare("SELECT secret_sealed FROM webhook_endpoints WHERE id = ?")
      .bind(endpoint.id)
      .first<{ secret_sealed: string }>();
    expect(row?.secret_sealed).not.toContain(endpoint.secret.slice(6, 20));
    const patched = await admin(`/webhooks/${endpoint.id}`, {
      method: "PATCH",
      json: { events: ["*"], enabled: false },
    });
    expect(await patched.json()).toMatchObject({ events: ["*"], enabled: false });
    // Another tenant does not see it.
    const tenant = `wh-${Math.random().toString(36).slice(2, 8)}`;
    expect((await admin("/tenants", { method: "POST", json: { id: tenant, name: "Webhook tenant" } })).status).toBe(
      201,
    );
    expect((await admin(`/tenants/${tenant}/webhooks/${endpoint.id}`)).status).toBe(404);
    const listed = (await (await admin(`/tenants/${tenant}/webhooks`)).json()) as { webhooks: unknown[] };
    expect(listed.webhooks).toEqual([]);
    expect((await admin(`/webhooks/${endpoint.id}`, { method: "DELETE" })).status).toBe(204);
    expect((await admin(`/webhooks/${endpoint.id}`)).status).toBe(404);
  });

  it("pages the list with a cursor and caps a tenant's endpoints at webhook_endpoints_per_tenant (issue 38 item 5)", async () => {
    const tenant = `whcap-${Math.random().toString(36).slice(2, 8)}`;
    expect((await admin("/tenants", { method: "POST", json: { id: tenant, name: "Capped" } })).status).toBe(201);
    const cap = 7;
    const capped = withVars({ POLICY: policy({ webhook_endpoints_per_tenant: cap }) });
    const create = () =>
      admin(`/tenants/${tenant}/webhooks`, { method: "POST", json: { url: receiver().url, events: ["*"] } }, capped);
    const ids: string[] = [];
    for (let i = 0; i < cap; i++) {
      const res = await create();
      expect(res.status, await res.clone().text()).toBe(201);
      ids.push(((await res.json()) as { id: string }).id);
    }
    // One over the cap: a clear 409, and nothing stored (a hidden endpoint would receive every event).
    const over = await create();
    expect(over.status).toBe(409);
    expect(((await over.json()) as { error_description: string }).error_description).toContain(
      "webhook_endpoints_per_tenant",
    );
    const stored = await env.DB.prepare("SELECT COUNT(*) AS n FROM webhook_endpoints WHERE tenant = ?")
      .bind(tenant)
      .first<{ n: number }>();
    expect(stored?.n).toBe(cap);
    // Every endpoint is reachable through the pages, each once, and the last page says so.
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const res = await admin(`/tenants/${tenant}/webhooks?limit=3${cursor ? `&after=${cursor}` : ""}`);
      expect(res.status).toBe(200);
      const body = (await res.json()) as { webhooks: { id: string }[]; next: string | null };
      expect(body.webhooks.length).toBeLessThanOrEqual(3);
      seen.push(...body.webhooks.map((w) => w.id));
      cursor = body.next;
      if (!cursor) break;
    }
    expect(seen.sort()).toEqual([...ids].sort());
    expect((await admin(`/tenants/${tenant}/webhooks?limit=0`)).status).toBe(400);
    // Deleting one makes room for one.
    expect((await admin(`/tenants/${tenant}/webhooks/${ids[0]}`, { method: "DELETE" })).status).toBe(204);
    expect((await create()).status).toBe(201);
    expect((await create()).status).toBe(409);
  });

  it("counts deliveries in GET /admin/v1/stats", async () => {
    const hook = receiver();
    const endpoint = await createEndpoint(hook.url, ["webhook.test"]);
    await admin(`/webhooks/${endpoint.id}/test`, { method: "POST" });
    await deliver(endpoint);
    const stats = (await (await admin("/stats")).json()) as { webhooks: Record<string, number> };
    expect(stats.webhooks.delivered).toBeGreaterThanOrEqual(1);
    expect(stats.webhooks).toHaveProperty("pending");
    expect(stats.webhooks).toHaveProperty("failed");
  });
});
