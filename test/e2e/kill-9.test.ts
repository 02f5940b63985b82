import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { generateSecrets } from "../../scripts/lib/local.mjs";
import { freePort, type Stack, type StackOptions, startStack } from "../../scripts/stack.mjs";
import { E2E_BUNDLES } from "./bundles.js";

// Issue 38 item 13: `npm start`'s stack killed with SIGKILL (kill -9) mid-work, as a crash or an
// out-of-memory kill would, then started again on the same state folder. Nothing it acknowledged is
// lost: a tenant purge cut short is finished by the cron, and webhook messages queued across kills,
// with the receiver down at each, all arrive once each, the backlog as soon as the receiver answers.

const tmp = mkdtempSync(join(tmpdir(), "keyway-e2e-kill9-"));
const dist = E2E_BUNDLES;
let built = false;
const running = new Set<ChildProcess>();
let inProcess: Stack | undefined;
let receiver: Server | undefined;

afterEach(async () => {
  for (const child of running) kill9(child);
  await inProcess?.dispose();
  inProcess = undefined;
  await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
  receiver = undefined;
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The stack in a process group of its own (test/e2e/stack-process.mjs), once it serves. */
async function spawnStack(options: StackOptions): Promise<ChildProcess> {
  const child = spawn(process.execPath, [join(import.meta.dirname, "stack-process.mjs")], {
    detached: true,
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, KEYWAY_STACK_OPTIONS: JSON.stringify({ ...options, build: !built }) },
  });
  running.add(child);
  await new Promise<void>((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8");
      if (out.includes("READY ")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`the stack exited (${code}) before it served`)));
  });
  built = true;
  return child;
}

/** kill -9 of the stack's process group: node and its workerd, with no chance to finish anything. */
function kill9(child: ChildProcess): void {
  running.delete(child);
  try {
    process.kill(-(child.pid as number), "SIGKILL");
  } catch {
    // Already gone.
  }
}

/** Until the port no longer answers: the kill has taken workerd too. */
async function gone(url: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      await fetch(`${url}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(500) });
    } catch {
      return;
    }
    await sleep(100);
  }
  throw new Error("the stack still answers after kill -9");
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function adminOf(url: string, token: string) {
  return (path: string, init: RequestInit & { json?: unknown } = {}) =>
    fetch(`${url}/admin/v1${path}`, {
      ...init,
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
    });
}

describe("kill -9 of npm start's stack (issue 38 item 13)", () => {
  it("finishes a tenant purge cut short by a kill, from the cron after the restart", async () => {
    const vars = generateSecrets();
    const options: StackOptions = {
      port: await freePort(),
      persistTo: join(tmp, "purge-state"),
      outDir: dist,
      vars,
      cronEverySeconds: false,
    };
    const child = await spawnStack(options);
    const url = `http://127.0.0.1:${options.port}`;
    const admin = adminOf(url, vars.ADMIN_TOKEN as string);
    // Two tenants alike, each with enough users that its purge takes several statements of 5,000.
    const populate = async (tenant: string) => {
      expect((await admin("/tenants", { method: "POST", json: { id: tenant, name: tenant } })).status).toBe(201);
      const scoped = (path: string, init: RequestInit & { json?: unknown } = {}) =>
        admin(`/tenants/${tenant}${path}`, init);
      for (let i = 0; i < 12; i++) {
        const users = Array.from({ length: 1000 }, (_, j) => ({ email: `u${i}-${j}@example.com` }));
        const res = await scoped("/users/import", { method: "POST", json: { users } });
        expect(res.status, await res.clone().text()).toBe(200);
      }
      const hook = await scoped("/webhooks", {
        method: "POST",
        json: { url: "https://hooks.example.com/x", events: ["*"] },
      });
      expect(hook.status).toBe(201);
      expect((await admin(`/tenants/${tenant}/admin-keys`, { method: "POST", json: { name: "k" } })).status).toBe(201);
    };
    const stamp = Date.now().toString(36);
    const [warmUp, measured, tenant] = [`warm-${stamp}`, `timed-${stamp}`, `doomed-${stamp}`];
    await populate(warmUp);
    await populate(measured);
    await populate(tenant);
    // A first purge runs cold (isolates, statements, pages not yet warm) and took longer than the next
    // one, so a kill timed on it once came after the doomed purge had ended: it is not the one timed.
    expect((await admin(`/tenants/${warmUp}`, { method: "DELETE" })).status).toBe(204);
    // How long a whole purge of one takes here, now (a loaded machine is slower) ...
    const t0 = Date.now();
    expect((await admin(`/tenants/${measured}`, { method: "DELETE" })).status).toBe(204);
    const whole = Date.now() - t0;
    // ... so a kill -9 a quarter of the way into the other's lands after its tombstone (the DELETE's first
    // write) and before its purge ends. (Its progress cannot be watched through the API: op-mgmt answers
    // the tenant's GET only once the DELETE is done.)
    const deleting = admin(`/tenants/${tenant}`, { method: "DELETE" }).catch(() => null);
    await sleep(Math.max(20, whole / 4));
    kill9(child);
    await gone(url);
    await deleting;

    // Back on the same state, in this process, with the cron fired by hand (as Cloudflare would).
    inProcess = await startStack({ ...options, build: false });
    const db = await inProcess.mf.getD1Database("DB", "keyway-stores");
    const left = async () => {
      const out: Record<string, number> = {};
      for (const table of ["users", "clients", "signing_keys", "admin_keys", "webhook_endpoints"]) {
        const row = await db.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE tenant = ?`).bind(tenant).first();
        out[table] = Number((row as { n: number } | null)?.n ?? 0);
      }
      return out;
    };
    const tombstone = async () =>
      (await db.prepare("SELECT status, purged_at FROM tenants WHERE id = ?").bind(tenant).first()) as {
        status: string;
        purged_at: number | null;
      };
    // The kill cut the purge short: the tenant is gone from the API, but not all its data is.
    expect(await tombstone()).toEqual({ status: "deleted", purged_at: null });
    const before = await left();
    expect(
      Object.values(before).reduce((a, b) => a + b, 0),
      JSON.stringify(before),
    ).toBeGreaterThan(0);
    expect((await admin(`/tenants/${tenant}`)).status).toBe(404);

    await inProcess.fireCron("*/5 * * * *");
    // The scheduled handler hands its work to waitUntil: wait for it to end.
    for (let i = 0; i < 300 && (await tombstone()).purged_at === null; i++) await sleep(100);
    expect(await left()).toEqual({ users: 0, clients: 0, signing_keys: 0, admin_keys: 0, webhook_endpoints: 0 });
    expect((await tombstone()).purged_at).toBeGreaterThan(0);
  }, 240_000);
  it("delivers every acknowledged webhook once across three kills with the receiver down, the backlog as soon as it answers", async () => {
    // The receiver: `refuse` answers 503, `drop` closes the connection unanswered, `up` verifies and takes.
    let mode: "refuse" | "drop" | "up" = "refuse";
    let secret = "";
    const taken = new Map<string, number[]>();
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        if (mode === "drop") return void req.socket.destroy();
        if (mode === "refuse") return void res.writeHead(503).end();
        const id = String(req.headers["webhook-id"]);
        new Webhook(secret).verify(Buffer.concat(chunks).toString("utf8"), {
          "webhook-id": id,
          "webhook-timestamp": String(req.headers["webhook-timestamp"]),
          "webhook-signature": String(req.headers["webhook-signature"]),
        });
        taken.set(id, [...(taken.get(id) ?? []), Date.now()]);
        res.writeHead(200).end();
      });
    });
    receiver = server;
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const hookUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;

    const vars = generateSecrets();
    const options: StackOptions = {
      port: await freePort(),
      persistTo: join(tmp, "hooks-state"),
      outDir: dist,
      vars,
      cronEverySeconds: false,
    };
    const url = `http://127.0.0.1:${options.port}`;
    const admin = adminOf(url, vars.ADMIN_TOKEN as string);
    let child = await spawnStack(options);
    const created = await admin("/webhooks", { method: "POST", json: { url: hookUrl, events: ["webhook.test"] } });
    expect(created.status, await created.clone().text()).toBe(201);
    const endpoint = (await created.json()) as { id: string; secret: string };
    secret = endpoint.secret;
    /** Test events, each acknowledged (202) with its webhook-id: every one of them must arrive. */
    const acknowledged: string[] = [];
    const send = async (n: number) => {
      const ids: string[] = [];
      for (let i = 0; i < n; i++) {
        const res = await admin(`/webhooks/${endpoint.id}/test`, { method: "POST" });
        expect(res.status).toBe(202);
        ids.push(((await res.json()) as { message_id: string }).message_id);
      }
      acknowledged.push(...ids);
      return ids;
    };
    const pending = async () =>
      (
        (await (await admin(`/webhooks/${endpoint.id}/messages?status=pending&limit=200`)).json()) as {
          messages: { id: string; attempts: number; next_at: string }[];
        }
      ).messages;
    const attempted = async (ids: string[], attempts: number, within: number) => {
      const deadline = Date.now() + within;
      while (Date.now() < deadline) {
        const byId = new Map((await pending()).map((m) => [m.id, m.attempts]));
        if (ids.every((id) => (byId.get(id) ?? 0) >= attempts)) return;
        await sleep(500);
      }
      throw new Error(`not every message had ${attempts} failed attempts within ${within} ms`);
    };

    // Down (503): the first events fail twice, then kill -9 (1).
    const first = await send(8);
    await attempted(first, 2, 30_000);
    kill9(child);
    await gone(url);
    // Back, the receiver still down (no answer at all): more events; the first fail a third time and
    // wait for the 2-minute step. Then kill -9 (2).
    child = await spawnStack(options);
    mode = "drop";
    await send(8);
    await attempted(first, 3, 60_000);
    kill9(child);
    await gone(url);
    // Back, and killed again (3) while its alarms run against a receiver still down.
    mode = "refuse";
    child = await spawnStack(options);
    await sleep(1_500);
    kill9(child);
    await gone(url);

    // Back for good; the receiver answers. Where the backlog stood: retries up to minutes away.
    child = await spawnStack(options);
    const waiting = new Map((await pending()).map((m) => [m.id, Date.parse(m.next_at)]));
    expect([...waiting.keys()].sort()).toEqual([...acknowledged].sort());
    mode = "up";
    const up = Date.now();
    await send(1);
    const deadline = up + 45_000;
    while (acknowledged.some((id) => !taken.has(id)) && Date.now() < deadline) await sleep(250);
    // Nothing lost ...
    expect(acknowledged.filter((id) => !taken.has(id))).toEqual([]);
    // ... the first events did not wait for their retry step: brought forward when the receiver answered.
    for (const id of first) {
      expect(waiting.get(id) as number).toBeGreaterThan(up + 45_000);
      expect((taken.get(id) as number[])[0]).toBeLessThan(up + 30_000);
    }
    // ... and nothing twice, a moment later too.
    await sleep(3_000);
    expect([...taken].filter(([, at]) => at.length !== 1)).toEqual([]);
    expect(taken.size).toBe(acknowledged.length);
  }, 240_000);
});
