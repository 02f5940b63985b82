#!/usr/bin/env node
// npm run bench: a ladder of login rates (k6, ramping-arrival-rate) against a fresh production-like
// Keyway (the `npm start` runtime: the built Workers in one workerd), and optionally against other
// targets in the same run, one after another, each alone on the machine; then a report in
// docs/benchmarks/<date>.md with a latency chart per target (.svg) and the raw numbers (.json).
//
//   npm run bench                                  the default ladder 50,100,150,200,300,400 logins/s
//   LADDER=100,200 npm run bench                   other rates (RATES= is the same)
//   RATES=300 REPEAT=2 npm run bench               one rate, twice
//   PEER=oidc-provider npm run bench               node-oidc-provider over the same ladder, side by side
//   PEER=oidc-provider-redis npm run bench         the same, its models in a local redis-server (appendonly
//                                                  yes, appendfsync everysec), its CPU counted with the peer's
//   PEER=oidc-provider,oidc-provider-redis         both peers in one run
//   FLOOR=keyway,minimal npm run bench             the floor too (issue 28 item 3, tools/lib/floor-login.mjs):
//                                                  Workers that make a login's operations and nothing else,
//                                                  Keyway's set or the minimal one, shaped as `npm start`;
//                                                  keyway-shaped and minimal-shaped, production-shaped
//   BASELINE=/path/to/other/checkout npm run bench another checkout of Keyway (e.g. an older main) too
//   SHAPED=1 npm run bench                         Keyway again (and BASELINE), production-shaped (issue 28 item 4): no
//                                                  dev gateway hop, Rate Limiting in memory (scripts/stack.mjs
//                                                  `productionShaped`), state on a tmpfs (no disk flush at
//                                                  each SQLite commit), so the local runtime's own share shows
//   RESHARD=1 npm run bench                        instead, the long live reshard under load (admin API,
//                                                  then the controller): RESHARD_RATE (50), RESHARD_HOLD (300)
//   ENTITY_CLAIMS=1 DATASET=.keyway/dataset-10m npm run bench
//                                                  issue 24: each rung twice on one stack, without and
//                                                  with organization and entity claims in the tokens (each
//                                                  REPEAT swaps which goes first)
//                                                  (k6 ENTITY_CLAIMS=1), against a data set that
//                                                  `npm run bench:import` loaded (DATASET: its folder; none,
//                                                  an empty one); the report compares the two per rung
//
// Each rung is one k6 run with its own setup (for Keyway a new client and RATE x STEP_SECONDS x 1.2
// seeded users, imported through POST /admin/v1/users/import): RAMP seconds from 0 to the rate, then
// HOLD seconds at it (STEP_SECONDS=25, RAMP=5, HOLD=STEP_SECONDS-RAMP). Every number in the report comes
// from the iterations that started in the hold (k6 PHASE_METRICS=1); dropped_iterations counts the
// whole run. CPU is read from /proc/<pid>/stat (the server's processes, k6) over the hold; memory is the
// server's RSS, the most seen. A target's ladder stops after a rung with more than MAX_ERRORS (0.2)
// failed logins. For Keyway, `GET /admin/v1/stats` gives Durable Object calls, D1 queries and rows
// written per login.
//
// After its ladder, each Keyway (this checkout and BASELINE) runs one more rung at SPLIT_RATE (50; 0
// skips) with V8's profiler on every isolate a login reaches (tools/lib/isolate-cpu.mjs, a tick of
// SPLIT_TICK_US, 1000): the thread's CPU over the hold split into the Keyway Workers' isolates, the
// Durable Objects' isolate, local-only isolates (the dev gateway, Miniflare's Rate Limiting and D1) and
// the runtime's own work outside isolates (issue 28 item 4). The report applies the local-only share to
// the ladder's unprofiled CPU per login at that rate.
//
// Then each target whose k6 script reads the mailbox through k6/lib/mailbox.js (Keyway and the peer)
// runs pairs of rungs at MAILBOX_RATE (SPLIT_RATE; 0 skips), REPEAT pairs, each pair a plain login and
// one that reads the mailbox MAILBOX_EXTRA (4) more times (k6 MAILBOX_EXTRA_READS), in alternating
// order: the CPU the extra reads add, over their number, is what the test's own mailbox read costs
// that target, a read no production login makes (issue 28 item 4).
//
// Other knobs: WARMUP seconds at 10/s before each ladder, not reported (10; 0 skips), PAUSE seconds
// between rungs (5), OUT (docs/benchmarks), NOTE (a line for the report), KEEP_TMP=1 (keep k6 logs and
// summaries), IP_QUOTA per minute (1,000,000, the most POLICY allows), PORT (Keyway's; a free one).
// The ladder, the report and the chart live in tools/lib/bench-{ladder,report,chart}.mjs, the targets
// in tools/lib/bench-targets.mjs.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { chartSvg, chartTitle } from "./lib/bench-chart.mjs";
import { currentK6, loadavg, runRung } from "./lib/bench-ladder.mjs";
import {
  cores,
  fmtMs,
  gitInfo,
  machineInfo,
  mib,
  pct,
  runSection,
  serverMsPerLogin,
  verdict,
} from "./lib/bench-report.mjs";
import { runReshardBench } from "./lib/bench-reshard.mjs";
import { baselineTarget, keywayTarget, peerTarget } from "./lib/bench-targets.mjs";
import { floorTarget } from "./lib/floor-login.mjs";
import { byRole, openIsolateProfiler } from "./lib/isolate-cpu.mjs";
import { installK6, REPO, raisedPolicy } from "./lib/k6-stack.mjs";
import { numEnv } from "./lib/num-env.mjs";
import { threadClock } from "./lib/proc.mjs";

// ---------------------------------------------------------------------------------------------- settings

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
const splitRate = numEnv("SPLIT_RATE", 50);
const splitTickUs = numEnv("SPLIT_TICK_US", 1000);
const mailboxRate = numEnv("MAILBOX_RATE", splitRate);
const mailboxExtra = Math.max(1, Math.floor(numEnv("MAILBOX_EXTRA", 4)));
const ipQuota = numEnv("IP_QUOTA", 1_000_000);
const outDir = resolve(REPO, process.env.OUT || "docs/benchmarks");
const keepTmp = process.env.KEEP_TMP === "1";
const policy = raisedPolicy(ipQuota);
const peers = (process.env.PEER || "")
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);
for (const p of peers)
  if (p !== "oidc-provider" && p !== "oidc-provider-redis")
    throw new Error(`PEER must be oidc-provider, oidc-provider-redis or both (comma-separated), got ${p}`);
const FLOORS = ["keyway", "minimal", "keyway-shaped", "minimal-shaped"];
const floors = (process.env.FLOOR || "")
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);
for (const f of floors)
  if (!FLOORS.includes(f)) throw new Error(`FLOOR must be some of ${FLOORS.join(", ")} (comma-separated), got ${f}`);
const baselineDir = process.env.BASELINE || "";
const entityClaims = process.env.ENTITY_CLAIMS === "1";
const dataset = process.env.DATASET ? resolve(process.env.DATASET) : undefined;
if (entityClaims && (peers.length || floors.length || baselineDir || process.env.SHAPED === "1"))
  throw new Error("ENTITY_CLAIMS=1 compares Keyway with itself: no PEER, FLOOR, BASELINE or SHAPED");

/** @typedef {import("./lib/bench-ladder.mjs").Rung} Rung */
/** @typedef {import("./lib/bench-targets.mjs").Target} Target */

// `node tools/bench.mjs --svg docs/benchmarks/<date>.json`: redraw a run's charts from its saved numbers.
if (process.argv[2] === "--svg") {
  const file = resolve(process.cwd(), process.argv[3] ?? "");
  const saved = JSON.parse(readFileSync(file, "utf8"));
  const dir = file.replace(/[^/]+$/, "");
  for (const run of saved.runs) {
    writeFileSync(
      join(dir, run.svgName),
      chartSvg(run.rungs, chartTitle(saved.date, saved.runNo, saved.git.commit, run.target.name)),
    );
    console.log(`bench: redrew ${relative(process.cwd(), join(dir, run.svgName))}`);
  }
  process.exit(0);
}

const installStatus = installK6();
if (installStatus !== 0) {
  console.error("bench: k6 is not installed and could not be built (npm run k6:install needs Go)");
  process.exit(installStatus);
}

// RESHARD=1: the long live-reshard run instead of the ladder (tools/lib/bench-reshard.mjs).
if (process.env.RESHARD === "1") {
  const m = machineInfo();
  const g = gitInfo(outDir);
  const status = await runReshardBench({
    outDir,
    date: new Date().toISOString().slice(0, 10),
    commit: `${g.commit.slice(0, 7)}${g.dirty.length ? " (with uncommitted changes)" : ""}`,
    machine: `${m.nproc} cores (${m.model}), ${m.memGiB.toFixed(0)} GiB`,
  });
  process.exit(status);
}

const machine = machineInfo();
const startedAt = new Date();
const loadBefore = loadavg();
/** @type {{ name: string, start: () => Promise<Target> }[]} */
const plan = [
  {
    name: "Keyway",
    start: () =>
      keywayTarget({
        policy,
        port: process.env.PORT ? Number(process.env.PORT) : undefined,
        inspect: splitRate > 0,
        ...(dataset ? { dataset } : {}),
      }),
  },
];
if (process.env.SHAPED === "1")
  plan.push({
    name: "Keyway, production-shaped",
    start: () => keywayTarget({ policy, productionShaped: true, inspect: splitRate > 0 }),
  });
if (baselineDir) plan.push({ name: "baseline", start: () => baselineTarget(baselineDir, splitRate > 0) });
// With SHAPED=1 the baseline runs production-shaped too, so the two checkouts compare like for like.
if (baselineDir && process.env.SHAPED === "1")
  plan.push({
    name: "baseline, production-shaped",
    start: () => baselineTarget(baselineDir, splitRate > 0, true),
  });
for (const peer of peers)
  plan.push({
    name: peer === "oidc-provider-redis" ? "node-oidc-provider-redis" : "node-oidc-provider",
    start: () => peerTarget({ redis: peer === "oidc-provider-redis" }),
  });
for (const floor of floors)
  plan.push({
    name: `floor ${floor}`,
    start: () =>
      floorTarget({
        ops: floor.startsWith("minimal") ? "minimal" : "keyway",
        productionShaped: floor.endsWith("-shaped"),
      }),
  });
console.log(
  `bench: ${plan.map((p) => p.name).join(", ")}; ladder ${ladder.join(", ")} logins/s${repeat > 1 ? ` ×${repeat}` : ""}, ` +
    `${ramp} s ramp + ${hold} s hold each; load average ${loadBefore} on ${machine.nproc} cores`,
);

/** @type {Target | null} */
let live = null;
let interrupted = false;
for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"]))
  process.on(signal, async () => {
    if (interrupted) return;
    interrupted = true;
    console.error(`bench: ${signal}; stopping k6 and the target`);
    const k6 = currentK6();
    if (k6?.pid && k6.exitCode === null) k6.kill("SIGTERM");
    await live?.dispose(keepTmp);
    process.exit(130);
  });

/** @type {{ target: Target, rungs: Rung[], stopped: string | null, svgName: string, split?: Split | null }[]} */
const runs = [];
for (const step of plan) {
  console.log(`bench: starting ${step.name} ...`);
  const target = await step.start();
  live = target;
  console.log(
    `bench: ${target.name} at ${target.url} (pids ${target.pids().join(", ") || "not found"}); temp ${target.tmp}`,
  );
  /** @type {Rung[]} */
  const rungs = [];
  /** ENTITY_CLAIMS=1: the same rungs with entity claims, run right after each plain one. @type {Rung[]} */
  const claimRungs = [];
  const withClaims = { ...target, name: `${target.name}, entity claims`, env: { ...target.env, ENTITY_CLAIMS: "1" } };
  // The plain side's setup makes the same grants (k6 ENTITY_GRANTS): the two differ only in the login.
  const plain = entityClaims ? { ...target, env: { ...target.env, ENTITY_GRANTS: "1" } } : target;
  /** @type {string | null} */
  let stopped = null;
  /** @type {Split | null} */
  let split = null;
  /** @type {MailboxRead | null} */
  let mailbox = null;
  try {
    if (warmup > 0) {
      console.log(`bench: ${target.name} warm-up, ${warmup} s at 10/s`);
      await runRung(target, { rate: 10, ramp: 0, hold: warmup, label: "warmup", measure: false });
    }
    rungLoop: for (const rate of ladder) {
      for (let rep = 1; rep <= repeat; rep++) {
        await new Promise((r) => setTimeout(r, pause * 1000));
        const label = `rate${rate}-${rep}`;
        process.stdout.write(`bench: ${target.name} ${rate} logins/s${repeat > 1 ? ` (run ${rep})` : ""} ... `);
        // ENTITY_CLAIMS=1: each repeat swaps which of the pair goes first, so warm-up and order do not
        // count for one side only.
        const claimsFirst = entityClaims && rep % 2 === 0;
        /** @type {Rung | null} */
        let early = null;
        if (claimsFirst) {
          early = /** @type {Rung} */ (
            await runRung(withClaims, { rate, ramp, hold, label: `${label}-claims`, measure: true })
          );
          await new Promise((res) => setTimeout(res, pause * 1000));
        }
        const r = /** @type {Rung} */ (await runRung(plain, { rate, ramp, hold, label, measure: true }));
        rungs.push(r);
        if (entityClaims) {
          if (!claimsFirst) await new Promise((res) => setTimeout(res, pause * 1000));
          const c =
            early ??
            /** @type {Rung} */ (
              await runRung(withClaims, { rate, ramp, hold, label: `${label}-claims`, measure: true })
            );
          claimRungs.push(c);
          console.log(
            `\nbench: with entity claims: achieved ${c.achieved.toFixed(1)}/s, failed ${pct(c.errorRate)}, ` +
              `CPU server ${cores(c.cpu?.server)}` +
              (c.perLogin
                ? `; per login ${c.perLogin.durableObjectCalls.toFixed(2)} DO calls, ${c.perLogin.d1Queries.toFixed(2)} D1`
                : ""),
          );
          if (c.errorRate > maxErrors) {
            stopped = `${pct(c.errorRate)} of the logins with entity claims failed at ${rate}/s`;
            break rungLoop;
          }
        }
        const f = r.trends.full_flow;
        const pl = r.perLogin;
        console.log(
          `achieved ${r.achieved.toFixed(1)}/s, failed ${pct(r.errorRate)}, dropped ${r.droppedIterations}, ` +
            `full_flow p50/p95/p99 ${fmtMs(f?.med)}/${fmtMs(f?.["p(95)"])}/${fmtMs(f?.["p(99)"])} ms, ` +
            `CPU server ${cores(r.cpu?.server)} k6 ${cores(r.cpu?.k6)} other ${cores(r.cpu?.other)}, RSS ${mib(r.serverRssMax)}` +
            (pl
              ? `; per login ${pl.durableObjectCalls.toFixed(2)} DO calls, ${pl.d1Queries.toFixed(2)} D1, ${pl.rowsWritten.toFixed(1)} rows`
              : ""),
        );
        if (r.errorRate > maxErrors) {
          stopped = `${pct(r.errorRate)} of the logins failed at ${rate}/s (more than ${pct(maxErrors)})`;
          console.log(`bench: stopping ${target.name}'s ladder: ${stopped}`);
          break rungLoop;
        }
      }
    }
    // A ladder that stopped at a higher rate still passed these rates: only a failure at or below
    // one skips its rungs.
    const failedBy = (/** @type {number} */ rate) => rungs.some((r) => r.rate <= rate && r.errorRate > maxErrors);
    if (splitRate > 0 && target.inspectorPort && !entityClaims && !failedBy(splitRate)) {
      await new Promise((r) => setTimeout(r, pause * 1000));
      process.stdout.write(`bench: ${target.name} ${splitRate} logins/s, isolates profiled ... `);
      split = await profiledRung(target, splitRate, target.inspectorPort);
      const per = (/** @type {number} */ ms) => (ms / Math.max(1, split?.logins ?? 1)).toFixed(2);
      console.log(
        `thread ${per(split.threadMs)} ms/login: Workers ${per(split.roles.worker)}, Durable Objects ${per(split.roles["durable-object"])}, ` +
          `local-only ${per(split.roles["local-only"])}, outside isolates ${per(split.threadMs - split.inIsolates)}`,
      );
    }
    if (mailboxRate > 0 && target.extraReads && !entityClaims && !failedBy(mailboxRate)) {
      mailbox = await mailboxRungs(target, mailboxRate);
      console.log(
        `bench: ${target.name}: a mailbox read costs ${mailbox.perReadMs.toFixed(2)} ms of server CPU at ${mailboxRate}/s; ` +
          `a login ${mailbox.loginMs.toFixed(2)} ms with it, ${(mailbox.loginMs - mailbox.perReadMs).toFixed(2)} ms without`,
      );
    }
  } finally {
    await target.dispose(keepTmp);
    live = null;
    if (keepTmp) console.log(`bench: k6 logs and summaries kept in ${target.tmp}`);
  }
  runs.push({ target, rungs, stopped, svgName: "", split, mailbox });
  if (entityClaims) runs.push({ target: withClaims, rungs: claimRungs, stopped, svgName: "" });
}

if (!runs.some((r) => r.rungs.length)) {
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
const git = gitInfo(outDir);
for (const run of runs) {
  const slug = run.target.name === "Keyway" ? "" : `-${run.target.name.toLowerCase().replace(/[^a-z0-9]+/g, "-")}`;
  run.svgName = `${base}${slug}.svg`;
  writeFileSync(join(outDir, run.svgName), chartSvg(run.rungs, chartTitle(date, runNo, git.commit, run.target.name)));
}
const section = runSection({
  runs,
  runNo,
  startedAt,
  finishedAt,
  machine,
  git,
  loadBefore,
  settings: { ramp, hold, warmup, repeat },
});
const header =
  `# Benchmarks ${date}\n\n` +
  "Written by `npm run bench` (tools/bench.mjs): ladders of login rates against the production-like local " +
  "runtime, and any peer in the same run. Numbers are as measured; on a shared 2-core machine k6 and the server compete for the same cores.\n\n";
const comparison = entityClaims ? claimsComparison(runs[0]?.rungs ?? [], runs[1]?.rungs ?? []) : "";
writeFileSync(
  mdPath,
  existing ? `${existing.trimEnd()}\n\n${section}${comparison}` : `${header}${section}${comparison}`,
);
const plain = (/** @type {Target} */ t) => ({ name: t.name, description: t.description, policy: t.policy, url: t.url });
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
      ramp,
      hold,
      warmup,
      ladder,
      repeat,
      runs: runs.map((r) => ({ ...r, target: plain(r.target) })),
    },
    null,
    2,
  )}\n`,
);
console.log(`bench: wrote ${relative(REPO, mdPath)}, its charts and ${base}.json`);
for (const run of runs) console.log(`${run.target.name}: ${verdict(run.rungs)}`);

/**
 * ENTITY_CLAIMS=1: per rate, the logins that passed a second and the server's CPU per login, without
 * and with entity claims, and how far apart (issue 24 asks for at most 2 %).
 * @param {Rung[]} plain @param {Rung[]} claims
 */
function claimsComparison(plain, claims) {
  const cpuPerLogin = (/** @type {Rung} */ r) =>
    r.cpu?.server && r.achieved ? (r.cpu.server / (r.achieved * (1 - r.errorRate))) * 1000 : null;
  const passing = (/** @type {Rung} */ r) => r.achieved * (1 - r.errorRate);
  const diff = (/** @type {number | null} */ a, /** @type {number | null} */ b) =>
    a && b !== null ? `${(((b - a) / a) * 100).toFixed(1)} %` : "n/a";
  const rows = plain.map((p, i) => {
    const c = claims[i];
    if (!c) return "";
    const [pc, cc] = [cpuPerLogin(p), cpuPerLogin(c)];
    return `| ${p.rate} | ${passing(p).toFixed(1)} | ${passing(c).toFixed(1)} | ${diff(passing(p), passing(c))} | ${pc?.toFixed(2) ?? "n/a"} | ${cc?.toFixed(2) ?? "n/a"} | ${diff(pc, cc)} | ${c.extra?.entityClaimsPresent ?? "n/a"} |`;
  });
  return (
    "\n\n### Entity claims (issue 24)\n\n" +
    `Each rate twice on the same stack${dataset ? `, on the data set in \`${relative(REPO, dataset)}\`` : ""}, without and with organization and entity claims in every token (with REPEAT, each repeat swaps which runs first) (k6 \`ENTITY_CLAIMS=1\`: \`organization\` asked for, a template reading the organization's plan and the user's device grants). The plain side's setup makes the same organization, devices and grants (k6 \`ENTITY_GRANTS=1\`), so the two differ only in the login.\n\n` +
    "| rate (/s) | passing/s, plain | passing/s, claims | difference | server CPU ms/login, plain | claims | difference | ID tokens with org_id |\n" +
    "| --- | --- | --- | --- | --- | --- | --- | --- |\n" +
    `${rows.filter(Boolean).join("\n")}\n`
  );
}

/**
 * @typedef {{ rate: number, extra: number, pairs: { plainMs: number, extraMs: number }[], loginMs: number,
 *   perReadMs: number }} MailboxRead
 */

/**
 * What the test's mailbox read costs a target: REPEAT pairs of rungs at `rate`, a plain login and one
 * with MAILBOX_EXTRA more reads, in alternating order. Server CPU per finished login over the hold.
 * @param {Target} target @param {number} rate @returns {Promise<MailboxRead>}
 */
async function mailboxRungs(target, rate) {
  const withExtra = { ...target, env: { ...target.env, MAILBOX_EXTRA_READS: String(mailboxExtra) } };
  /** @type {{ plainMs: number, extraMs: number }[]} */
  const pairs = [];
  for (let rep = 1; rep <= repeat; rep++) {
    /** @type {Record<string, number>} */
    const ms = {};
    for (const side of rep % 2 ? ["plain", "extra"] : ["extra", "plain"]) {
      await new Promise((r) => setTimeout(r, pause * 1000));
      process.stdout.write(`bench: ${target.name} ${rate} logins/s, mailbox ${side} (pair ${rep}) ... `);
      const r = /** @type {Rung} */ (
        await runRung(side === "extra" ? withExtra : target, {
          rate,
          ramp,
          hold,
          label: `mailbox${rate}-${side}-${rep}`,
          measure: true,
        })
      );
      ms[side] = serverMsPerLogin(r) ?? Number.NaN;
      console.log(`${ms[side].toFixed(2)} ms/login, failed ${pct(r.errorRate)}`);
    }
    pairs.push({ plainMs: ms.plain ?? NaN, extraMs: ms.extra ?? NaN });
  }
  const mean = (/** @type {number[]} */ xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const loginMs = mean(pairs.map((p) => p.plainMs));
  return {
    rate,
    extra: mailboxExtra,
    pairs,
    loginMs,
    perReadMs: (mean(pairs.map((p) => p.extraMs)) - loginMs) / mailboxExtra,
  };
}

/**
 * @typedef {{ rate: number, logins: number, threadMs: number, inIsolates: number,
 *   roles: Record<"worker" | "durable-object" | "local-only", number>,
 *   isolates: { name: string, role: string, ms: number }[], tickUs: number, rung: Rung }} Split
 */

/**
 * One rung with every isolate a login reaches profiled over its hold: the CPU of workerd's isolate
 * thread split by isolate (tools/lib/isolate-cpu.mjs). Not part of the ladder: the profilers' ticks
 * add to the thread's work.
 * @param {Target} target @param {number} rate @param {number} inspectorPort @returns {Promise<Split>}
 */
async function profiledRung(target, rate, inspectorPort) {
  const profiler = await openIsolateProfiler(inspectorPort, splitTickUs);
  /** @type {{ done: Promise<{ isolates: import("./lib/isolate-cpu.mjs").IsolateCpu[], threadMs: number }> | null }} */
  const measured = { done: null };
  try {
    const rung = /** @type {Rung} */ (
      await runRung(target, {
        rate,
        ramp,
        hold,
        label: `split${rate}`,
        measure: true,
        atHold: () => {
          const started = profiler.start();
          const threads = threadClock(target.pids());
          return () => {
            const threadMs = threads()[0]?.ms ?? 0;
            measured.done = started.then(() => profiler.stop()).then((isolates) => ({ isolates, threadMs }));
          };
        },
      })
    );
    if (!measured.done) throw new Error("the profiled rung never reached its hold");
    const { isolates, threadMs } = await measured.done;
    const roles = byRole(isolates);
    return {
      rate,
      logins: rung.logins,
      threadMs,
      inIsolates: roles.worker + roles["durable-object"] + roles["local-only"],
      roles,
      isolates: isolates.filter((i) => i.samples > 0).map(({ name, role, ms }) => ({ name, role, ms })),
      tickUs: isolates[0]?.tickUs ?? 0,
      rung,
    };
  } finally {
    profiler.close();
  }
}
