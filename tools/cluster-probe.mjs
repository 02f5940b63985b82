#!/usr/bin/env node
// `npm run cluster-probe`: can workerd's experimental cluster mode give the local runtime a second
// core? It runs Durable Objects across several workerd processes (ClusterConfig in workerd.capnp):
// each object has one owner, other instances forward its calls there, and ownership and each
// object's storage log live in a shared S3-compatible bucket. This probe measures what that costs
// against the single process `npm start` uses, with a throwaway Worker (no Keyway code) whose
// Durable Object writes one row per call, the same unit as tools/cost-model.mjs.
//
// The bucket is a minimal in-memory S3 server in this process (path-style GET, PUT with
// If-None-Match / If-Match, DELETE, ListObjectsV2): enough for workerd, not a store to keep.
// Env: RATE (requests/s, default 800), SECONDS (per case, default 8).
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { exitOf, installK6, spawnK6 } from "./lib/k6-stack.mjs";
import { CLK_TCK, cpuTicks } from "./lib/proc.mjs";

const RATE = Number(process.env.RATE ?? 800);
const SECONDS = Number(process.env.SECONDS ?? 8);
const OBJECTS = 16;
// The workerd binary Miniflare runs (its dependency, not ours): `npm start` uses the same one.
const fromMiniflare = createRequire(createRequire(import.meta.url).resolve("miniflare"));
const WORKERD = /** @type {string} */ (fromMiniflare("workerd").default);

const WORKER = `
import { DurableObject } from "cloudflare:workers";
export class Store extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT)");
  }
  ping() { return 1; }
  write(k) { this.ctx.storage.sql.exec("INSERT OR REPLACE INTO t VALUES (?, ?)", k, "x".repeat(300)); return 1; }
}
export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    const stub = env.STORE.get(env.STORE.idFromName(url.searchParams.get("o") ?? "0"));
    if (url.pathname === "/ping") return new Response(String(await stub.ping()));
    return new Response(String(await stub.write(crypto.randomUUID())));
  },
};`;

const K6_SCRIPT = `
import http from "k6/http";
export const options = {
  discardResponseBodies: true,
  scenarios: { probe: { executor: "constant-arrival-rate", rate: Number(__ENV.RATE), timeUnit: "1s",
    duration: __ENV.SECONDS + "s", preAllocatedVUs: 50, maxVUs: 500 } },
};
export default function () {
  http.get(__ENV.TARGET + "?o=" + Math.floor(Math.random() * ${OBJECTS}));
}`;

/** workerd config: one Worker, its SQLite-backed objects on local disk, optionally a cluster. */
function capnpConfig(/** @type {{ cluster?: { bucketPort: number, key: string } }} */ { cluster }) {
  const clusterBlock = cluster
    ? `cluster = (
    bucket = "s3://probe/cluster",
    bucketOptions = ["aws_endpoint=http://127.0.0.1:${cluster.bucketPort}", "aws_region=auto",
      "aws_access_key_id=probe", "aws_secret_access_key=probe", "allow_http=true"],
    address = "127.0.0.1:0",
    key = "${cluster.key}",
  ),`
    : "";
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    (name = "do-storage", disk = (path = "storage", writable = true)),
  ],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "main")],
  ${clusterBlock}
);
const worker :Workerd.Worker = (
  modules = [(name = "worker.js", esModule = embed "worker.js")],
  compatibilityDate = "2026-11-01",
  durableObjectNamespaces = [(className = "Store", uniqueKey = "store", enableSql = true)],
  durableObjectStorage = (localDisk = "do-storage"),
  bindings = [(name = "STORE", durableObjectNamespace = "Store")],
);
`;
}

/** A minimal in-memory S3-compatible bucket server; counts requests by method. */
async function startBucket() {
  /** @type {Map<string, { body: Buffer, etag: string, modified: number }>} */
  const objects = new Map();
  const counts = { GET: 0, PUT: 0, DELETE: 0, LIST: 0 };
  const xml = (/** @type {string} */ s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    const url = new URL(req.url ?? "/", "http://bucket");
    const [bucket, ...rest] = url.pathname.slice(1).split("/");
    const key = `${bucket}/${decodeURIComponent(rest.join("/"))}`;
    const current = objects.get(key);
    if (req.method === "GET" && url.searchParams.get("list-type") === "2") {
      counts.LIST++;
      const prefix = `${bucket}/${url.searchParams.get("prefix") ?? ""}`;
      const items = [...objects.keys()]
        .filter((k) => k.startsWith(prefix))
        .sort()
        .map((k) => {
          const o = /** @type {{ body: Buffer, etag: string, modified: number }} */ (objects.get(k));
          return `<Contents><Key>${xml(k.slice(bucket.length + 1))}</Key><LastModified>${new Date(o.modified).toISOString()}</LastModified><ETag>"${o.etag}"</ETag><Size>${o.body.length}</Size></Contents>`;
        });
      res.writeHead(200, { "content-type": "application/xml" });
      res.end(
        `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>${bucket}</Name><KeyCount>${items.length}</KeyCount><IsTruncated>false</IsTruncated>${items.join("")}</ListBucketResult>`,
      );
      return;
    }
    if (req.method === "PUT") {
      counts.PUT++;
      const ifNoneMatch = req.headers["if-none-match"];
      const ifMatch = req.headers["if-match"];
      if ((ifNoneMatch === "*" && current) || (ifMatch && `"${current?.etag}"` !== ifMatch)) {
        res.writeHead(412).end();
        return;
      }
      const etag = createHash("md5").update(body).update(randomBytes(8)).digest("hex");
      objects.set(key, { body, etag, modified: Date.now() });
      res.writeHead(200, { etag: `"${etag}"` }).end();
      return;
    }
    if (req.method === "GET" || req.method === "HEAD") {
      counts.GET++;
      if (!current) {
        res.writeHead(404, { "content-type": "application/xml" }).end("<Error><Code>NoSuchKey</Code></Error>");
        return;
      }
      const headers = { etag: `"${current.etag}"`, "last-modified": new Date(current.modified).toUTCString() };
      const range = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? "");
      if (range) {
        const start = Number(range[1]);
        const end = range[2] ? Math.min(Number(range[2]), current.body.length - 1) : current.body.length - 1;
        res.writeHead(206, { ...headers, "content-range": `bytes ${start}-${end}/${current.body.length}` });
        res.end(req.method === "HEAD" ? undefined : current.body.subarray(start, end + 1));
        return;
      }
      res.writeHead(200, headers).end(req.method === "HEAD" ? undefined : current.body);
      return;
    }
    if (req.method === "DELETE") {
      counts.DELETE++;
      objects.delete(key);
      res.writeHead(204).end();
      return;
    }
    res.writeHead(501).end();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  return { port: typeof address === "object" && address ? address.port : 0, counts, close: () => server.close() };
}

/** Starts one workerd instance; resolves with its HTTP port once it listens. */
async function startWorkerd(/** @type {string} */ dir, /** @type {string} */ storage, /** @type {boolean} */ cluster) {
  mkdirSync(join(dir, storage), { recursive: true });
  const args = ["serve", "--experimental", "--control-fd=3", "config.capnp", `--directory-path=do-storage=${storage}`];
  const child = spawn(WORKERD, args, { cwd: dir, stdio: ["ignore", "inherit", "inherit", "pipe"] });
  const port = await new Promise((resolve, reject) => {
    const lines = createInterface(/** @type {import("node:stream").Readable} */ (child.stdio[3]));
    lines.on("line", (line) => {
      const message = JSON.parse(line);
      if (message.event === "listen" && message.socket === "http") resolve(message.port);
    });
    child.on("exit", (code) => reject(new Error(`workerd exited (${code}) before it listened`)));
  });
  if (cluster) await new Promise((r) => setTimeout(r, 1500)); // joined: lease written, peers listed
  return { child, port: /** @type {number} */ (port), pid: /** @type {number} */ (child.pid) };
}

/** Drives `target` at RATE for SECONDS; CPU per request of each pid, and of this process (the bucket). */
async function measure(/** @type {string} */ scriptPath, /** @type {string} */ target, /** @type {number[]} */ pids) {
  const k6 = spawnK6(["run", "--quiet", scriptPath], { TARGET: target, RATE: String(RATE), SECONDS: String(SECONDS) }, [
    "ignore",
    "ignore",
    "inherit",
  ]);
  await new Promise((r) => setTimeout(r, 2000)); // past k6's start-up
  const before = pids.map(cpuTicks);
  const self = process.cpuUsage();
  const t0 = Date.now();
  await new Promise((r) => setTimeout(r, (SECONDS - 3) * 1000));
  const secs = (Date.now() - t0) / 1000;
  const after = pids.map(cpuTicks);
  const own = process.cpuUsage(self);
  await exitOf(k6);
  const perRequest = (/** @type {number} */ ticks) => ((ticks / CLK_TCK) * 1000) / secs / RATE;
  return {
    workerd: pids.map((_, i) => perRequest((after[i] ?? 0) - (before[i] ?? 0))),
    bucket: (own.user + own.system) / 1000 / secs / RATE,
  };
}

async function main() {
  installK6();
  const dir = mkdtempSync(join(tmpdir(), "keyway-cluster-probe-"));
  const scriptPath = join(dir, "probe.js");
  writeFileSync(scriptPath, K6_SCRIPT);
  writeFileSync(join(dir, "worker.js"), WORKER);
  const bucket = await startBucket();
  /** @type {import("node:child_process").ChildProcess[]} */
  const children = [];
  const rows = [];
  const fmt = (/** @type {number} */ ms) => ms.toFixed(3);
  try {
    // One process, no cluster: the runtime `npm start` uses.
    writeFileSync(join(dir, "config.capnp"), capnpConfig({}));
    const single = await startWorkerd(dir, "single", false);
    children.push(single.child);
    for (const path of ["/ping", "/write"]) {
      const m = await measure(scriptPath, `http://127.0.0.1:${single.port}${path}`, [single.pid]);
      rows.push([`one process, ${path}`, fmt(m.workerd[0] ?? 0), "", "", ""]);
    }
    single.child.kill();

    // Two instances in a cluster. Instance A claims every object first, so A owns them all.
    const key = randomBytes(32).toString("hex");
    writeFileSync(join(dir, "config.capnp"), capnpConfig({ cluster: { bucketPort: bucket.port, key } }));
    const a = await startWorkerd(dir, "a", true);
    const b = await startWorkerd(dir, "b", true);
    children.push(a.child, b.child);
    for (let o = 0; o < OBJECTS; o++) await fetch(`http://127.0.0.1:${a.port}/write?o=${o}`);
    const cases = [
      ["cluster, /ping at the owner", `http://127.0.0.1:${a.port}/ping`],
      ["cluster, /write at the owner", `http://127.0.0.1:${a.port}/write`],
      ["cluster, /write at the other instance", `http://127.0.0.1:${b.port}/write`],
    ];
    for (const [name, target] of cases) {
      const puts = bucket.counts.PUT;
      const m = await measure(scriptPath, /** @type {string} */ (target), [a.pid, b.pid]);
      const bucketPerRequest = (bucket.counts.PUT - puts) / (RATE * SECONDS);
      rows.push([
        /** @type {string} */ (name),
        fmt(m.workerd[0] ?? 0),
        fmt(m.workerd[1] ?? 0),
        fmt(m.bucket),
        bucketPerRequest.toFixed(2),
      ]);
    }
  } finally {
    for (const child of children) child.kill();
    await Promise.all(children.map((c) => (c.exitCode === null ? once(c, "exit") : undefined)));
    bucket.close();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`\nworkerd ${fromMiniflare("workerd").version} at ${RATE} requests/s, ${OBJECTS} objects`);
  console.log("| case | instance A (ms CPU/request) | instance B | bucket server | bucket PUTs/request |");
  console.log("| --- | ---: | ---: | ---: | ---: |");
  for (const row of rows) console.log(`| ${row.join(" | ")} |`);
}

await main();
