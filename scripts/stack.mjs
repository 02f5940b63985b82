// The production-like local runtime behind `npm start` and the e2e test: every Worker bundled by
// wrangler exactly as `wrangler deploy` would upload it, then run with Miniflare's API in a single
// workerd process, with no wrangler dev proxy in front. The gateway serves the issuer origin from a
// second workerd process, the front door (`front`), which reaches the Workers on ports of their own.

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { Log, LogLevel, Miniflare } from "miniflare";
import { unstable_readConfig as readConfig, unstable_splitSqlQuery as splitSqlQuery } from "wrangler";
import { workerdPids } from "../tools/lib/proc.mjs";
import {
  ALL_CONFIGS,
  DEFAULT_PORT,
  demoClientSql,
  GATEWAY_CONFIG,
  issuerFor,
  KEYWAY_CONFIGS,
  OP_CONFIGS,
  ROOT,
  START_PERSIST_DIR,
  STORES_CONFIG,
} from "./lib/local.mjs";
import { wrangler } from "./lib/run.mjs";

/**
 * @typedef {object} StackOptions
 * @property {number} [port] TCP port on 127.0.0.1; the issuer is http://127.0.0.1:<port>.
 * @property {string} [issuer] The issuer as clients see it, when a TLS front (a reverse proxy) serves the
 *   port under another origin, e.g. https://op.test:8443 (the OpenID Foundation's suite needs https).
 *   An https origin, or http on a loopback host; without it, http://127.0.0.1:<port>.
 * @property {string} [persistTo] Folder for D1 and Durable Object data (relative to the repo root).
 * @property {Record<string, string>} [vars] Variables of the Keyway Workers (all but the gateway), layered
 *   over each wrangler.toml [vars]: the secrets, plus any override (POLICY, SHARDS...). ISSUER is always
 *   the served origin.
 * @property {string} [outDir] Where the bundles go (relative to the repo root); one folder per Worker.
 * @property {boolean} [build] Bundle the Workers first (default true), unless outDir holds bundles of
 *   exactly today's sources (`buildFingerprint`); false reuses what is in outDir.
 * @property {number} [inspectorPort] Open the V8 inspector of every isolate on this port (profiling).
 * @property {boolean} [productionShaped] Issue 28 item 4, for measuring: op-auth, op-token and op-mgmt also
 *   listen on ports of their own (`Stack.workerUrls`), as production routes paths on the issuer's host to each
 *   Worker with no gateway between; and each Rate Limiting binding is a counter in memory behind one
 *   RPC call (LOCAL_RATE_LIMITER), as the binding is a counter in the Cloudflare location, instead of
 *   Miniflare's emulation (an entry Worker and a SQLite Durable Object per call). The dev gateway
 *   still serves the issuer's port.
 * @property {boolean} [front] The dev gateway in a workerd process of its own, in front of the one that runs
 *   Keyway (default true), reaching op-auth, op-token and op-mgmt on ports of their own: a front door with
 *   its own thread, which refuses new logins past the bound at once instead of queueing the refusal behind
 *   the admitted work on Keyway's one thread (issue 44 item 3, workers/dev-gateway/front-door.ts). False:
 *   one process, the gateway beside the Workers.
 * @property {number | false} [cronEverySeconds] The Workers' Cron Triggers (`[triggers] crons`), which
 *   workerd never fires by itself: unset, each fires on its schedule, as on Cloudflare; a number fires
 *   every one of them that often (a compressed clock, for runs shorter than a schedule); false, never.
 *
 * @typedef {object} Stack
 * @property {string} url The issuer origin, e.g. http://127.0.0.1:8787 (or `issuer` when given).
 * @property {Record<string, string>} workerUrls With `productionShaped`, each op Worker's own origin by name.
 * @property {boolean} built Whether this start bundled the Workers (false: the bundles in outDir were current).
 * @property {Miniflare} mf
 * @property {{ keyway: number[], front: number[] }} pids The workerd processes as started: Keyway's, and the
 *   front door's (none without `front`). Read from this process's children: a stack started beside another
 *   in the same process counts the other's too.
 * @property {(cron: string) => Promise<void>} fireCron Runs a Cron Trigger of every Worker that has it, now.
 * @property {() => Promise<void>} dispose
 */

/** @param {string} p */
const fromRoot = (p) => (isAbsolute(p) ? p : join(ROOT, p));

/**
 * The state folder exists and takes writes, or start-up stops here with what to do (issue 27 item 18:
 * an unwritable folder used to end in workerd's "internal error" or a stack that refused every login).
 * @param {string} dir
 */
function checkWritable(dir) {
  const probe = join(dir, `.write-probe-${process.pid}`);
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(probe, "");
    rmSync(probe);
  } catch (err) {
    const code = /** @type {NodeJS.ErrnoException} */ (err).code ?? String(err);
    throw new Error(
      `the state folder ${dir} cannot be written (${code}): make it writable by this user (or remove it to start afresh), or choose another folder`,
    );
  }
}

/** @param {StackOptions} options @returns {Promise<Stack>} */
export async function startStack({
  port = DEFAULT_PORT,
  issuer: publicIssuer = undefined,
  persistTo = START_PERSIST_DIR,
  vars = {},
  outDir = "dist",
  build = true,
  inspectorPort = undefined,
  cronEverySeconds = undefined,
  productionShaped = false,
  front = true,
} = {}) {
  const issuer = issuerOrigin(publicIssuer ?? issuerFor(port));
  // First, before any build: a state folder that cannot be written stops here with what to do.
  const persistPath = fromRoot(persistTo);
  checkWritable(persistPath);
  const configs = ALL_CONFIGS.map((path) => ({ path, config: readConfig({ config: fromRoot(path) }) }));
  const bundleDir = (/** @type {string} */ name) => join(fromRoot(outDir), name);
  const built = build ? await ensureBundles(outDir) : false;

  /** @type {Set<string>} Durable Object classes declared SQLite-backed by a [[migrations]] entry. */
  const sqliteClasses = new Set(
    configs.flatMap(({ config }) =>
      config.migrations.flatMap((/** @type {{ new_sqlite_classes?: string[] }} */ m) => m.new_sqlite_classes ?? []),
    ),
  );
  /** @type {Record<string, string>} */
  const workerUrls = {};
  /** @type {Record<string, number>} */
  const ownPorts = {};
  if (productionShaped || front)
    for (const { path, config } of configs)
      if (OP_CONFIGS.includes(path)) {
        const name = /** @type {string} */ (config.name);
        ownPorts[name] = await freePort();
        if (productionShaped) workerUrls[name.replace(/^keyway-/, "")] = `http://127.0.0.1:${ownPorts[name]}`;
      }
  /** The front door counts logins by op-auth's policy: its POLICY and ENVIRONMENT as op-auth gets them. */
  const opAuth = configs.find(({ config }) => config.name === "keyway-op-auth")?.config;
  const opAuthVars = { ...opAuth?.vars, ...vars };
  const workers = configs.map(({ path, config }) => {
    const name = /** @type {string} */ (config.name);
    assertSupportedBindings(path, config);
    const dir = bundleDir(name);
    const frontDoor = front && path === GATEWAY_CONFIG;
    /** @type {Record<string, unknown>} */
    const env = {};
    const text = {
      ...config.vars,
      ...(KEYWAY_CONFIGS.includes(path) ? vars : {}),
      ...(frontDoor
        ? {
            FRONT_DOOR: "1",
            ENVIRONMENT: String(opAuthVars.ENVIRONMENT ?? "development"),
            ...(opAuthVars.POLICY !== undefined
              ? {
                  POLICY: typeof opAuthVars.POLICY === "string" ? opAuthVars.POLICY : JSON.stringify(opAuthVars.POLICY),
                }
              : {}),
          }
        : {}),
    };
    if ("ISSUER" in text) text.ISSUER = issuer;
    for (const [key, value] of Object.entries(text))
      env[key] = typeof value === "string" ? { type: "text", value } : { type: "json", value };
    for (const db of config.d1_databases) env[db.binding] = { type: "d1", id: db.database_id };
    // The front door reaches each Worker over HTTP on the Worker's own port; `request.cf` (the dev geo
    // headers' country) travels in the header Miniflare's sockets read it from.
    for (const svc of config.services ?? [])
      env[svc.binding] = frontDoor
        ? { type: "external", address: `127.0.0.1:${ownPorts[svc.service]}`, http: { cfBlobHeader: CF_BLOB_HEADER } }
        : { type: "worker", worker: svc.service };
    /** @type {Record<string, unknown>} */
    const exports = {};
    for (const ns of config.durable_objects.bindings) {
      env[ns.name] = { type: "durable-object", worker: ns.script_name ?? name, exportName: ns.class_name };
      if (!ns.script_name)
        exports[ns.class_name] = {
          type: "durable-object",
          storage: sqliteClasses.has(ns.class_name) ? "sqlite" : "legacy-kv",
        };
    }
    // The gateway is the front: workerd serves the issuer origin straight from its socket (no
    // Miniflare entry Worker in between, which cost about 0.2 ms of the single thread per request) and
    // the gateway hands each path to the Worker that owns it, as routes do in production.
    // Workers Rate Limiting bindings (op-auth's per-IP quotas): Miniflare implements them itself.
    for (const r of /** @type {{ name: string, namespace_id: string, simple: { limit: number, period: 10 | 60 } }[]} */ (
      config.ratelimits ?? []
    ))
      env[r.name] = productionShaped
        ? {
            type: "worker",
            worker: LOCAL_RATE_LIMITER,
            exportName: "Limiter",
            props: { ...r.simple, namespace: r.namespace_id },
          }
        : { type: "rate-limit", namespace: r.namespace_id, simple: r.simple };
    const ownPort = ownPorts[name];
    return {
      ...(path === GATEWAY_CONFIG ? { dev: { unsafeDirectSockets: [{ host: "127.0.0.1", port }] } } : {}),
      ...(ownPort ? { dev: { unsafeDirectSockets: [{ host: "127.0.0.1", port: ownPort }] } } : {}),
      config: {
        name,
        compatibilityDate: /** @type {string} */ (config.compatibility_date),
        compatibilityFlags: config.compatibility_flags,
        manifest: {
          mainModule: "index.js",
          modulesRoot: dir,
          modules: bundleModules(dir),
        },
        env,
        exports,
      },
    };
  });

  const [gateway] = workers.filter((_, i) => configs[i]?.path === GATEWAY_CONFIG);
  const inner = front ? workers.filter((w) => w !== gateway) : workers;
  // One workerd process runs Keyway (and, without `front`, the gateway). A split (the stores in a second
  // process, reached through Miniflare's dev registry) was measured and is slower: each cross-process
  // Durable Object call costs more CPU than the second core gives back (docs/performance.md).
  /** @param {boolean} serving the sockets open: the issuer's port, or with `front` the Workers' own */
  const options = (serving) =>
    /** @type {import("miniflare").MiniflareOptions} */ ({
      host: "127.0.0.1",
      // Miniflare's own entry socket is unused (the gateway has the issuer's port); any free port.
      port: 0,
      resourcePersistencePath: persistPath,
      // No Request.cf download (offline) and no cross-process dev registry: this stack is self-contained.
      cf: false,
      enableDevRegistry: false,
      telemetry: { enabled: false },
      // For tools/profile.mjs: the V8 inspector of every Worker and Durable Object isolate.
      ...(inspectorPort ? { inspectorPort } : {}),
      log: new Log(LogLevel.WARN),
      // Until the database is migrated and seeded, nothing listens on the issuer's port (issue 27 item 18).
      workers: [
        ...(serving ? inner : inner.map(({ dev: _, ...w }) => w)),
        ...(productionShaped ? [localRateLimiter()] : []),
      ],
    });
  const mf = new Miniflare(options(false));
  try {
    await mf.ready;
    const stores = /** @type {(typeof configs)[number]} */ (configs.find((c) => c.path === STORES_CONFIG));
    const d1 = stores.config.d1_databases[0];
    if (!d1?.migrations_dir) throw new Error(`${STORES_CONFIG} has no D1 migrations_dir`);
    const db = await mf.getD1Database(d1.binding, stores.config.name);
    await applyMigrations(db, resolve(ROOT, dirname(STORES_CONFIG), d1.migrations_dir));
    await db.batch(demoClientSql(issuer).map((sql) => db.prepare(sql)));
    // Ready: now the issuer's port (workerd restarts with the socket; the state stays).
    await mf.setOptions(options(true));
    await mf.ready;
  } catch (err) {
    await mf.dispose();
    throw err;
  }
  // The front door: the gateway alone in a second workerd process, on the issuer's port.
  const keywayPids = workerdPids();
  /** @type {Miniflare | null} */
  let frontMf = null;
  if (front && gateway) {
    frontMf = new Miniflare(
      /** @type {import("miniflare").MiniflareOptions} */ ({
        host: "127.0.0.1",
        port: 0,
        cf: false,
        enableDevRegistry: false,
        telemetry: { enabled: false },
        log: new Log(LogLevel.WARN),
        workers: [gateway],
      }),
    );
    try {
      await frontMf.ready;
    } catch (err) {
      await Promise.allSettled([frontMf.dispose(), mf.dispose()]);
      throw err;
    }
  }
  const crons = configs.flatMap(({ config }) =>
    (config.triggers?.crons ?? []).map((/** @type {string} */ cron) => ({
      worker: /** @type {string} */ (config.name),
      cron,
    })),
  );
  /** @param {string} cron */
  const fireCron = async (cron) => {
    for (const t of crons.filter((c) => c.cron === cron)) {
      try {
        const worker = await mf.getWorker(t.worker);
        await worker.scheduled({ cron: t.cron, scheduledTime: new Date() });
      } catch (err) {
        console.error(`stack: cron ${t.cron} of ${t.worker} failed: ${err instanceof Error ? err.message : err}`);
      }
    }
  };
  const timer = cronTimer(crons, cronEverySeconds, fireCron);
  return {
    url: issuer,
    workerUrls,
    built,
    mf,
    pids: { keyway: keywayPids, front: workerdPids().filter((pid) => !keywayPids.includes(pid)) },
    fireCron,
    dispose: async () => {
      if (timer) clearInterval(timer);
      await frontMf?.dispose();
      await mf.dispose();
    },
  };
}

const LOCAL_RATE_LIMITER = "keyway-local-rate-limiter";

/** The header Miniflare's sockets take `request.cf` from (its CoreHeaders.CF_BLOB). */
const CF_BLOB_HEADER = "MF-CF-Blob";

/**
 * `productionShaped`'s Rate Limiting binding: the binding's `limit({ key })` answered from a counter in
 * memory, per namespace and key, in fixed windows of the binding's period (Cloudflare's binding counts
 * in its location, in memory, and is eventually consistent; this is one isolate, so it is exact).
 */
export function localRateLimiter() {
  const source = `import { WorkerEntrypoint } from "cloudflare:workers";
const windows = new Map();
export class Limiter extends WorkerEntrypoint {
  limit({ key, delta = 1 }) {
    const { limit, period, namespace } = this.ctx.props;
    const now = Math.floor(Date.now() / (period * 1000));
    const id = namespace + ":" + key;
    let w = windows.get(id);
    if (!w || w.window !== now) { w = { window: now, used: 0 }; windows.set(id, w); }
    if (windows.size > 100000) windows.clear();
    if (w.used + delta > limit) return { success: false };
    w.used += delta;
    return { success: true };
  }
}
export default { fetch() { return new Response("not found", { status: 404 }); } };`;
  return {
    config: {
      name: LOCAL_RATE_LIMITER,
      compatibilityDate: "2026-11-01",
      manifest: { mainModule: "index.js", modules: { "index.js": { type: "esm", contents: source } } },
    },
  };
}

/**
 * Fires Cron Triggers locally, as Cloudflare does in production: at each minute a schedule matches
 * (standard five fields: minute hour day-of-month month day-of-week, with `*`, `*\/n`, lists and
 * ranges), or, with `everySeconds`, every trigger that often, one after another. A trigger never runs
 * while its previous run (or, compressed, the previous round) is still going.
 * @param {{ worker: string, cron: string }[]} crons @param {number | false | undefined} everySeconds
 * @param {(cron: string) => Promise<void>} fire
 */
function cronTimer(crons, everySeconds, fire) {
  if (crons.length === 0 || everySeconds === false) return null;
  const running = new Set();
  const run = (/** @type {string} */ cron) => {
    if (running.has(cron)) return;
    running.add(cron);
    fire(cron).finally(() => running.delete(cron));
  };
  const unique = [...new Set(crons.map((c) => c.cron))];
  if (typeof everySeconds === "number") {
    let round = Promise.resolve();
    let busy = false;
    return setInterval(() => {
      if (busy) return;
      busy = true;
      round = unique
        .reduce((p, cron) => p.then(() => fire(cron)), round)
        .finally(() => {
          busy = false;
        });
    }, everySeconds * 1000).unref();
  }
  let lastMinute = -1;
  return setInterval(() => {
    const now = new Date();
    const minute = Math.floor(now.getTime() / 60_000);
    if (minute === lastMinute) return;
    lastMinute = minute;
    for (const cron of unique) if (cronMatches(cron, now)) run(cron);
  }, 1_000).unref();
}

/** Whether a five-field cron expression matches `date` (UTC, as Cloudflare's Cron Triggers). */
export function cronMatches(/** @type {string} */ expr, /** @type {Date} */ date) {
  const fields = expr.trim().split(/\s+/);
  if (fields.length !== 5) throw new Error(`not a five-field cron: ${expr}`);
  const values = [
    date.getUTCMinutes(),
    date.getUTCHours(),
    date.getUTCDate(),
    date.getUTCMonth() + 1,
    date.getUTCDay(),
  ];
  const ranges = [
    [0, 59],
    [0, 23],
    [1, 31],
    [1, 12],
    [0, 6],
  ];
  return fields.every((field, i) =>
    field.split(",").some((part) => {
      const [range = "", stepText] = part.split("/");
      const step = stepText ? Number(stepText) : 1;
      let lo = 0;
      let hi = 0;
      const [min, max] = /** @type {[number, number]} */ (ranges[i]);
      if (range === "*") [lo, hi] = [min, max];
      else if (range.includes("-")) [lo, hi] = /** @type {[number, number]} */ (range.split("-").map(Number));
      else {
        lo = Number(range);
        hi = stepText ? max : lo; // `5/10`: from 5, every 10
      }
      const v = /** @type {number} */ (values[i]);
      return v >= lo && v <= hi && (v - lo) % step === 0;
    }),
  );
}

/**
 * This loader translates vars, D1, Durable Objects, service and Rate Limiting bindings. Refuse a config that
 * declares anything else rather than start a Worker with a binding silently missing.
 * @param {string} path @param {Record<string, any>} config
 */
function assertSupportedBindings(path, config) {
  const kinds = ["kv_namespaces", "r2_buckets", "send_email", "hyperdrive", "vectorize", "analytics_engine_datasets"];
  const present = kinds.filter((k) => Array.isArray(config[k]) && config[k].length > 0);
  if (config.queues?.producers?.length) present.push("queues");
  if (config.workflows?.length) present.push("workflows");
  if (config.ai) present.push("ai");
  if (present.length)
    throw new Error(`${path}: scripts/stack.mjs does not translate ${present.join(", ")} bindings yet; add them there`);
}

/**
 * Bundles every Worker into `outDir` unless it holds bundles of exactly today's sources
 * (`buildFingerprint`, kept beside them): a restart on unchanged sources reuses them (issue 38 item
 * 12: bundling was most of a restart), and the e2e tests share one build. Says whether it bundled.
 * @param {string} outDir
 */
export async function ensureBundles(outDir) {
  const configs = ALL_CONFIGS.map((path) => ({ path, config: readConfig({ config: fromRoot(path) }) }));
  const bundleDir = (/** @type {string} */ name) => join(fromRoot(outDir), name);
  const stampFile = join(fromRoot(outDir), ".build-fingerprint");
  const fingerprint = buildFingerprint();
  const current =
    existsSync(stampFile) &&
    readFileSync(stampFile, "utf8") === fingerprint &&
    configs.every(({ config }) => existsSync(join(bundleDir(config.name ?? ""), "index.js")));
  if (current) return false;
  rmSync(stampFile, { force: true });
  await buildWorkers(configs.map(({ path, config }) => ({ path, outdir: bundleDir(config.name ?? "") })));
  writeFileSync(stampFile, fingerprint);
  return true;
}

/** What a bundle is made of: the folders wrangler bundles from, every wrangler config, and the lock. */
const BUILD_INPUTS = ["workers", "durable-objects", "package-lock.json", "tsconfig.json", ...ALL_CONFIGS];

/**
 * The SHA-256 of every build input's path and content, so bundles are rebuilt exactly when a source,
 * a config or a dependency changed (contents, not times: a checkout or a copy keeps them valid).
 */
export function buildFingerprint() {
  const hash = createHash("sha256");
  /** @param {string} rel */
  const add = (rel) => {
    const abs = join(ROOT, rel);
    if (!existsSync(abs)) return;
    const files = statSync(abs).isDirectory()
      ? readdirSync(abs, { withFileTypes: true, recursive: true })
          .filter((e) => e.isFile())
          .map((e) => join(e.parentPath, e.name))
          .sort()
      : [abs];
    for (const file of files) {
      hash.update(`${file.slice(ROOT.length)}\0`);
      hash.update(readFileSync(file));
    }
  };
  for (const input of BUILD_INPUTS) add(input);
  return hash.digest("hex");
}

/**
 * `wrangler deploy --dry-run --outdir` bundles TypeScript to the JS that would be uploaded.
 * @param {{ path: string, outdir: string }[]} targets
 */
export async function buildWorkers(targets) {
  await Promise.all(targets.map((t) => wrangler(["deploy", "--dry-run", "--outdir", t.outdir, "-c", t.path])));
}

/**
 * The bundle is one ES module (index.js). Anything else wrangler emitted besides source maps
 * would be an extra module this loader does not know how to type, so refuse rather than guess.
 * @param {string} dir
 */
function bundleModules(dir) {
  const extra = readdirSync(dir).filter((f) => f !== "index.js" && !f.endsWith(".map") && f !== "README.md");
  if (extra.length) throw new Error(`unexpected files in the bundle ${basename(dir)}: ${extra.join(", ")}`);
  return { "index.js": { type: "esm", contents: readFileSync(join(dir, "index.js"), "utf8") } };
}

/** @typedef {Awaited<ReturnType<Miniflare["getD1Database"]>>} D1 */

/**
 * Applies schema/*.sql in name order, recording them in `d1_migrations` as `wrangler d1 migrations
 * apply` does; each migration runs as one batch (a transaction).
 * @param {D1} db @param {string} dir
 */
export async function applyMigrations(db, dir) {
  await db
    .prepare(
      "CREATE TABLE IF NOT EXISTS d1_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    )
    .run();
  const { results } = await db.prepare("SELECT name FROM d1_migrations").all();
  const applied = new Set(results.map((/** @type {Record<string, unknown>} */ r) => r.name));
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".sql"))
    .sort();
  for (const file of files) {
    if (applied.has(file)) continue;
    const queries = splitSqlQuery(readFileSync(join(dir, file), "utf8"));
    await db.batch([
      ...queries.map((q) => db.prepare(q)),
      db.prepare("INSERT INTO d1_migrations (name) VALUES (?)").bind(file),
    ]);
  }
}

/**
 * An issuer origin `startStack` may serve: https anywhere (behind a TLS front), http only on a loopback
 * host, no path, query or fragment; refused with what is wrong otherwise.
 * @param {string} value
 */
export function issuerOrigin(value) {
  let url;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`ISSUER ${value} is not a URL`);
  }
  const loopback = ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname);
  if (url.protocol !== "https:" && !(url.protocol === "http:" && loopback))
    throw new Error(`ISSUER ${value} must be https (or http on a loopback host)`);
  if (url.pathname !== "/" || url.search || url.hash || url.username || url.password)
    throw new Error(`ISSUER ${value} must be an origin: no path, query, fragment or user`);
  return url.origin;
}

/** A port that was free a moment ago (the stack must know its issuer before it listens). */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === "object") resolvePort(address.port);
        else reject(new Error("no port"));
      });
    });
  });
}
