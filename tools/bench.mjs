#!/usr/bin/env node
// npm run bench: a ladder of k6/full-login.js rates against a fresh production-like stack (the
// `npm start` runtime, scripts/stack.mjs: the built Workers in one workerd), then a report in
// docs/benchmarks/<date>.md with a latency chart (<date>.svg) and the raw numbers (<date>.json).
//
//   npm run bench                                  the default ladder 50,100,150,200,300,400 logins/s
//   LADDER=100,200 npm run bench                   other rates (RATES= is the same)
//   RATES=300 REPEAT=2 npm run bench               one rate, twice
//
// Each rung is one k6 run with its own setup (a new client and RATE x STEP_SECONDS x 1.2 seeded users,
// imported through POST /admin/v1/users/import): RAMP seconds from 0 to the rate, then HOLD seconds at
// it (STEP_SECONDS=25, RAMP=5, HOLD=STEP_SECONDS-RAMP). Every number in the report comes from the
// iterations that started in the hold (k6 PHASE_METRICS=1); dropped_iterations counts the whole run.
// CPU is read from /proc/<pid>/stat (workerd, k6) over the hold; memory is workerd's RSS, the most seen.
// The ladder stops after a rung with more than MAX_ERRORS (0.2) failed logins.
//
// Other knobs: WARMUP seconds at 10/s before the ladder, not reported (10; 0 skips), PAUSE seconds between
// rungs (5), OUT (docs/benchmarks), NOTE (a line for the report), KEEP_TMP=1 (keep k6 logs and summaries),
// IP_QUOTA per minute (1,000,000, the most POLICY allows), PORT (a free one).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { join, relative, resolve } from "node:path";
import { unstable_readConfig as readConfig } from "wrangler";
import {
  exitOf,
  FULL_LOGIN,
  installK6,
  K6_VERSION,
  REPO,
  raisedPolicy,
  spawnK6,
  startLoadStack,
} from "./lib/k6-stack.mjs";
import { CLK_TCK, cpuTicks, rssBytes, workerdPids } from "./lib/proc.mjs";

// ---------------------------------------------------------------------------------------------- settings

/** @param {string} name @param {number} fallback */
function numEnv(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got ${raw}`);
  return n;
}

const ladderText = process.env.LADDER || process.env.RATES || "50,100,150,200,300,400";
const ladder = ladderText.split(",").map((s) => {
  const n = Number(s.trim());
  if (!Number.isInteger(n) || n <= 0) throw new Error(`LADDER/RATES must be whole logins/s, got ${s}`);
  return n;
});
const repeat = Math.max(1, Math.floor(numEnv("REPEAT", 1)));
const stepSeconds = numEnv("STEP_SECONDS", 25);
const ramp = numEnv("RAMP", Math.min(5, Math.floor(stepSeconds / 5)));
const hold = numEnv("HOLD", stepSeconds - ramp);
if (hold <= 0) throw new Error("HOLD (STEP_SECONDS - RAMP) must be > 0");
const warmup = numEnv("WARMUP", 10);
const pause = numEnv("PAUSE", 5);
const maxErrors = numEnv("MAX_ERRORS", 0.2);
const ipQuota = numEnv("IP_QUOTA", 1_000_000);
const outDir = resolve(REPO, process.env.OUT || "docs/benchmarks");
const keepTmp = process.env.KEEP_TMP === "1";
const policy = raisedPolicy(ipQuota);
const STATS = "avg,min,med,p(90),p(95),p(99),max,count";

// ------------------------------------------------------------------------------------------------ /proc

/** Busy and total ticks of all CPUs (/proc/stat), for the machine's whole load. */
function systemTicks() {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: total - idle, total };
}

const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

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

/** @param {number} k6Pid */
function snapshot(k6Pid) {
  const pids = workerdPids();
  return {
    at: performance.now(),
    workerd: pids.reduce((sum, pid) => sum + (cpuTicks(pid) ?? 0), 0),
    workerdPids: pids,
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
  const workerd = (b.workerd - a.workerd) / CLK_TCK / seconds;
  const k6 = (b.k6 - a.k6) / CLK_TCK / seconds;
  const nodeUs = b.node.user + b.node.system - (a.node.user + a.node.system);
  const node = nodeUs / 1e6 / seconds;
  const sysTotal = b.system.total - a.system.total;
  const machine = sysTotal > 0 ? ((b.system.busy - a.system.busy) / sysTotal) * cpus().length : 0;
  const ours = new Set([process.pid, a.k6Pid, ...a.workerdPids, ...b.workerdPids]);
  const busiestOthers = [...b.all]
    .filter(([pid]) => !ours.has(pid))
    // a process that started within the window has spent all of its ticks in it
    .map(([pid, t]) => ({ pid, cores: (t - (a.all.get(pid) ?? 0)) / CLK_TCK / seconds }))
    .filter((p) => p.cores >= 0.05)
    .sort((p, q) => q.cores - p.cores)
    .slice(0, 3)
    .map((p) => ({ name: processName(p.pid), cores: p.cores }));
  return { seconds, workerd, k6, node, machine, other: Math.max(0, machine - workerd - k6 - node), busiestOthers };
}

// ------------------------------------------------------------------------------------------------ k6 runs

/**
 * @typedef {{ avg: number, min: number, med: number, "p(90)": number, "p(95)": number, "p(99)": number, max: number, count: number }} TrendStats
 */

const TRENDS = /** @type {const} */ ([
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
 * One k6 run of full-login.js at `rate`. CPU is sampled over the hold, which starts RAMP seconds after
 * setup logs its seeded users; RSS every half second while k6 runs.
 * @param {{ url: string, adminToken: string, tmp: string }} stack
 * @param {{ rate: number, ramp: number, hold: number, label: string, measure: boolean }} run
 */
async function runRung(stack, { rate, ramp, hold, label, measure }) {
  const summaryPath = join(stack.tmp, `${label}.summary.json`);
  const logPath = join(stack.tmp, `${label}.log`);
  const load = loadavg();
  const child = spawnK6(
    ["run", "--quiet", "--no-color", "--summary-export", summaryPath, "--summary-trend-stats", STATS, FULL_LOGIN],
    {
      BASE_URL: stack.url,
      ADMIN_TOKEN: stack.adminToken,
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
  const onData = (/** @type {Buffer} */ d) => {
    const text = d.toString();
    log += text;
    if (!seededAt && /msg="seeded \d+ users/.test(log)) {
      seededAt = performance.now();
      timers.push(setTimeout(() => (holdStart = snapshot(k6Pid)), ramp * 1000));
      timers.push(
        setTimeout(
          () => {
            if (!holdEnd) holdEnd = snapshot(k6Pid);
          },
          (ramp + hold) * 1000,
        ),
      );
    }
  };
  child.stdout?.on("data", onData);
  child.stderr?.on("data", onData);
  let workerdRss = 0;
  let k6Rss = 0;
  const sampler = setInterval(() => {
    workerdRss = Math.max(
      workerdRss,
      workerdPids().reduce((sum, pid) => sum + rssBytes(pid), 0),
    );
    k6Rss = Math.max(k6Rss, rssBytes(k6Pid));
  }, 500);
  current = child;
  const status = await exitOf(child);
  current = null;
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
    workerdRssMax: workerdRss,
    k6RssMax: k6Rss,
    failureSamples: failureSamples(log),
  };
}

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

// ------------------------------------------------------------------------------------------------ report

const fmtMs = (/** @type {number | undefined} */ v) =>
  v === undefined || !Number.isFinite(v) ? "–" : v >= 100 ? v.toFixed(0) : v.toFixed(1);
const pct = (/** @type {number} */ v) =>
  v === 0 ? "0 %" : v < 0.001 ? `${(v * 100).toFixed(3)} %` : `${(v * 100).toFixed(2)} %`;
const mib = (/** @type {number} */ b) => `${(b / 2 ** 20).toFixed(0)} MiB`;
const cores = (/** @type {number | undefined} */ v) => (v === undefined ? "–" : v.toFixed(2));

/** @typedef {NonNullable<Awaited<ReturnType<typeof runRung>>>} Rung */

/** @param {Rung} r */
const passes500 = (r) => (r.trends.full_flow?.["p(95)"] ?? Infinity) < 500 && r.errorRate < 0.001;
/** @param {Rung} r */
const passes100 = (r) => (r.trends.full_flow?.["p(95)"] ?? Infinity) < 100 && r.failedLogins === 0;

/** @param {Rung[]} rungs @param {number} rate @param {(r: Rung) => boolean} test @param {string} what */
function targetSentence(rungs, rate, test, what) {
  const at = rungs.filter((r) => r.rate === rate);
  if (!at.length) return `The ${rate}/s target (${what}) was not measured in this run.`;
  const met = at.every(test);
  const detail = at
    .map((r) => `full_flow p95 ${fmtMs(r.trends.full_flow?.["p(95)"])} ms, ${pct(r.errorRate)} errors`)
    .join("; ");
  return `The ${rate}/s target (${what}) was **${met ? "met" : "not met"}** (${detail}).`;
}

/** @param {Rung[]} rungs */
function verdict(rungs) {
  const passing = rungs.filter(passes500);
  const rates = [...new Set(rungs.map((r) => r.rate))];
  const best = Math.max(...rates.filter((rate) => rungs.filter((r) => r.rate === rate).every(passes500)), -Infinity);
  const first =
    best === -Infinity
      ? "No rate in this run kept full_flow p95 under 500 ms with under 0.1 % failed logins."
      : `The highest offered rate at which full_flow p95 stayed under 500 ms with under 0.1 % failed logins was **${best} logins/s**` +
        (passing.some((r) => r.rate === best && r.droppedIterations > 0)
          ? " (with dropped iterations, see the table)."
          : ".");
  return [
    first,
    targetSentence(rungs, 150, passes100, "p95 < 100 ms, zero errors"),
    targetSentence(rungs, 300, passes500, "p95 < 500 ms, < 0.1 % errors"),
  ].join(" ");
}

/** A hand-written SVG: full_flow p50/p95/p99 (log scale) against the offered rate, failed logins as bars. */
function chartSvg(/** @type {Rung[]} */ rungs, /** @type {string} */ title) {
  const W = 760;
  const H = 440;
  const L = 70;
  const R = 70;
  const T = 50;
  const B = 60;
  const pw = W - L - R;
  const ph = H - T - B;
  const rates = [...new Set(rungs.map((r) => r.rate))].sort((a, b) => a - b);
  const xMax = Math.max(...rates) * 1.08;
  const x = (/** @type {number} */ v) => L + (v / xMax) * pw;
  const values = rungs.flatMap((r) =>
    ["med", "p(95)", "p(99)"].map((k) => r.trends.full_flow?.[/** @type {"med"} */ (k)] ?? NaN),
  );
  const finite = values.filter((v) => Number.isFinite(v) && v > 0);
  const ticks = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000];
  const lo = ticks.filter((t) => t <= Math.min(...finite, 100)).pop() ?? 1;
  const hi = ticks.find((t) => t >= Math.max(...finite) * 1.2 && t >= 1000) ?? 50000;
  const y = (/** @type {number} */ v) =>
    T + ph - ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * ph;
  const worst = Math.max(...rungs.map((r) => r.errorRate * 100));
  const errMax = [1, 2, 5, 10, 20, 40, 60, 80, 100].find((v) => v >= worst) ?? 100;
  const yErr = (/** @type {number} */ p) => T + ph - (p / errMax) * ph;
  const out = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(title)}</text>`,
  );
  // error bars first, behind the lines
  const bw = Math.max(6, Math.min(24, pw / (rates.length * 3)));
  for (const r of rungs) {
    const reps = rungs.filter((q) => q.rate === r.rate);
    const i = reps.indexOf(r);
    const cx = x(r.rate) + (i - (reps.length - 1) / 2) * (bw + 2);
    const h = T + ph - yErr(r.errorRate * 100);
    if (h > 0)
      out.push(
        `<rect x="${(cx - bw / 2).toFixed(1)}" y="${yErr(r.errorRate * 100).toFixed(1)}" width="${bw}" height="${h.toFixed(1)}" fill="#d62728" fill-opacity="0.18" stroke="#d62728" stroke-opacity="0.5"/>`,
      );
  }
  // grid and left axis
  for (const t of ticks.filter((t) => t >= lo && t <= hi)) {
    out.push(
      `<line x1="${L}" x2="${L + pw}" y1="${y(t).toFixed(1)}" y2="${y(t).toFixed(1)}" stroke="#e5e5e5"/>`,
      `<text x="${L - 8}" y="${(y(t) + 4).toFixed(1)}" text-anchor="end">${t >= 1000 ? `${t / 1000} s` : `${t}`}</text>`,
    );
  }
  for (const [ms, label] of /** @type {const} */ ([
    [100, "100 ms (150/s target)"],
    [500, "500 ms (300/s target)"],
  ])) {
    if (ms < lo || ms > hi) continue;
    out.push(
      `<line x1="${L}" x2="${L + pw}" y1="${y(ms).toFixed(1)}" y2="${y(ms).toFixed(1)}" stroke="#555" stroke-dasharray="6 4"/>`,
      `<text x="${L + pw - 4}" y="${(y(ms) - 5).toFixed(1)}" text-anchor="end" fill="#555">${label}</text>`,
    );
  }
  out.push(
    `<line x1="${L}" x2="${L}" y1="${T}" y2="${T + ph}" stroke="#000"/>`,
    `<line x1="${L}" x2="${L + pw}" y1="${T + ph}" y2="${T + ph}" stroke="#000"/>`,
    `<line x1="${L + pw}" x2="${L + pw}" y1="${T}" y2="${T + ph}" stroke="#d62728"/>`,
    `<text transform="translate(18 ${T + ph / 2}) rotate(-90)" text-anchor="middle">full_flow latency, ms (log scale)</text>`,
    `<text transform="translate(${W - 16} ${T + ph / 2}) rotate(90)" text-anchor="middle" fill="#d62728">failed logins, % (bars)</text>`,
    `<text x="${L + pw / 2}" y="${H - 18}" text-anchor="middle">offered rate, logins/s</text>`,
  );
  for (const rate of rates)
    out.push(
      `<line x1="${x(rate).toFixed(1)}" x2="${x(rate).toFixed(1)}" y1="${T + ph}" y2="${T + ph + 5}" stroke="#000"/>`,
      `<text x="${x(rate).toFixed(1)}" y="${T + ph + 19}" text-anchor="middle">${rate}</text>`,
    );
  for (let i = 0; i <= 4; i++) {
    const p = (errMax * i) / 4;
    out.push(`<text x="${L + pw + 8}" y="${(yErr(p) + 4).toFixed(1)}" fill="#d62728">${Number(p.toFixed(2))}</text>`);
  }
  // lines through the mean of each rate's runs, a marker per run
  const series = /** @type {const} */ ([
    ["med", "p50", "#1f77b4"],
    ["p(95)", "p95", "#ff7f0e"],
    ["p(99)", "p99", "#9467bd"],
  ]);
  series.forEach(([key, name, color], si) => {
    const pts = rates
      .map((rate) => {
        const vs = rungs.filter((r) => r.rate === rate).map((r) => r.trends.full_flow?.[key] ?? NaN);
        const ok = vs.filter((v) => Number.isFinite(v) && v > 0);
        return ok.length ? [x(rate), y(ok.reduce((a, b) => a + b, 0) / ok.length)] : null;
      })
      .filter((p) => p !== null);
    if (pts.length > 1)
      out.push(
        `<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" ")}"/>`,
      );
    for (const r of rungs) {
      const v = r.trends.full_flow?.[key];
      if (v === undefined || !(v > 0)) continue;
      out.push(
        `<circle cx="${x(r.rate).toFixed(1)}" cy="${y(v).toFixed(1)}" r="4" fill="${color}" stroke="#fff"><title>${r.rate}/s ${name}: ${fmtMs(v)} ms</title></circle>`,
      );
    }
    const lx = L + 12 + si * 90;
    out.push(
      `<line x1="${lx}" x2="${lx + 22}" y1="${T + 12}" y2="${T + 12}" stroke="${color}" stroke-width="2"/>`,
      `<circle cx="${lx + 11}" cy="${T + 12}" r="4" fill="${color}"/>`,
      `<text x="${lx + 28}" y="${T + 16}">${name}</text>`,
    );
  });
  out.push(
    `<rect x="${L + 12 + 3 * 90}" y="${T + 6}" width="14" height="12" fill="#d62728" fill-opacity="0.18" stroke="#d62728" stroke-opacity="0.5"/>`,
    `<text x="${L + 12 + 3 * 90 + 20}" y="${T + 16}">failed logins %</text>`,
    "</svg>",
  );
  return `${out.join("\n")}\n`;
}

/** @param {string} date @param {number} runNo @param {string} commit */
function chartTitle(date, runNo, commit) {
  return `Keyway full login: full_flow latency vs rate (${date}, run ${runNo}, ${commit.slice(0, 7)})`;
}

/** @param {string} s */
function esc(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** @param {string} cmd @param {string[]} args */
function tryExec(cmd, args) {
  try {
    return execFileSync(cmd, args, { cwd: REPO, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return "";
  }
}

function machineInfo() {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  const model = /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1]?.trim() ?? cpus()[0]?.model ?? "unknown";
  return {
    nproc: Number(tryExec("nproc", [])) || cpus().length,
    model,
    memGiB: totalmem() / 2 ** 30,
    kernel: tryExec("uname", ["-sr"]),
  };
}

function gitInfo() {
  const commit = tryExec("git", ["rev-parse", "HEAD"]);
  const subject = tryExec("git", ["log", "-1", "--format=%s"]);
  const dirty = tryExec("git", ["diff", "--name-only", "HEAD"])
    .split("\n")
    .filter((f) => f && !f.startsWith(relative(REPO, outDir)));
  return { commit, subject, dirty };
}

/** SHARDS of the op-auth Worker (the same in each op-* config), unless vars override it. */
function shardSettings(/** @type {Record<string, string>} */ vars) {
  if (vars.SHARDS) return vars.SHARDS;
  const config = readConfig({ config: join(REPO, "workers/op-auth/wrangler.toml") });
  const shards = /** @type {Record<string, unknown> | undefined} */ (config.vars)?.SHARDS;
  return typeof shards === "string" ? shards : JSON.stringify(shards);
}

/**
 * @param {{ rungs: Rung[], runNo: number, startedAt: Date, finishedAt: Date, svgName: string,
 *   machine: ReturnType<typeof machineInfo>, git: ReturnType<typeof gitInfo>, shards: string, loadBefore: string,
 *   stopped: string | null }} r
 */
function runSection({ rungs, runNo, startedAt, finishedAt, svgName, machine, git, shards, loadBefore, stopped }) {
  const hhmm = (/** @type {Date} */ d) => d.toISOString().slice(11, 16);
  const lines = [];
  lines.push(
    `## Run ${runNo}: ${hhmm(startedAt)}–${hhmm(finishedAt)} UTC`,
    "",
    `- **Commit** \`${git.commit.slice(0, 12)}\` (${git.subject})` +
      (git.dirty.length
        ? `, with uncommitted changes to ${git.dirty.map((f) => `\`${f}\``).join(", ")}`
        : ", clean tree"),
    `- **Machine** ${machine.nproc} × ${machine.model}, ${machine.memGiB.toFixed(1)} GiB RAM, ${machine.kernel}; ` +
      `load average (1/5/15 min) before the run ${loadBefore}; the cores other processes kept busy during each hold are the table's *other CPU*`,
    `- **Runtime** the \`npm start\` runtime (scripts/stack.mjs: the built Workers in one workerd via Miniflare), fresh ` +
      `secrets and a fresh state folder; k6 ${K6_VERSION} on the same machine, \`k6/full-login.js\` with seeded users`,
    `- **Settings** SHARDS \`${shards}\`; POLICY \`${JSON.stringify(policy)}\` (per-IP quotas raised: all requests come from 127.0.0.1; client registrations cached per isolate); ` +
      `ID tokens ${process.env.ID_TOKEN_ALG || "RS256"} (k6 \`ID_TOKEN_ALG\`), access tokens RS256`,
    `- **Rungs** ${ramp} s ramp from 0, then ${hold} s hold at the rate (ramping-arrival-rate); latency, errors and achieved rate ` +
      `are from the iterations that started in the hold, CPU from /proc over the hold (cores: 1.00 = one core busy), ` +
      `RSS the most seen during the rung; dropped_iterations counts the whole rung` +
      (warmup > 0 ? `; a ${warmup} s warm-up at 10/s ran first` : ""),
  );
  if (process.env.NOTE) lines.push(`- **Note** ${process.env.NOTE}`);
  lines.push("", verdict(rungs), "");
  if (stopped) lines.push(`The ladder stopped early: ${stopped}.`, "");
  lines.push(`![full_flow latency against offered rate](${svgName})`, "");
  lines.push(
    "| offered /s | achieved /s | ok logins/s | dropped | failed logins | full_flow p50 | p95 | p99 | server req/s | workerd CPU | k6 CPU | other CPU | workerd RSS | load avg before |",
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
  );
  for (const r of rungs) {
    const f = r.trends.full_flow;
    lines.push(
      `| ${r.rate}${repeat > 1 ? ` (${r.label.split("-").pop()})` : ""} | ${r.achieved.toFixed(1)} | ${r.okPerSecond.toFixed(1)} | ${r.droppedIterations} | ` +
        `${pct(r.errorRate)} (${r.failedLogins}) | ${fmtMs(f?.med)} | ${fmtMs(f?.["p(95)"])} | ${fmtMs(f?.["p(99)"])} | ` +
        `${r.httpReqsPerSecond.toFixed(0)} | ${cores(r.cpu?.workerd)} | ${cores(r.cpu?.k6)} | ${cores(r.cpu?.other)} | ` +
        `${mib(r.workerdRssMax)} | ${r.loadavgBefore} |`,
    );
  }
  lines.push(
    "",
    "Latencies in ms. *achieved*: iterations started in the hold and finished, per second; *ok logins/s*: the successful ones. " +
      "*other CPU*: the whole machine's busy cores minus workerd, k6 and the bench's own node process (other processes on the machine).",
    "",
  );
  for (const r of rungs) {
    lines.push(
      `### ${r.rate} logins/s${repeat > 1 ? ` (${r.label.split("-").pop()})` : ""}`,
      "",
      "| metric | avg | p50 | p90 | p95 | p99 | max | count |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    );
    for (const [label] of TRENDS) {
      const t = r.trends[label];
      if (!t) {
        lines.push(`| ${label} | – | – | – | – | – | – | 0 |`);
        continue;
      }
      lines.push(
        `| ${label} | ${fmtMs(t.avg)} | ${fmtMs(t.med)} | ${fmtMs(t["p(90)"])} | ${fmtMs(t["p(95)"])} | ${fmtMs(t["p(99)"])} | ${fmtMs(t.max)} | ${t.count} |`,
      );
    }
    const errs = Object.entries(r.errors)
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${k} ${n}`);
    const statuses = Object.entries(r.statuses)
      .filter(([, n]) => n > 0)
      .map(([s, n]) => `${s === "0" ? "timeout/no response" : s} ×${n}`);
    const cpu = r.cpu
      ? `workerd ${cores(r.cpu.workerd)}, k6 ${cores(r.cpu.k6)}, bench node ${cores(r.cpu.node)}, machine ${cores(r.cpu.machine)} of ${cpus().length} cores` +
        (r.cpu.busiestOthers.length
          ? ` (busiest other processes: ${r.cpu.busiestOthers.map((p) => `${p.name} ${cores(p.cores)}`).join(", ")})`
          : "")
      : "not measured (k6 never reached the hold)";
    lines.push(
      "",
      `- CPU over the hold: ${cpu}; RSS max: workerd ${mib(r.workerdRssMax)}, k6 ${mib(r.k6RssMax)}; ` +
        `load average ${r.loadavgBefore} before, ${r.loadavgAfter} after; k6 exit ${r.k6Status}${r.k6Status === 99 ? " (a threshold failed)" : ""}`,
      `- Failures in the hold: ${errs.length ? errs.join(", ") : "none"}; HTTP statuses of note: ${statuses.length ? statuses.join(", ") : "none"}`,
    );
    for (const s of r.failureSamples) lines.push(`  - ×${s.n} \`${s.text.replace(/`/g, "'")}\``);
    lines.push("");
  }
  return lines.join("\n");
}

// ------------------------------------------------------------------------------------------------ main

// `node tools/bench.mjs --svg docs/benchmarks/<date>.json`: redraw a run's chart from its saved numbers.
if (process.argv[2] === "--svg") {
  const file = resolve(process.cwd(), process.argv[3] ?? "");
  const saved = JSON.parse(readFileSync(file, "utf8"));
  const svg = file.replace(/\.json$/, ".svg");
  writeFileSync(svg, chartSvg(saved.rungs, chartTitle(saved.date, saved.runNo, saved.git.commit)));
  console.log(`bench: redrew ${relative(process.cwd(), svg)}`);
  process.exit(0);
}

const installStatus = installK6();
if (installStatus !== 0) {
  console.error("bench: k6 is not installed and could not be built (npm run k6:install needs Go)");
  process.exit(installStatus);
}

const machine = machineInfo();
const startedAt = new Date();
const loadBefore = loadavg();
console.log(
  `bench: ladder ${ladder.join(", ")} logins/s${repeat > 1 ? ` ×${repeat}` : ""}, ${ramp} s ramp + ${hold} s hold each; ` +
    `load average ${loadBefore} on ${machine.nproc} cores`,
);
console.log("bench: bundling the Workers and starting the stack ...");
const stack = await startLoadStack({ policy, port: process.env.PORT ? Number(process.env.PORT) : undefined });
console.log(
  `bench: stack at ${stack.url}, workerd pid(s) ${workerdPids().join(", ") || "not found"}; temp ${stack.tmp}`,
);

let interrupted = false;
for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"]))
  process.on(signal, async () => {
    if (interrupted) return;
    interrupted = true;
    console.error(`bench: ${signal}; stopping k6 and the stack`);
    if (current?.pid && current.exitCode === null) current.kill("SIGTERM");
    await stack.dispose(keepTmp);
    process.exit(130);
  });

/** @type {Rung[]} */
const rungs = [];
/** @type {string | null} */
let stopped = null;
try {
  if (warmup > 0) {
    console.log(`bench: warm-up, ${warmup} s at 10/s`);
    await runRung(stack, { rate: 10, ramp: 0, hold: warmup, label: "warmup", measure: false });
  }
  rungLoop: for (const rate of ladder) {
    for (let rep = 1; rep <= repeat; rep++) {
      await new Promise((r) => setTimeout(r, pause * 1000));
      const label = `rate${rate}-${rep}`;
      process.stdout.write(`bench: ${rate} logins/s${repeat > 1 ? ` (run ${rep})` : ""} ... `);
      const r = /** @type {Rung} */ (await runRung(stack, { rate, ramp, hold, label, measure: true }));
      rungs.push(r);
      const f = r.trends.full_flow;
      console.log(
        `achieved ${r.achieved.toFixed(1)}/s, failed ${pct(r.errorRate)}, dropped ${r.droppedIterations}, ` +
          `full_flow p50/p95/p99 ${fmtMs(f?.med)}/${fmtMs(f?.["p(95)"])}/${fmtMs(f?.["p(99)"])} ms, ` +
          `CPU workerd ${cores(r.cpu?.workerd)} k6 ${cores(r.cpu?.k6)} other ${cores(r.cpu?.other)}, workerd RSS ${mib(r.workerdRssMax)}`,
      );
      if (r.errorRate > maxErrors) {
        stopped = `${pct(r.errorRate)} of the logins failed at ${rate}/s (more than ${pct(maxErrors)})`;
        console.log(`bench: stopping the ladder: ${stopped}`);
        break rungLoop;
      }
    }
  }
} finally {
  await stack.dispose(keepTmp);
  if (keepTmp) console.log(`bench: k6 logs and summaries kept in ${stack.tmp}`);
}

if (!rungs.length) {
  console.error("bench: no rung finished; no report written");
  process.exit(1);
}

const finishedAt = new Date();
const date = startedAt.toISOString().slice(0, 10);
mkdirSync(outDir, { recursive: true });
const mdPath = join(outDir, `${date}.md`);
const existing = existsSync(mdPath) ? readFileSync(mdPath, "utf8") : null;
const runNo = existing ? (existing.match(/^## Run \d+/gm)?.length ?? 0) + 1 : 1;
const base = runNo === 1 ? date : `${date}-${runNo}`;
const svgName = `${base}.svg`;
const git = gitInfo();
const shards = shardSettings(stack.vars);
writeFileSync(join(outDir, svgName), chartSvg(rungs, chartTitle(date, runNo, git.commit)));
const section = runSection({
  rungs,
  runNo,
  startedAt,
  finishedAt,
  svgName,
  machine,
  git,
  shards,
  loadBefore,
  stopped,
});
const header =
  `# Benchmarks ${date}\n\n` +
  "Written by `npm run bench` (tools/bench.mjs): a ladder of `k6/full-login.js` rates against the production-like local " +
  "runtime. Numbers are as measured; on a shared 2-core machine k6 and the server compete for the same cores.\n\n";
writeFileSync(mdPath, existing ? `${existing.trimEnd()}\n\n${section}` : `${header}${section}`);
writeFileSync(
  join(outDir, `${base}.json`),
  `${JSON.stringify(
    {
      date,
      runNo,
      startedAt,
      finishedAt,
      machine,
      git,
      shards,
      policy,
      ramp,
      hold,
      warmup,
      ladder,
      repeat,
      stopped,
      rungs,
    },
    null,
    2,
  )}\n`,
);
console.log(`bench: wrote ${relative(REPO, mdPath)}, ${relative(REPO, join(outDir, svgName))} and ${base}.json`);
console.log(verdict(rungs));
