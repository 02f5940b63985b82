#!/usr/bin/env node
// `npm run cost-model`: what one operation costs the local runtime's single workerd thread. A
// throwaway Worker (no Keyway code) does one kind of operation per request: nothing, a Durable Object
// call, a SQLite read or write in it, a D1 query, a service-binding hop, a Rate Limiting binding call,
// an RS256 or ES256 signature.
// k6 drives each at a fixed rate; workerd's CPU over the run, less the bare request's, is the
// operation's cost. The login's CPU is roughly the sum of its operations (docs/performance.md).
// Env: RATE (requests/s, default 500), SECONDS (per operation, default 8), OPS (paths to run, comma-
// separated; default all; the bare request always runs, as every other is measured against it).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../scripts/stack.mjs";
import { esmWorker, exitOf, installK6, scratchMiniflare, spawnK6 } from "./lib/k6-stack.mjs";
import { CLK_TCK, cpuTicks, workerdPids } from "./lib/proc.mjs";

const RATE = Number(process.env.RATE ?? 500);
const SECONDS = Number(process.env.SECONDS ?? 8);

/** Each path does one operation per request (and the Durable Object paths one call each). */
const OPERATIONS = {
  "/": "a bare request (socket → Worker → response)",
  "/service": "+ one service-binding hop to another Worker",
  "/do-call": "+ one Durable Object RPC call (no storage)",
  "/do-read": "+ one Durable Object call reading a row",
  "/do-write": "+ one Durable Object call writing a row (one write transaction)",
  "/do-write-2": "+ one Durable Object call writing two rows (still one transaction)",
  "/d1-read": "+ one D1 query (read)",
  "/d1-write": "+ one D1 query (insert)",
  "/ratelimit": "+ one Rate Limiting binding call (Miniflare's emulation: an entry Worker and a SQLite object)",
  "/rs256": "+ one RS256 signature (2048-bit key, imported once)",
  "/es256": "+ one ES256 signature (P-256 key, imported once)",
};

const WORKER = `
import { DurableObject } from "cloudflare:workers";
export class Store extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT, expires_at INTEGER)");
  }
  ping() { return 1; }
  read(k) { return this.ctx.storage.sql.exec("SELECT v FROM t WHERE k = ?", k).toArray().length; }
  write(k, n) {
    for (let i = 0; i < n; i++)
      this.ctx.storage.sql.exec("INSERT INTO t (k, v, expires_at) VALUES (?, ?, ?)", k + i, "x".repeat(300), Date.now());
    return n;
  }
}
const keys = {};
async function key(alg) {
  if (!keys[alg]) {
    const params = alg === "RS256"
      ? { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" }
      : { name: "ECDSA", namedCurve: "P-256" };
    keys[alg] = (await crypto.subtle.generateKey(params, false, ["sign"])).privateKey;
  }
  return keys[alg];
}
const data = new TextEncoder().encode("x".repeat(600));
export default {
  async fetch(req, env) {
    const path = new URL(req.url).pathname;
    const k = crypto.randomUUID();
    const store = () => env.STORE.getByName("s" + (k.charCodeAt(0) % 4));
    switch (path) {
      case "/service": return env.PEER.fetch(req);
      case "/do-call": await store().ping(); break;
      case "/do-read": await store().read(k); break;
      case "/do-write": await store().write(k, 1); break;
      case "/do-write-2": await store().write(k, 2); break;
      case "/d1-read": await env.DB.prepare("SELECT v FROM t WHERE k = ?").bind(k).first(); break;
      case "/d1-write": await env.DB.prepare("INSERT INTO t (k, v, expires_at) VALUES (?, ?, ?)").bind(k, "x".repeat(300), Date.now()).run(); break;
      case "/ratelimit": await env.RL.limit({ key: "127.0.0.1", delta: 1 }); break;
      case "/rs256": await crypto.subtle.sign("RSASSA-PKCS1-v1_5", await key("RS256"), data); break;
      case "/es256": await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, await key("ES256"), data); break;
    }
    return new Response("ok");
  },
};`;

const K6_SCRIPT = `
import http from "k6/http";
export const options = { scenarios: { op: { executor: "constant-arrival-rate", rate: ${RATE}, timeUnit: "1s",
  duration: "${SECONDS}s", preAllocatedVUs: 50, maxVUs: 400 } } };
export default function () { http.get(__ENV.URL); }`;

if (installK6() !== 0) process.exit(1);
const tmp = mkdtempSync(join(tmpdir(), "keyway-cost-"));
const port = await freePort();
const mf = scratchMiniflare(join(tmp, "state"), [
  {
    config: {
      name: "ops",
      compatibilityDate: "2026-11-01",
      manifest: esmWorker(WORKER),
      env: {
        STORE: { type: "durable-object", worker: "ops", exportName: "Store" },
        DB: { type: "d1", id: "cost-model" },
        PEER: { type: "worker", worker: "peer" },
        // As op-auth declares its per-IP quotas (workers/op-auth/wrangler.toml).
        RL: { type: "rate-limit", namespace: "9001", simple: { limit: 1_000_000_000, period: 60 } },
      },
      exports: { Store: { type: "durable-object", storage: "sqlite" } },
    },
    // Served straight from workerd's socket, as `npm start` serves the gateway.
    dev: { unsafeDirectSockets: [{ host: "127.0.0.1", port }] },
  },
  {
    config: {
      name: "peer",
      compatibilityDate: "2026-11-01",
      manifest: esmWorker(`export default { fetch() { return new Response("ok"); } };`),
    },
  },
]);
try {
  await mf.ready;
  const db = await mf.getD1Database("DB", "ops");
  await db.exec("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT, expires_at INTEGER)");
  const script = join(tmp, "op.js");
  writeFileSync(script, K6_SCRIPT);
  const pids = workerdPids();
  const ticks = () => pids.reduce((sum, pid) => sum + (cpuTicks(pid) ?? 0), 0);
  console.log(`cost-model: ${RATE} requests/s for ${SECONDS} s per operation; workerd pid(s) ${pids.join(", ")}\n`);
  /** @type {Record<string, number>} ms of workerd CPU per request */
  const perRequest = {};
  const only = (process.env.OPS ?? "").split(",").filter(Boolean);
  const paths = Object.keys(OPERATIONS).filter((p) => p === "/" || only.length === 0 || only.includes(p));
  for (const path of paths) {
    const url = `http://127.0.0.1:${port}${path}`;
    for (let i = 0; i < 20; i++) await fetch(url).then((r) => r.text()); // warm: isolates, keys, objects
    const before = ticks();
    const code = await exitOf(spawnK6(["run", "--quiet", script], { URL: url }, "ignore"));
    if (code !== 0) throw new Error(`k6 exited ${code} on ${path}`);
    perRequest[path] = ((ticks() - before) / CLK_TCK / (RATE * SECONDS)) * 1000;
  }
  const bare = perRequest["/"] ?? 0;
  console.log("| operation | workerd CPU per request (ms) | the operation alone (ms) |");
  console.log("| --- | ---: | ---: |");
  for (const [path, what] of Object.entries(OPERATIONS).filter(([p]) => paths.includes(p))) {
    const ms = perRequest[path] ?? 0;
    console.log(`| \`${path}\` ${what} | ${ms.toFixed(3)} | ${path === "/" ? "" : (ms - bare).toFixed(3)} |`);
  }
} finally {
  await mf.dispose();
  rmSync(tmp, { recursive: true, force: true });
}
