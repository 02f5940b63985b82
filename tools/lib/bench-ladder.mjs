// One rung of the bench ladder (tools/bench.mjs): a k6 run of a target's login script at one rate,
// with the CPU of the target's server processes, k6 and the machine read from /proc over the hold.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { exitOf, spawnK6 } from "./k6-stack.mjs";
import { CLK_TCK, cpuTicks, rssBytes } from "./proc.mjs";

const STATS = "avg,min,med,p(90),p(95),p(99),max,count";

/** Busy and total ticks of all CPUs (/proc/stat), for the machine's whole load. */
function systemTicks() {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: total - idle, total };
}

export const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

/** CPU ticks of every process, by pid. */
function allTicks() {
  /** @type {Map<number, number>} */
  const out = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const t = cpuTicks(Number(name));
    if (t !== null) out.set(Number(name), t);
  }
  return out;
}

/** A short name for a process: its command, and for node/npm the script it runs. @param {number} pid */
function processName(pid) {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    const exe = (argv[0] ?? "?").split("/").pop() ?? "?";
    const script = argv.slice(1).find((a) => !a.startsWith("-"));
    if (/^(node|npm|npx)/.test(exe) && script) return `${exe} ${script.split("/").slice(-2).join("/")}`;
    return exe;
  } catch {
    return `pid ${pid}`;
  }
}

/** @param {number} k6Pid @param {number[]} pids the server's processes */
function snapshot(k6Pid, pids) {
  return {
    at: performance.now(),
    server: pids.reduce((sum, pid) => sum + (cpuTicks(pid) ?? 0), 0),
    serverPids: pids,
    k6: cpuTicks(k6Pid) ?? 0,
    k6Pid,
    node: process.cpuUsage(),
    system: systemTicks(),
    all: allTicks(),
  };
}

/** Cores used between two snapshots. @param {ReturnType<typeof snapshot>} a @param {ReturnType<typeof snapshot>} b */
function coresBetween(a, b) {
  const seconds = (b.at - a.at) / 1000;
  const server = (b.server - a.server) / CLK_TCK / seconds;
  const k6 = (b.k6 - a.k6) / CLK_TCK / seconds;
  const nodeUs = b.node.user + b.node.system - (a.node.user + a.node.system);
  const node = nodeUs / 1e6 / seconds;
  const sysTotal = b.system.total - a.system.total;
  const machine = sysTotal > 0 ? ((b.system.busy - a.system.busy) / sysTotal) * cpus().length : 0;
  const ours = new Set([process.pid, a.k6Pid, ...a.serverPids, ...b.serverPids]);
  const busiestOthers = [...b.all]
    .filter(([pid]) => !ours.has(pid))
    // a process that started within the window has spent all of its ticks in it
    .map(([pid, t]) => ({ pid, cores: (t - (a.all.get(pid) ?? 0)) / CLK_TCK / seconds }))
    .filter((p) => p.cores >= 0.05)
    .sort((p, q) => q.cores - p.cores)
    .slice(0, 3)
    .map((p) => ({ name: processName(p.pid), cores: p.cores }));
  return { seconds, server, k6, node, machine, other: Math.max(0, machine - server - k6 - node), busiestOthers };
}

// ------------------------------------------------------------------------------------------------ k6 runs

/**
 * @typedef {{ avg: number, min: number, med: number, "p(90)": number, "p(95)": number, "p(99)": number, max: number, count: number }} TrendStats
 */

export const TRENDS = /** @type {const} */ ([
  ["AuthorizeInit", "step_authorize_init"],
  ["EmailCodeGenerate", "step_email_code_generate"],
  ["EmailCodeVerify", "step_email_code_verify"],
  ["AuthorizeCode", "step_authorize_code"],
  ["Token", "step_token"],
  ["full_flow", "full_flow"],
  ["mailbox_wait", "mailbox_wait"],
  ["iteration", "iteration_duration"],
]);
const ERROR_COUNTERS = ["rate_limited", "server", "otp", "session", "code", "other"];
const STATUSES = [0, 400, 429, 500, 502, 503];

/**
 * One k6 run of the target's login script at `rate`. CPU is sampled over the hold, which starts RAMP
 * seconds after setup logs its seeded users; RSS every half second while k6 runs. For a target with
 * `stats` (Keyway), its counters are read when seeding is done and when k6 has finished, so the
 * rung's Durable Object calls, D1 queries and rows written per login attempted can be reported.
 * @param {import("./bench-targets.mjs").Target} target
 * `atHold` is called as the hold starts, and what it returns as the hold ends (tools/bench.mjs profiles
 * the isolates over a hold with it).
 * @param {{ rate: number, ramp: number, hold: number, label: string, measure: boolean, atHold?: () => () => void }} run
 */
export async function runRung(target, { rate, ramp, hold, label, measure, atHold }) {
  const summaryPath = join(target.tmp, `${label}.summary.json`);
  const logPath = join(target.tmp, `${label}.log`);
  const load = loadavg();
  const child = spawnK6(
    ["run", "--quiet", "--no-color", "--summary-export", summaryPath, "--summary-trend-stats", STATS, target.script],
    {
      ...target.env,
      BASE_URL: target.url,
      ADMIN_TOKEN: target.adminToken,
      RATE: String(rate),
      RAMP: String(ramp),
      HOLD: String(hold),
      USERS: "seeded",
      PHASE_METRICS: "1",
      LOG_FAILURES: "2",
    },
    ["ignore", "pipe", "pipe"],
  );
  const k6Pid = /** @type {number} */ (child.pid);
  let log = "";
  /** @type {ReturnType<typeof snapshot> | null} */
  let holdStart = null;
  /** @type {ReturnType<typeof snapshot> | null} */
  let holdEnd = null;
  /** @type {NodeJS.Timeout[]} */
  const timers = [];
  let seededAt = 0;
  /** @type {Promise<import("./bench-targets.mjs").Counters | null> | null} */
  let statsAtSeed = null;
  const onData = (/** @type {Buffer} */ d) => {
    const text = d.toString();
    log += text;
    // With ENTITY_CLAIMS (issue 24), setup goes on to import the users' grants: the run starts after that.
    const ready =
      target.env?.ENTITY_CLAIMS === "1" || target.env?.ENTITY_GRANTS === "1"
        ? /msg="entity claims: /
        : /msg="seeded \d+ users/;
    if (!seededAt && ready.test(log)) {
      seededAt = performance.now();
      if (measure && target.stats) statsAtSeed = target.stats().catch(() => null);
      /** @type {(() => void) | undefined} */
      let atHoldEnd;
      timers.push(
        setTimeout(() => {
          holdStart = snapshot(k6Pid, target.pids());
          atHoldEnd = atHold?.();
        }, ramp * 1000),
      );
      timers.push(
        setTimeout(
          () => {
            if (!holdEnd) holdEnd = snapshot(k6Pid, target.pids());
            atHoldEnd?.();
          },
          (ramp + hold) * 1000,
        ),
      );
    }
  };
  child.stdout?.on("data", onData);
  child.stderr?.on("data", onData);
  let serverRss = 0;
  let k6Rss = 0;
  const sampler = setInterval(() => {
    serverRss = Math.max(
      serverRss,
      target.pids().reduce((sum, pid) => sum + rssBytes(pid), 0),
    );
    k6Rss = Math.max(k6Rss, rssBytes(k6Pid));
  }, 500);
  current = child;
  const status = await exitOf(child);
  current = null;
  const statsAtEnd = measure && target.stats ? await target.stats().catch(() => null) : null;
  const seedStats = statsAtSeed ? await statsAtSeed : null;
  clearInterval(sampler);
  for (const t of timers) clearTimeout(t);
  writeFileSync(logPath, log);
  if (!measure) return null;
  if (status !== 0 && status !== 99)
    throw new Error(
      `k6 exited with ${status} at ${rate}/s (99 would be a failed threshold); log:\n${log.slice(-4000)}`,
    );
  if (!existsSync(summaryPath)) throw new Error(`k6 wrote no summary at ${rate}/s; log:\n${log.slice(-4000)}`);
  /** @type {{ metrics: Record<string, any> }} */
  const summary = JSON.parse(readFileSync(summaryPath, "utf8"));
  const m = summary.metrics;
  const hm = (/** @type {string} */ name) => m[`${name}{phase:hold}`];
  const count = (/** @type {string} */ name) => Number(m[name]?.count ?? 0);
  /** @type {Record<string, TrendStats | null>} */
  const trends = {};
  for (const [label, metric] of TRENDS) {
    const t = hm(metric);
    trends[label] = t && Number(t.count) > 0 ? pickTrend(t) : null;
  }
  const success = hm("login_success");
  const passes = Number(success?.passes ?? 0);
  const fails = Number(success?.fails ?? 0);
  const logins = passes + fails;
  const iterations = count("iterations{phase:hold}");
  // Every login of the run, ramp included, against the counters read from seeding to the end.
  const allLogins = Number(m.login_success?.passes ?? 0) + Number(m.login_success?.fails ?? 0);
  const perLogin =
    seedStats && statsAtEnd && allLogins > 0
      ? {
          logins: allLogins,
          durableObjectCalls: (statsAtEnd.durable_object_calls - seedStats.durable_object_calls) / allLogins,
          d1Queries: (statsAtEnd.d1_queries - seedStats.d1_queries) / allLogins,
          rowsWritten: (statsAtEnd.rows_written - seedStats.rows_written) / allLogins,
        }
      : null;
  const cpu = holdStart && holdEnd ? coresBetween(holdStart, holdEnd) : null;
  return {
    rate,
    label,
    ramp,
    hold,
    k6Status: status,
    loadavgBefore: load,
    loadavgAfter: loadavg(),
    iterations,
    achieved: iterations / hold,
    okPerSecond: passes / hold,
    logins,
    failedLogins: fails,
    errorRate: logins > 0 ? fails / logins : 1,
    droppedIterations: count("dropped_iterations"),
    httpReqsPerSecond: count("http_reqs{phase:hold}") / hold,
    errors: Object.fromEntries(ERROR_COUNTERS.map((e) => [e, count(`errors_${e}{phase:hold}`)])),
    statuses: Object.fromEntries(STATUSES.map((s) => [String(s), count(`http_reqs{phase:hold,status:${s}}`)])),
    trends,
    cpu,
    perLogin,
    serverRssMax: serverRss,
    k6RssMax: k6Rss,
    failureSamples: failureSamples(log),
    // ENTITY_CLAIMS=1: the share of the run's logins whose ID token carried the organization asked for.
    extra: m.entity_claims_present ? { entityClaimsPresent: pct(Number(m.entity_claims_present.value)) } : undefined,
  };
}

const pct = (/** @type {number} */ x) => `${(x * 100).toFixed(1)} %`;

/** @param {Record<string, number>} t @returns {TrendStats} */
function pickTrend(t) {
  return /** @type {TrendStats} */ (
    Object.fromEntries(["avg", "min", "med", "p(90)", "p(95)", "p(99)", "max", "count"].map((k) => [k, Number(t[k])]))
  );
}

/**
 * The most frequent failure lines of the k6 log (each VU logs its first LOG_FAILURES), with ids,
 * codes and numbers blanked so that alike failures count together.
 * @param {string} log
 */
function failureSamples(log) {
  /** @type {Map<string, number>} */
  const seen = new Map();
  for (const line of log.split("\n")) {
    const m = /level=warning msg="(\[[A-Za-z]+\] .*?)" source=console/.exec(line);
    if (!m?.[1]) continue;
    const key = m[1]
      .replace(/\\"/g, '"')
      .replace(/lt-[a-z0-9]+-\d+@[\w.-]+/g, "<email>")
      .replace(/[A-Za-z0-9_-]{20,}/g, "<id>")
      .replace(/\d+ ms/g, "N ms")
      .slice(0, 240);
    seen.set(key, (seen.get(key) ?? 0) + 1);
  }
  return [...seen]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 4)
    .map(([text, n]) => ({ text, n }));
}

/** @type {import("node:child_process").ChildProcess | null} */
let current = null;

/** The k6 process of the rung under way, if any (to stop it on a signal). */
export const currentK6 = () => current;

/** @typedef {NonNullable<Awaited<ReturnType<typeof runRung>>>} Rung */
