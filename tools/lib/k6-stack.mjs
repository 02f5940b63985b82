// Shared by tools/smoke.mjs and tools/bench.mjs: the pinned k6 binary, and a throwaway Keyway stack
// (scripts/stack.mjs, the `npm start` runtime) with fresh secrets, a temporary state folder and per-IP
// quotas raised for load (every local request comes from 127.0.0.1, so the default 30 generates and 60
// verifies per minute would cap a run at 0.5 logins/s; CONTRACT §6: raised, never switched off).
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { generateSecrets } from "../../scripts/lib/local.mjs";
import { freePort, startStack } from "../../scripts/stack.mjs";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const K6_PATH = join(REPO, ".keyway", "bin", "k6");
export const K6_VERSION = "v1.8.1"; // the same pin as tools/k6-install.mjs
export const FULL_LOGIN = join(REPO, "k6", "full-login.js");
export const RESHARD = join(REPO, "k6", "reshard.js");

/** The k6 version at K6_PATH, or null when there is none. */
export function installedK6() {
  if (!existsSync(K6_PATH)) return null;
  const r = spawnSync(K6_PATH, ["version"], { encoding: "utf8" });
  const m = r.status === 0 ? /k6 (v\d+\.\d+\.\d+\S*)/.exec(r.stdout) : null;
  return m ? m[1] : null;
}

/** A Go toolchain tools/k6-install.mjs would find, or null. */
export function findGo() {
  for (const c of [process.env.GO, "go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go"].filter(Boolean)) {
    const r = spawnSync(/** @type {string} */ (c), ["version"], { encoding: "utf8" });
    if (r.status === 0) return c;
  }
  return null;
}

/** Runs tools/k6-install.mjs (a no-op when the pinned k6 is there). Returns its exit status. */
export function installK6() {
  const r = spawnSync(process.execPath, [join(REPO, "tools", "k6-install.mjs")], { stdio: "inherit", cwd: REPO });
  return r.status ?? 1;
}

/**
 * The load tests' POLICY: the per-IP quotas raised to `perMinute` (the schema allows at most
 * 1,000,000/min), since every request comes from 127.0.0.1. Everything else is the default (client
 * registrations cached 30 s per isolate among them).
 */
export function raisedPolicy(perMinute = 1_000_000) {
  return {
    ip_generate_per_minute: perMinute,
    ip_verify_per_minute: perMinute,
    ip_device_authorization_per_minute: perMinute,
    client_auth_failures_per_minute: perMinute,
  };
}

/**
 * Starts the stack on a free port with fresh secrets (the generator behind `npm start`'s .dev.vars,
 * never the file itself), a fresh state folder and the bundles in a temporary folder.
 * Cron Triggers do not fire (a measured run has no work but its own) unless `cronEverySeconds` asks.
 * `dataset`: a folder whose state outlives the stack (issue 24: a data set loaded once by
 * `npm run bench:import`, measured against later): its `state` folder and the secrets in its
 * `vars.json` (written at first use), since ids and keys are bound to them; it is never removed.
 * `productionShaped`: scripts/stack.mjs's option of that name (op-auth and op-token on ports of their
 * own, Rate Limiting in memory), for measuring what the local runtime adds (issue 28 item 4).
 * `stateInMemory`: the temporary folder, and so the Durable Objects' and D1's SQLite files, on a tmpfs
 * (/dev/shm). workerd's local storage commits each transaction with an fsync on the thread that runs
 * the isolates (measured with perf, docs/performance.md); on a tmpfs that costs nothing, as
 * production's storage, made durable by replicas in other data centres, does not cost the object's
 * thread a disk flush. The files are gone with the stack, as they are without it.
 * @param {{ policy?: Record<string, unknown>, vars?: Record<string, string>, port?: number, inspectorPort?: number, cronEverySeconds?: number | false, dataset?: string, productionShaped?: boolean, stateInMemory?: boolean }} [opts]
 */
export async function startLoadStack({
  policy = raisedPolicy(),
  vars = {},
  port,
  inspectorPort,
  cronEverySeconds = false,
  dataset,
  productionShaped = false,
  stateInMemory = false,
} = {}) {
  if (stateInMemory && dataset) throw new Error("a dataset's state outlives the stack: it cannot be in memory");
  const tmp = scratchDir("keyway-load-", stateInMemory);
  let secrets = generateSecrets();
  if (dataset) {
    mkdirSync(dataset, { recursive: true });
    const file = join(dataset, "vars.json");
    if (existsSync(file)) secrets = JSON.parse(readFileSync(file, "utf8"));
    else writeFileSync(file, `${JSON.stringify(secrets, null, 2)}\n`, { mode: 0o600 });
  }
  const allVars = { ...secrets, POLICY: JSON.stringify(policy), ...vars };
  let stack;
  try {
    stack = await startStack({
      port: port ?? (await freePort()),
      persistTo: dataset ? join(dataset, "state") : join(tmp, "state"),
      outDir: join(tmp, "dist"),
      vars: allVars,
      inspectorPort,
      cronEverySeconds,
      productionShaped,
      // Production has no front door of Keyway's: the shaped stack keeps the gateway in Keyway's process,
      // so its CPU per login counts what it did before the front door (issue 44 item 3) and no more.
      front: !productionShaped,
    });
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  const started = stack;
  let disposed = false;
  return {
    url: started.url,
    workerUrls: started.workerUrls,
    adminToken: /** @type {string} */ (secrets.ADMIN_TOKEN),
    vars: allVars,
    tmp,
    /** Runs a Cron Trigger of every Worker that has it, now (the stack fires none by itself here). */
    fireCron: started.fireCron,
    /** Stops workerd; removes the temporary folder unless `keep`. */
    async dispose(keep = false) {
      if (disposed) return;
      disposed = true;
      try {
        await started.dispose();
      } finally {
        if (!keep) rmSync(tmp, { recursive: true, force: true });
      }
    },
  };
}

/**
 * A fresh temporary folder named from `prefix`: on a tmpfs when `inMemory` (an error when the machine
 * has none), else in the system's temporary folder.
 * @param {string} prefix @param {boolean} inMemory
 */
export function scratchDir(prefix, inMemory) {
  const base = inMemory ? tmpfsDir() : tmpdir();
  if (!base) throw new Error("state in memory needs a writable tmpfs at /dev/shm, and there is none");
  return mkdtempSync(join(base, prefix));
}

/** A tmpfs folder this user can write (/dev/shm, mounted as tmpfs), or null when there is none. */
export function tmpfsDir() {
  const dir = "/dev/shm";
  try {
    if (
      !readFileSync("/proc/mounts", "utf8")
        .split("\n")
        .some((l) => l.split(" ")[1] === dir && l.split(" ")[2] === "tmpfs")
    )
      return null;
    const probe = mkdtempSync(join(dir, "keyway-probe-"));
    rmSync(probe, { recursive: true });
    return dir;
  } catch {
    return null;
  }
}

/**
 * Spawns k6 (never spawnSync: workerd is a child of this process, and Miniflare's side of it needs
 * this event loop while the test runs).
 * @param {string[]} args @param {Record<string, string>} env @param {import("node:child_process").StdioOptions} stdio
 */
export function spawnK6(args, env, stdio = "inherit") {
  return spawn(K6_PATH, args, {
    cwd: REPO,
    stdio,
    // k6 would otherwise report its usage to Grafana at the end of a run.
    env: { ...process.env, K6_NO_USAGE_REPORT: "true", ...env },
  });
}

/** @param {import("node:child_process").ChildProcess} child @returns {Promise<number>} */
export function exitOf(child) {
  return new Promise((resolveExit) => {
    child.on("error", () => resolveExit(1));
    child.on("close", (code, signal) => resolveExit(code ?? (signal ? 128 : 1)));
  });
}

/** An ES module Worker from its source, for scratchMiniflare. @param {string} contents */
export function esmWorker(contents) {
  return { mainModule: "index.js", modules: { "index.js": { type: "esm", contents } } };
}

/**
 * A throwaway workerd of the tools' own Workers (npm run cost-model, the bench's floor): no Request.cf
 * download (offline), no dev registry, no telemetry, its state under `persistTo`; `inspectorPort` for
 * tools/profile.mjs.
 * @param {string} persistTo @param {import("miniflare").WorkerOptions[]} workers @param {number} [inspectorPort]
 */
export function scratchMiniflare(persistTo, workers, inspectorPort) {
  return new Miniflare({
    ...(inspectorPort ? { inspectorPort } : {}),
    host: "127.0.0.1",
    port: 0,
    cf: false,
    enableDevRegistry: false,
    telemetry: { enabled: false },
    resourcePersistencePath: persistTo,
    workers,
  });
}
