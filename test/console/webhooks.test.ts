import { env } from "cloudflare:test";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type Browser, pinClock, runAlarmSettled, uniqueEmail } from "../support/harness";
import { createTenant, tenantAdmin } from "../tenants/support";
import { csrfOf, grant, signIn } from "./support";

// The console's webhooks pages (issue 43): endpoints, the delivery log, messages and replay, a test
// event, a new secret, disabling and deleting, each through the admin API and checked by the stored
// state the platform token reads back. Deliveries reach the Node receiver of test/support/global-setup.ts.

afterEach(() => vi.useRealTimers());

interface StoredHook {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  secret_rotation_ends: string | null;
}

const receiverPort = () => (env as unknown as { TEST_MAIL_PEERS: { httpPort: number } }).TEST_MAIL_PEERS.httpPort;
const receiver = (prefix = "ok") => {
  const name = `${prefix}-console-${Math.random().toString(36).slice(2, 10)}`;
  return { name, url: `http://127.0.0.1:${receiverPort()}/hooks/${name}` };
};
const received = async (name: string) =>
  (
    (await (await fetch(`http://127.0.0.1:${receiverPort()}/hooks/${name}`)).json()) as {
      received: { headers: Record<string, string>; body: string; answered: number }[];
    }
  ).received;

function post(browser: Browser, path: string, csrf: string, fields: [string, string][]): Promise<Response> {
  return browser.fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams([["csrf", csrf], ...fields]),
  });
}

async function operatorOf(tenant: string): Promise<{ browser: Browser; csrf: string }> {
  const email = uniqueEmail("hooks-op");
  expect((await grant({ email, tenant })).status).toBe(201);
  const { browser, page } = await signIn(email);
  return { browser, csrf: csrfOf(await page.text()) };
}

const stored = async (tenant: string, id: string) => {
  const res = await tenantAdmin(tenant, `/webhooks/${id}`);
  return { status: res.status, hook: (await res.json()) as StoredHook };
};
const hookCount = async (tenant: string) =>
  ((await (await tenantAdmin(tenant, "/webhooks")).json()) as { webhooks: unknown[] }).webhooks.length;
const messagesOf = async (tenant: string, id: string, status?: string) =>
  (
    (await (await tenantAdmin(tenant, `/webhooks/${id}/messages${status ? `?status=${status}` : ""}`)).json()) as {
      messages: { id: string; type: string; status: string; next_at: string | null }[];
    }
  ).messages;

/** One run of the endpoint's queue alarm: every due message is attempted. */
async function deliver(id: string): Promise<void> {
  const row = await env.DB.prepare("SELECT shard FROM webhook_endpoints WHERE id = ?")
    .bind(id)
    .first<{ shard: string }>();
  await runAlarmSettled(env.WEBHOOKS.get(env.WEBHOOKS.idFromName(row?.shard as string)));
}

/** Adds an endpoint through the console; returns its id and the secret the answer showed. */
async function addThroughConsole(
  browser: Browser,
  csrf: string,
  tenant: string,
  url: string,
): Promise<{ id: string; secret: string }> {
  const res = await post(browser, `/console/t/${tenant}/webhooks`, csrf, [
    ["url", url],
    ["description", "Billing receiver"],
    ["events", "webhook.test"],
    ["events", "user.created"],
  ]);
  expect(res.status).toBe(200);
  expect(res.headers.get("cache-control")).toBe("no-store");
  const html = await res.text();
  const secret = /id="signing-secret">(whsec_[^<]+)</.exec(html)?.[1] as string;
  const id = new RegExp(`href="/console/t/${tenant}/webhooks/(kwh_[^"]+)"`).exec(html)?.[1] as string;
  expect(secret).toBeTruthy();
  expect(id).toBeTruthy();
  return { id, secret };
}

describe("console webhooks: who may reach what", () => {
  it("keeps a tenant operator out of another tenant's endpoints, by URL and by form", { timeout: 90_000 }, async () => {
    const mine = await createTenant({ name: "Hooks Mine" });
    const other = await createTenant({ name: "Hooks Other" });
    const created = await tenantAdmin(other.id, "/webhooks", {
      method: "POST",
      json: { url: receiver().url, events: ["*"], description: "Their receiver" },
    });
    const theirs = (await created.json()) as StoredHook;
    const { browser, csrf } = await operatorOf(mine.id);

    expect((await browser.fetch(`/console/t/${mine.id}/webhooks`)).status).toBe(200);
    for (const path of [
      `/console/t/${other.id}/webhooks`,
      `/console/t/${other.id}/webhooks/${theirs.id}`,
      `/console/t/${other.id}/webhooks/${theirs.id}/delete`,
    ]) {
      const res = await browser.fetch(path);
      expect(res.status, path).toBe(403);
      expect(await res.text()).not.toContain("Their receiver");
    }
    const before = await hookCount(other.id);
    const add = await post(browser, `/console/t/${other.id}/webhooks`, csrf, [
      ["url", receiver().url],
      ["events", "*"],
    ]);
    expect(add.status).toBe(403);
    expect(await hookCount(other.id)).toBe(before);
    for (const action of ["/delete", "/disable", "/rotate-secret", "/test", "/replay"])
      expect((await post(browser, `/console/t/${other.id}/webhooks/${theirs.id}${action}`, csrf, [])).status).toBe(403);

    // The other tenant's endpoint id under the operator's own tenant: the API does not find it there.
    const own = (rest: string) => `/console/t/${mine.id}/webhooks/${theirs.id}${rest}`;
    expect((await browser.fetch(own(""))).status).toBe(404);
    for (const [rest, fields] of [
      ["", [["url", receiver().url]]],
      ["/delete", []],
      ["/disable", []],
      ["/rotate-secret", [["overlap_seconds", "0"]]],
      ["/test", []],
      ["/replay", [["since", "2026-01-01T00:00"]]],
    ] as [string, [string, string][]][])
      expect((await post(browser, own(rest), csrf, fields)).status, rest).toBe(404);
    const after = await stored(other.id, theirs.id);
    expect(after.hook).toMatchObject({ url: theirs.url, enabled: true, secret_rotation_ends: null });
    expect(await messagesOf(other.id, theirs.id)).toEqual([]);
  });
});

describe("console webhooks: endpoints, deliveries, replay, secret, disable, delete", () => {
  it("adds an endpoint with its secret shown once; shows the API's refusal beside the URL, input kept", {
    timeout: 60_000,
  }, async () => {
    const tenant = await createTenant({ name: "Hooks Add" });
    const { browser, csrf } = await operatorOf(tenant.id);
    const refused = await post(browser, `/console/t/${tenant.id}/webhooks`, csrf, [
      ["url", "ftp://hooks.example.com/in"],
      ["description", "Typed before"],
      ["events", "user.created"],
    ]);
    expect(refused.status).toBe(400);
    const html = await refused.text();
    expect(html).toMatch(/id="problem-url">[^<]*<span>url must be https/);
    expect(html).toContain('value="ftp://hooks.example.com/in"');
    expect(html).toContain('value="Typed before"');
    expect(html).toMatch(/value="user\.created" checked/);
    expect(await hookCount(tenant.id)).toBe(0);
    const none = await post(browser, `/console/t/${tenant.id}/webhooks`, csrf, [["url", receiver().url]]);
    expect(none.status).toBe(400);
    expect(await none.text()).toContain('id="problem-events"');

    const hook = receiver();
    const { id, secret } = await addThroughConsole(browser, csrf, tenant.id, hook.url);
    expect(secret).toMatch(/^whsec_/);
    expect((await stored(tenant.id, id)).hook).toMatchObject({
      url: hook.url,
      description: "Billing receiver",
      events: ["webhook.test", "user.created"],
      enabled: true,
    });
    const page = await (await browser.fetch(`/console/t/${tenant.id}/webhooks/${id}`)).text();
    expect(page).toContain(hook.url);
    expect(page).not.toContain(secret);
  });

  it("sends a test event, shows each attempt in the delivery log, replays a message and everything since a time", {
    timeout: 90_000,
  }, async () => {
    const tenant = await createTenant({ name: "Hooks Log" });
    const { browser, csrf } = await operatorOf(tenant.id);
    // The receiver answers 500 to the first delivery, then 200.
    const hook = receiver("fail1");
    const { id, secret } = await addThroughConsole(browser, csrf, tenant.id, hook.url);
    const path = `/console/t/${tenant.id}/webhooks/${id}`;

    const sent = await post(browser, `${path}/test`, csrf, []);
    expect(sent.status).toBe(303);
    expect(sent.headers.get("location")).toBe(`${path}?notice=testQueued`);
    const [queued] = await messagesOf(tenant.id, id);
    expect(queued).toMatchObject({ type: "webhook.test", status: "pending" });

    const start = Date.now();
    const at = pinClock(start);
    await deliver(id);
    const failedOnce = await (await browser.fetch(`${path}?status=pending`)).text();
    expect(failedOnce).toMatch(
      /<table class="attempts">[\s\S]*webhook\.test[\s\S]*<span class="badge bad">500<\/span>/,
    );
    const [pending] = await messagesOf(tenant.id, id, "pending");
    at(Date.parse(pending?.next_at as string) - start + 1000);
    await deliver(id);
    vi.useRealTimers();
    const log = await (await browser.fetch(`${path}?status=delivered`)).text();
    expect(log).toMatch(/<span class="badge ok">200<\/span>[\s\S]*<span class="badge bad">500<\/span>/);
    // The delivery is the receiver's, signed with the secret the console showed once.
    const ok = (await received(hook.name)).filter((r) => r.answered === 200);
    expect(ok).toHaveLength(1);
    const verified = new Webhook(secret).verify(ok[0]?.body as string, ok[0]?.headers as Record<string, string>) as {
      type: string;
    };
    expect(verified.type).toBe("webhook.test");

    // Replay the delivered message by its id (its button is in the delivered list) ...
    expect(log).toContain(`name="message_id" value="${queued?.id}"`);
    const one = await post(browser, `${path}/replay`, csrf, [
      ["message_id", queued?.id as string],
      ["status", "delivered"],
    ]);
    expect(one.status).toBe(303);
    expect(one.headers.get("location")).toBe(`${path}?status=delivered&notice=replayed`);
    expect((await messagesOf(tenant.id, id)).map((m) => m.status)).toEqual(["pending"]);
    await deliver(id);
    expect((await messagesOf(tenant.id, id)).map((m) => m.status)).toEqual(["delivered"]);
    // ... and everything since a time (UTC, as the field says).
    const bad = await post(browser, `${path}/replay`, csrf, [["since", "yesterday"]]);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('id="problem-since"');
    const since = new Date(start - 120_000).toISOString().slice(0, 16);
    const all = await post(browser, `${path}/replay`, csrf, [["since", since]]);
    expect(all.status).toBe(303);
    expect((await messagesOf(tenant.id, id)).map((m) => m.status)).toEqual(["pending"]);
    // The failed list has nothing yet; its page says so.
    expect(await (await browser.fetch(path)).text()).toContain("No message.");
  });

  it("changes the events, makes a new secret with an overlap, disables and enables, deletes after confirming", {
    timeout: 90_000,
  }, async () => {
    const tenant = await createTenant({ name: "Hooks Manage" });
    const { browser, csrf } = await operatorOf(tenant.id);
    const { id, secret } = await addThroughConsole(browser, csrf, tenant.id, receiver().url);
    const path = `/console/t/${tenant.id}/webhooks/${id}`;
    const newUrl = receiver().url;

    const saved = await post(browser, path, csrf, [
      ["url", newUrl],
      ["description", ""],
      ["events", "*"],
    ]);
    expect(saved.status).toBe(303);
    expect((await stored(tenant.id, id)).hook).toMatchObject({ url: newUrl, description: null, events: ["*"] });

    const confirm = await (await browser.fetch(`${path}/rotate-secret`)).text();
    expect(confirm).toContain('name="overlap_seconds"');
    expect((await stored(tenant.id, id)).hook.secret_rotation_ends).toBeNull();
    const rotated = await post(browser, `${path}/rotate-secret`, csrf, [["overlap_seconds", "3600"]]);
    expect(rotated.status).toBe(200);
    expect(rotated.headers.get("cache-control")).toBe("no-store");
    const fresh = /id="signing-secret">(whsec_[^<]+)</.exec(await rotated.text())?.[1];
    expect(fresh).toBeTruthy();
    expect(fresh).not.toBe(secret);
    const ends = Date.parse((await stored(tenant.id, id)).hook.secret_rotation_ends as string);
    expect(Math.abs(ends - (Date.now() + 3_600_000))).toBeLessThan(60_000);

    expect(await (await browser.fetch(`${path}/disable`)).text()).toContain(`action="${path}/disable"`);
    expect((await stored(tenant.id, id)).hook.enabled).toBe(true);
    const disabled = await post(browser, `${path}/disable`, csrf, []);
    expect(disabled.headers.get("location")).toBe(`${path}?notice=disabledNotice`);
    expect((await stored(tenant.id, id)).hook.enabled).toBe(false);
    expect(await (await browser.fetch(path)).text()).toContain(`action="${path}/enable"`);
    expect((await post(browser, `${path}/enable`, csrf, [])).status).toBe(303);
    expect((await stored(tenant.id, id)).hook.enabled).toBe(true);

    expect((await browser.fetch(`${path}/delete`)).status).toBe(200);
    expect((await stored(tenant.id, id)).status).toBe(200);
    const deleted = await post(browser, `${path}/delete`, csrf, []);
    expect(deleted.headers.get("location")).toBe(`/console/t/${tenant.id}/webhooks?notice=deleted`);
    expect((await stored(tenant.id, id)).status).toBe(404);
  });

  it("speaks French and Arabic", { timeout: 60_000 }, async () => {
    const tenant = await createTenant({ name: "Hooks Lang" });
    const { browser } = await operatorOf(tenant.id);
    expect(await (await browser.fetch(`/console/t/${tenant.id}/webhooks?lang=fr`)).text()).toContain(
      "Ajouter un point de terminaison",
    );
    const ar = await (await browser.fetch(`/console/t/${tenant.id}/webhooks?lang=ar`)).text();
    expect(ar).toContain('dir="rtl"');
    expect(ar).toContain("إضافة نقطة نهاية");
  });
});
