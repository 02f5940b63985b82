#!/usr/bin/env node
// npm run overload: how Keyway refuses work past its capacity (issue 44 item 3), measured from outside
// with k6/overload.js (ramping-arrival-rate of the five-step login, a discovery probe beside it)
// against a fresh `npm start` runtime (tools/lib/k6-stack.mjs: the built Workers in one workerd, behind
// the front door's, which refuses new logins past the bound; workerd's cores count both processes).
//
//   npm run overload                      SUSTAINED (30) logins/s, then FACTOR (3.5) times that, REPEAT (2) times
//   SUSTAINED=60 npm run overload         another sustained rate (what this machine passes; see docs/performance.md)
//   BASELINE=/path/to/checkout npm run overload
//                                         another checkout too (e.g. main before a change), the targets
//                                         alternating, each on its own stack, all loaded by this k6 script
//   HOG=0.6 RATE=50 npm run overload      the modest-load check instead: RATE logins/s without, then with,
//                                         a process beside that keeps HOG of a core busy (a spin loop,
//                                         HOG of every 10 ms); what matters is how many logins were refused
//
//   STATE=tmpfs npm run overload          this checkout's state on a tmpfs instead of the disk
//
// Each rung is one k6 run: RAMP (5) seconds from 0 to the rate, HOLD (30) seconds at it, PAUSE (5)
// seconds apart, after WARMUP (10) seconds at 10/s on each stack; every figure counts the whole run. Reported per rung: logins offered and completed
// per second; refusals (503 or 429, each with Retry-After, or counted as without) of new logins and of
// logins under way; other failures (5xx, timeouts); how long refusals took (p50, p99, max); how long
// admitted logins took (full_flow, the five steps of a successful login, p50 and p99); discovery's
// p99 meanwhile; workerd's CPU in cores. The table goes to stdout and, with OUT=<file>, to that file
// with the raw k6 summaries beside it (<file>.json). KEEP_TMP=1 keeps k6's logs.
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { baselineTarget, keywayTarget } from "./lib/bench-targets.mjs";
import { exitOf, installK6, K6_PATH, REPO, raisedPolicy, spawnK6 } from "./lib/k6-stack.mjs";
import { numEnv } from "./lib/num-env.mjs";
import { CLK_TCK, cpuTicks, workerdPids } from "./lib/proc.mjs";

const hog = numEnv("HOG", 0);
const sustained = numEnv("SUSTAINED", 30);
const factor = numEnv("FACTOR", 3.5);
const hogRate = numEnv("RATE", 50);
const ramp = numEnv("RAMP", 5);
const hold = numEnv("HOLD", 30);
const pause = numEnv("PAUSE", 5);
const warmup = numEnv("WARMUP", 10);
const repeat = Math.max(1, Math.floor(numEnv("REPEAT", 2)));
const baselineDir = process.env.BASELINE || "";
const out = process.env.OUT || "";
const keepTmp = process.env.KEEP_TMP === "1";
if (hog > 0.95) throw new Error("HOG is a fraction of one core, at most 0.95");
const SCRIPT = join(REPO, "k6", "overload.js");

/** @type {{ label: string, rate: number, hog: number, ramp?: number, hold?: number }[]} */
const rungs =
  hog > 0
    ? [
        { label: `${hogRate}/s`, rate: hogRate, hog: 0 },
        { label: `${hogRate}/s, hog ${hog}`, rate: hogRate, hog },
      ]
    : [
        { label: `${sustained}/s (sustained)`, rate: sustained, hog: 0 },
        { label: `${Math.round(sustained * factor)}/s (${factor}×)`, rate: Math.round(sustained * factor), hog: 0 },
      ];

/** A process that keeps `share` of a core busy: a spin of share × 10 ms in every 10 ms. @param {number} share */
function startHog(share) {
  const src = `const busy=${share * 10};const tick=()=>{const t=performance.now();while(performance.now()-t<busy);setTimeout(tick,${(1 - share) * 10});};tick();`;
  return spawn(process.execPath, ["-e", src], { stdio: "ignore" });
}

/** The k6 summary's figure, or null. @param {Record<string, any>} m @param {string} name @param {string} stat */
const fig = (m, name, stat) => (m[name] && m[name][stat] !== undefined ? Number(m[name][stat]) : null);

/**
 * One k6 run of k6/overload.js against `target` at `rung.rate`, a hog beside it when `rung.hog`.
 * @param {import("./lib/bench-targets.mjs").Target} target @param {typeof rungs[number]} rung @param {string} tag
 */
async function runRung(target, rung, tag) {
  const summaryPath = join(target.tmp, `${tag}.summary.json`);
  const hogChild = rung.hog > 0 ? startHog(rung.hog) : null;
  const before = { at: performance.now(), server: serverTicks(), hog: hogChild ? cpuTicks(hogChild.pid ?? 0) : 0 };
  const child = spawnK6(
    ["run", "--quiet", "--no-color", "--summary-export", summaryPath, SCRIPT],
    {
      BASE_URL: target.url,
      ADMIN_TOKEN: target.adminToken,
      RATE: String(rung.rate),
      RAMP: String(rung.ramp ?? ramp),
      HOLD: String(rung.hold ?? hold),
      USERS: "seeded",
      LOG_FAILURES: "1",
    },
    ["ignore", "pipe", "pipe"],
  );
  let log = "";
  child.stdout?.on("data", (d) => {
    log += d;
  });
  child.stderr?.on("data", (d) => {
    log += d;
  });
  const status = await exitOf(child);
  const secs = (performance.now() - before.at) / 1000;
  const serverCores = (serverTicks() - before.server) / CLK_TCK / secs;
  const hogCores = hogChild ? ((cpuTicks(hogChild.pid ?? 0) ?? 0) - (before.hog ?? 0)) / CLK_TCK / secs : 0;
  hogChild?.kill();
  if (keepTmp) writeFileSync(join(target.tmp, `${tag}.log`), log);
  if ((status !== 0 && status !== 99) || !existsSync(summaryPath))
    throw new Error(`k6 exited with ${status} at ${rung.rate}/s; log:\n${log.slice(-4000)}`);
  /** @type {Record<string, any>} */
  const m = JSON.parse(readFileSync(summaryPath, "utf8")).metrics;
  const count = (/** @type {string} */ name) => Number(m[name]?.count ?? 0);
  // login_success counts every login, refused ones included (a refused AuthorizeInit is a failed login).
  const attempted = Number(m.login_success?.passes ?? 0) + Number(m.login_success?.fails ?? 0);
  return {
    target: target.name,
    rung: rung.label,
    rate: rung.rate,
    seconds: (rung.ramp ?? ramp) + (rung.hold ?? hold),
    attempted,
    completed: Number(m.login_success?.passes ?? 0),
    refusedNew: count("refused_new"),
    refusedUnderway: count("refused_underway"),
    answers503: count("answers_503"),
    answers429: count("answers_429"),
    answersOk: count("answers_ok"),
    failed: count("answers_failed"),
    noRetryAfter: count("refusals_without_retry_after"),
    dropped: count("dropped_iterations"),
    refused: count("refused_ms")
      ? { p50: fig(m, "refused_ms", "p(50)"), p99: fig(m, "refused_ms", "p(99)"), max: fig(m, "refused_ms", "max") }
      : { p50: null, p99: null, max: null },
    admitted: { p50: fig(m, "full_flow", "p(50)"), p99: fig(m, "full_flow", "p(99)") },
    retryAfter: count("refusal_retry_after_s")
      ? { p50: fig(m, "refusal_retry_after_s", "p(50)"), max: fig(m, "refusal_retry_after_s", "max") }
      : { p50: null, max: null },
    discoveryP99: fig(m, "probe_discovery", "p(99)"),
    serverCores,
    hogCores,
    metrics: m,
  };
}

/** workerd's CPU so far, every stack this process started, in ticks. */
function serverTicks() {
  return workerdPids().reduce((sum, pid) => sum + (cpuTicks(pid) ?? 0), 0);
}

const ms = (/** @type {number | null} */ v) =>
  v === null ? "–" : v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${v.toFixed(0)} ms`;
const pct = (/** @type {number} */ a, /** @type {number} */ b) => (b ? `${((100 * a) / b).toFixed(1)} %` : "–");

/** @param {Awaited<ReturnType<typeof runRung>>[]} rows */
function table(rows) {
  const head =
    "| target | run | rung | offered | completed/s | refused new (503/429) | refused under way | other failures | refused p50 / p99 / max | admitted full_flow p50 / p99 | discovery p99 | Retry-After p50 (max); missing | workerd cores | hog cores |";
  const lines = [head, `|${" --- |".repeat(14)}`];
  for (const r of rows)
    lines.push(
      `| ${r.target} | ${r.run} | ${r.rung} | ${r.attempted} | ${(r.completed / r.seconds).toFixed(1)} | ${r.refusedNew} (${pct(r.refusedNew, r.attempted)}; ${r.answers503}/${r.answers429}) | ${r.refusedUnderway} | ${r.failed} | ${ms(r.refused.p50)} / ${ms(r.refused.p99)} / ${ms(r.refused.max)} | ${ms(r.admitted.p50)} / ${ms(r.admitted.p99)} | ${ms(r.discoveryP99)} | ${r.retryAfter.p50 ?? "–"} (${r.retryAfter.max ?? "–"}); ${r.noRetryAfter} | ${r.serverCores.toFixed(2)} | ${r.hogCores.toFixed(2)} |`,
    );
  return lines.join("\n");
}

const sleep = (/** @type {number} */ s) => new Promise((r) => setTimeout(r, s * 1000));

if (!existsSync(K6_PATH) && installK6() !== 0) throw new Error(`no k6 at ${K6_PATH} (npm run k6:install)`);
// POLICY_EXTRA: JSON merged over the load policy (e.g. '{"max_inflight_requests":16}'), for this checkout only.
const policy = { ...raisedPolicy(), ...(process.env.POLICY_EXTRA ? JSON.parse(process.env.POLICY_EXTRA) : {}) };
/** @type {import("./lib/bench-targets.mjs").Target[]} */
const targets = [];
/** @type {Awaited<ReturnType<typeof runRung>>[]} */
const rows = [];
try {
  // STATE=tmpfs: this checkout's state on a tmpfs (no fsync on the runtime's thread), to tell the disk's
  // pauses from the rest.
  targets.push(await keywayTarget({ policy, inspect: false, stateInMemory: process.env.STATE === "tmpfs" }));
  if (baselineDir) targets.push(await baselineTarget(baselineDir, false));
  // Each stack warms up (JIT, caches, the first shards) at 10/s before anything is reported.
  if (warmup > 0)
    for (const target of targets)
      await runRung(target, { label: "warm-up", rate: 10, hog: 0, ramp: 1, hold: warmup }, "warmup");
  console.log(`• targets: ${targets.map((t) => `${t.name} at ${t.url}`).join(", ")}`);
  for (let run = 1; run <= repeat; run++) {
    // Alternate which target goes first, so neither always meets the machine as the other left it.
    const order = run % 2 === 1 ? targets : [...targets].reverse();
    for (const target of order)
      for (const rung of rungs) {
        console.log(`• run ${run}: ${target.name}, ${rung.label}`);
        const row = { run, ...(await runRung(target, rung, `run${run}-${rung.rate}-${rung.hog}`)) };
        rows.push(row);
        console.log(table([row]).split("\n").slice(2).join("\n"));
        await sleep(pause);
      }
  }
} finally {
  for (const t of targets) await t.dispose(keepTmp);
}
const report = `${table(rows)}\n`;
console.log(`\n${report}`);
if (out) {
  writeFileSync(out, report);
  writeFileSync(`${out}.json`, `${JSON.stringify(rows, null, 2)}\n`);
}
