// What tools/bench.mjs can put under load, one at a time: this checkout of Keyway, another checkout
// of it (BASELINE=<dir>, e.g. an older main), and node-oidc-provider (PEER=oidc-provider).
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { freePort } from "../../scripts/stack.mjs";
import { exitOf, FULL_LOGIN, REPO, raisedPolicy, startLoadStack } from "./k6-stack.mjs";
import { workerdPids } from "./proc.mjs";

/** Keyway's cumulative counters (`GET /admin/v1/stats` totals). @typedef {{ durable_object_calls: number, d1_queries: number, rows_written: number }} Counters */

/**
 * @typedef {object} Target
 * @property {string} name a short name for reports
 * @property {string} description what it is, one line
 * @property {string} url
 * @property {string} adminToken
 * @property {string} tmp where k6 logs and summaries go
 * @property {string} script the k6 login script
 * @property {Record<string, string>} env extra k6 environment
 * @property {() => number[]} pids the server's processes, for CPU and RSS
 * @property {(() => Promise<Counters | null>) | null} stats
 * @property {Record<string, unknown>} policy
 * @property {Record<string, string>} vars
 * @property {number} [inspectorPort] Keyway's V8 inspector, for the profiled rung (tools/lib/isolate-cpu.mjs)
 * @property {boolean} [extraReads] its k6 script reads the mailbox through this checkout's
 *   k6/lib/mailbox.js, so k6 MAILBOX_EXTRA_READS applies (tools/bench.mjs's mailbox rungs)
 * @property {(keep?: boolean) => Promise<void>} dispose
 */

/**
 * Keyway's counters; null when the endpoint or its totals are missing (an older checkout).
 * @param {string} url @param {string} adminToken @returns {Promise<Counters | null>}
 */
async function keywayStats(url, adminToken) {
  const res = await fetch(`${url}/admin/v1/stats`, { headers: { Authorization: `Bearer ${adminToken}` } });
  if (!res.ok) return null;
  const body = /** @type {{ totals?: Counters }} */ (await res.json());
  return body.totals ?? null;
}

/**
 * This checkout: the `npm start` runtime (scripts/stack.mjs) with fresh secrets and state. With
 * `productionShaped` (issue 28 item 4), the same runtime without what only the local stack has on a
 * login's path: k6 sends each request straight to op-auth's or op-token's own port with the issuer's
 * Host (no dev gateway hop), and the Rate Limiting bindings are a counter in memory behind one RPC call
 * instead of Miniflare's emulation; and its state is on a tmpfs (k6-stack.mjs `stateInMemory`), so
 * SQLite's commits flush no local disk on the isolates' thread.
 * @returns {Promise<Target>}
 */
export async function keywayTarget(
  /** @type {{ policy: Record<string, unknown>, port?: number, dataset?: string, productionShaped?: boolean, stateInMemory?: boolean, inspect?: boolean }} */ o,
) {
  const stateInMemory = o.stateInMemory ?? o.productionShaped ?? false;
  // The V8 inspector, for tools/bench.mjs's profiled rung; an open inspector did not cost CPU that
  // showed (docs/performance.md), but a run that profiles nothing does not open it.
  const inspectorPort = o.inspect === false ? undefined : await freePort();
  const stack = await startLoadStack({
    policy: o.policy,
    port: o.port,
    inspectorPort,
    productionShaped: o.productionShaped ?? false,
    stateInMemory,
    ...(o.dataset ? { dataset: o.dataset } : {}),
  });
  return {
    inspectorPort,
    name: o.productionShaped
      ? `Keyway, production-shaped${stateInMemory ? "" : ", state on disk"}`
      : `Keyway${stateInMemory ? ", state on a tmpfs" : ""}`,
    description:
      (o.productionShaped
        ? "this checkout on the same runtime, production-shaped (scripts/stack.mjs `productionShaped`): each login request straight to op-auth's or op-token's own port with the issuer's Host, as production's routes send it (no dev gateway hop), and the Rate Limiting bindings a counter in memory behind one RPC call (no Miniflare emulation: an entry Worker and a SQLite object per call)"
        : "this checkout, the `npm start` runtime (scripts/stack.mjs: the built Workers in one workerd)") +
      (stateInMemory
        ? "; its state on a tmpfs (no disk flush at each SQLite commit, which workerd's local storage makes on the isolates' thread)"
        : "; its state on disk"),
    url: stack.url,
    adminToken: stack.adminToken,
    tmp: stack.tmp,
    script: FULL_LOGIN,
    extraReads: true,
    env: o.productionShaped
      ? {
          USERS: "seeded",
          AUTH_URL: /** @type {string} */ (stack.workerUrls["op-auth"]),
          TOKEN_URL: /** @type {string} */ (stack.workerUrls["op-token"]),
        }
      : { USERS: "seeded" },
    pids: workerdPids,
    stats: () => keywayStats(stack.url, stack.adminToken),
    policy: o.policy,
    vars: stack.vars,
    dispose: (keep) => stack.dispose(keep),
  };
}

/**
 * Another checkout of Keyway (its node_modules installed or linked), started by its own
 * tools/lib/k6-stack.mjs with its own load policy, and loaded by its own k6/full-login.js.
 * @param {string} dir @param {boolean} [inspect] open its V8 inspector, for the profiled rung
 * @param {boolean} [productionShaped] started as `SHAPED=1` starts this checkout (its own k6-stack must take the option)
 * @returns {Promise<Target>}
 */
export async function baselineTarget(dir, inspect = true, productionShaped = false) {
  const root = resolve(dir);
  const lib = join(root, "tools/lib/k6-stack.mjs");
  if (!existsSync(lib)) throw new Error(`BASELINE=${dir}: no tools/lib/k6-stack.mjs there`);
  const theirs = await import(pathToFileURL(lib).href);
  const policy = /** @type {Record<string, unknown>} */ (theirs.raisedPolicy());
  const inspectorPort = inspect ? await freePort() : undefined;
  const stack = await theirs.startLoadStack({ policy, inspectorPort, productionShaped });
  const commit = await gitShort(root);
  return {
    inspectorPort,
    name: `baseline ${commit}${productionShaped ? ", production-shaped" : ""}`,
    description: `the checkout at ${root} (${commit}), started by its own tools/lib/k6-stack.mjs${productionShaped ? " production-shaped" : ""}, loaded by its own k6/full-login.js`,
    url: stack.url,
    adminToken: stack.adminToken,
    tmp: stack.tmp,
    script: theirs.FULL_LOGIN,
    env:
      productionShaped && stack.workerUrls?.["op-auth"]
        ? { USERS: "seeded", AUTH_URL: stack.workerUrls["op-auth"], TOKEN_URL: stack.workerUrls["op-token"] }
        : { USERS: "seeded" },
    pids: workerdPids,
    stats: () => keywayStats(stack.url, stack.adminToken),
    policy,
    vars: stack.vars,
    dispose: (keep) => stack.dispose(keep),
  };
}

/** @param {string} dir */
async function gitShort(dir) {
  const child = spawn("git", ["-C", dir, "rev-parse", "--short", "HEAD"], { stdio: ["ignore", "pipe", "ignore"] });
  let out = "";
  child.stdout.on("data", (d) => {
    out += d;
  });
  await exitOf(child);
  return out.trim() || "unknown";
}

/**
 * A local redis-server for the peer (Debian's `redis-server`), durable as node-oidc-provider's users
 * run it: the append-only file, fsynced every second. @param {string} dir
 */
async function startRedis(dir) {
  const port = await freePort();
  const child = spawn(
    "redis-server",
    [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--dir",
      dir,
      "--appendonly",
      "yes",
      "--appendfsync",
      "everysec",
      "--save",
      "",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let log = "";
  await new Promise((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`redis-server did not start:\n${log}`)), 10_000);
    child.stdout.on("data", (/** @type {Buffer} */ d) => {
      log += d;
      if (log.includes("Ready to accept connections")) {
        clearTimeout(timer);
        ready(undefined);
      }
    });
    child.on("error", (err) =>
      fail(new Error(`redis-server could not run (apt-get install redis-server): ${err.message}`)),
    );
    child.on("exit", (code) => fail(new Error(`redis-server exited with ${code}:\n${log}`)));
  });
  const version = execFileSync("redis-server", ["--version"], { encoding: "utf8" }).match(/v=(\S+)/)?.[1] ?? "?";
  return { child, url: `redis://127.0.0.1:${port}`, version };
}

/**
 * node-oidc-provider (tools/peers/oidc-provider/server.mjs), one Node process, loaded by
 * k6/peer-oidc-provider.js: with its in-memory adapter, or with `redis` its models in a local
 * redis-server (PEER=oidc-provider-redis), whose CPU is counted with the peer's.
 * @param {{ redis?: boolean }} [o] @returns {Promise<Target>}
 */
export async function peerTarget(o = {}) {
  const port = await freePort();
  const tmp = mkdtempSync(join(tmpdir(), "keyway-peer-"));
  const redis = o.redis ? await startRedis(tmp) : null;
  const child = spawn(process.execPath, [join(REPO, "tools/peers/oidc-provider/server.mjs")], {
    cwd: REPO,
    env: { ...process.env, PORT: String(port), NODE_ENV: "production", ...(redis ? { REDIS_URL: redis.url } : {}) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  await new Promise((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`the peer did not start:\n${log}`)), 20_000);
    const onData = (/** @type {Buffer} */ d) => {
      log += d;
      if (log.includes("oidc-provider peer at")) {
        clearTimeout(timer);
        ready(undefined);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => fail(new Error(`the peer exited with ${code}:\n${log}`)));
  });
  const { version } = JSON.parse(readFileSync(join(REPO, "node_modules/oidc-provider/package.json"), "utf8"));
  return {
    name: redis ? "node-oidc-provider-redis" : "node-oidc-provider",
    description: redis
      ? `node-oidc-provider ${version} (tools/peers/oidc-provider/server.mjs): one Node ${process.version} process, its models in redis-server ${redis.version} (appendonly yes, appendfsync everysec; tools/peers/oidc-provider/redis-adapter.mjs), a public PKCE client`
      : `node-oidc-provider ${version} (tools/peers/oidc-provider/server.mjs): one Node ${process.version} process, its in-memory adapter, a public PKCE client`,
    url: `http://127.0.0.1:${port}`,
    adminToken: "",
    tmp,
    script: join(REPO, "k6/peer-oidc-provider.js"),
    extraReads: true,
    env: {},
    pids: () => [child, ...(redis ? [redis.child] : [])].flatMap((c) => (c.pid && c.exitCode === null ? [c.pid] : [])),
    stats: null,
    policy: {},
    vars: {},
    async dispose(keep = false) {
      for (const c of [child, ...(redis ? [redis.child] : [])])
        if (c.exitCode === null) {
          c.kill("SIGTERM");
          await exitOf(c);
        }
      if (!keep) rmSync(tmp, { recursive: true, force: true });
    },
  };
}

export { raisedPolicy };
