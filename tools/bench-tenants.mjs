#!/usr/bin/env node
// npm run bench:tenants: Keyway at FusionAuth's tenant scale (issue 23), on the `npm start` runtime.
//
//   1. TENANTS tenants (default 5,000) created through POST /admin/v1/tenants, CONCURRENCY at a time;
//   2. USERS_PER_TENANT users (default 3,000) imported into each through
//      POST /admin/v1/tenants/{id}/users/import, 1,000 a call;
//   3. the admin API at that size: SAMPLES requests each of GET /admin/v1/tenants (a page of 100 after a
//      random id) and GET /admin/v1/tenants/{id}, one at a time, p50/p95/max;
//   4. the login at RATES (logins/s, HOLD seconds each): k6/full-login.js at the origin (the default
//      tenant, the single-tenant run) and spread over SPREAD of the tenants (TENANT_IDS), alternating,
//      in the same hour on the same stack: pass rate, full-login p95 and server CPU per login.
//
// Writes docs/benchmarks/<date>-tenants.md (and .json beside it); OUT=<dir> writes there instead.
//   TENANTS=500 USERS_PER_TENANT=3000 RATES=25,50 HOLD=30 npm run bench:tenants
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { loadavg, runRung } from "./lib/bench-ladder.mjs";
import { cpuMsPerLogin, fmtMs, gitInfo, machineInfo, pct } from "./lib/bench-report.mjs";
import { FULL_LOGIN, installedK6, installK6, K6_VERSION, REPO, raisedPolicy, startLoadStack } from "./lib/k6-stack.mjs";
import { workerdPids } from "./lib/proc.mjs";

const int = (name, fallback) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v < 0) throw new Error(`${name} must be a whole number`);
  return v;
};
const TENANTS = int("TENANTS", 5000);
const USERS_PER_TENANT = int("USERS_PER_TENANT", 3000);
const CONCURRENCY = Math.max(1, int("CONCURRENCY", 4));
const SAMPLES = int("SAMPLES", 300);
const SPREAD = Math.max(1, Math.min(TENANTS, int("SPREAD", 100)));
const HOLD = int("HOLD", 30);
const RAMP = int("RAMP", 10);
const RATES = (process.env.RATES ?? "25,50")
  .split(",")
  .map(Number)
  .filter((n) => n > 0);
const day = new Date().toISOString().slice(0, 10);
const outDir = resolve(process.env.OUT ?? join(REPO, "docs", "benchmarks"));

if (installedK6() !== K6_VERSION && installK6() !== 0) process.exit(1);

const started = new Date();
console.log(`bench:tenants: starting the stack (npm start runtime) ...`);
const stack = await startLoadStack({ policy: raisedPolicy() });
const auth = { Authorization: `Bearer ${stack.adminToken}`, "Content-Type": "application/json" };

/** Runs `work(i)` for i in [0, n), `CONCURRENCY` at a time; logs progress every `every`. */
async function pool(n, work, label, every) {
  let next = 0;
  let done = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (;;) {
        const i = next++;
        if (i >= n) return;
        await work(i);
        if (++done % every === 0)
          console.log(`  ${label}: ${done}/${n} (${((done / (performance.now() - t0)) * 1000).toFixed(1)}/s)`);
      }
    }),
  );
  return (performance.now() - t0) / 1000;
}

async function must(res, what) {
  if (!res.ok) throw new Error(`${what}: ${res.status} ${await res.text()}`);
  return res;
}

const id = (i) => `bt-${String(i).padStart(5, "0")}`;
const report = { started: started.toISOString(), machine: machineInfo(), git: gitInfo(outDir), settings: {} };
report.settings = { TENANTS, USERS_PER_TENANT, CONCURRENCY, SAMPLES, SPREAD, RATES, HOLD, RAMP };

try {
  console.log(`bench:tenants: creating ${TENANTS} tenants, ${CONCURRENCY} at a time`);
  const createSeconds = await pool(
    TENANTS,
    async (i) => {
      await must(
        await fetch(`${stack.url}/admin/v1/tenants`, {
          method: "POST",
          headers: auth,
          body: JSON.stringify({ id: id(i), name: `Bench tenant ${i}` }),
        }),
        `create ${id(i)}`,
      );
    },
    "tenants",
    500,
  );

  const calls = Math.ceil(USERS_PER_TENANT / 1000);
  console.log(`bench:tenants: importing ${USERS_PER_TENANT} users into each (${TENANTS * calls} calls)`);
  const importSeconds = await pool(
    TENANTS * calls,
    async (k) => {
      const t = Math.floor(k / calls);
      const from = (k % calls) * 1000;
      const users = Array.from({ length: Math.min(1000, USERS_PER_TENANT - from) }, (_, j) => ({
        email: `user${from + j}@t${t}.bench.test`,
      }));
      await must(
        await fetch(`${stack.url}/admin/v1/tenants/${id(t)}/users/import`, {
          method: "POST",
          headers: auth,
          body: JSON.stringify({ users }),
        }),
        `import into ${id(t)}`,
      );
    },
    "imports",
    Math.max(1, Math.floor((TENANTS * calls) / 20)),
  );
  report.load = {
    tenantsPerSecond: TENANTS / createSeconds,
    createSeconds,
    usersPerSecond: (TENANTS * USERS_PER_TENANT) / importSeconds,
    importSeconds,
  };

  console.log(`bench:tenants: admin API latency at this size (${SAMPLES} of each, one at a time)`);
  const timed = async (url) => {
    const t0 = performance.now();
    await must(await fetch(url, { headers: auth }), url);
    return performance.now() - t0;
  };
  const summary = (ms) => {
    const s = [...ms].sort((a, b) => a - b);
    const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? 0;
    return { p50: q(0.5), p95: q(0.95), max: s.at(-1) ?? 0, n: s.length };
  };
  const list = [];
  const read = [];
  for (let k = 0; k < SAMPLES; k++) {
    const r = Math.floor(Math.random() * TENANTS);
    list.push(await timed(`${stack.url}/admin/v1/tenants?limit=100&after=${id(r)}`));
    read.push(await timed(`${stack.url}/admin/v1/tenants/${id(r)}`));
  }
  report.admin = { list: summary(list), read: summary(read) };
  console.log(`  list p95 ${report.admin.list.p95.toFixed(1)} ms, read p95 ${report.admin.read.p95.toFixed(1)} ms`);

  // The login: the same stack, the default tenant against SPREAD tenants evenly apart, alternating.
  const spread = Array.from({ length: SPREAD }, (_, k) => id(Math.floor((k * TENANTS) / SPREAD))).join(",");
  const target = (env, name) => ({
    name,
    url: stack.url,
    adminToken: stack.adminToken,
    tmp: stack.tmp,
    script: FULL_LOGIN,
    env,
    pids: workerdPids,
    stats: async () => {
      const res = await fetch(`${stack.url}/admin/v1/stats`, { headers: auth });
      return res.ok ? (await res.json()).totals : null;
    },
  });
  // k6 inherits this process's environment: TENANTS here is the bench's count, never k6's.
  const single = target({ USERS: "seeded", TENANTS: "0", TENANT_IDS: "" }, "single tenant (default)");
  const spreadTarget = target({ USERS: "seeded", TENANTS: "0", TENANT_IDS: spread }, `${SPREAD} of ${TENANTS} tenants`);
  report.rungs = [];
  for (const rate of RATES)
    for (const [t, label] of [
      [single, `single-${rate}`],
      [spreadTarget, `spread-${rate}`],
    ]) {
      console.log(`bench:tenants: ${t.name} at ${rate}/s (load ${loadavg()})`);
      const r = await runRung(t, { rate, ramp: RAMP, hold: HOLD, label, measure: true });
      if (!r) continue;
      report.rungs.push({ target: t.name, ...r });
      console.log(
        `  ${r.okPerSecond.toFixed(1)} ok/s, failed ${pct(r.errorRate)}, p95 ${fmtMs(r.trends.full_flow?.["p(95)"])}, ${cpuMsPerLogin(r)} ms CPU/login`,
      );
    }
} finally {
  await stack.dispose();
}
report.finished = new Date().toISOString();

mkdirSync(outDir, { recursive: true });
const base = join(outDir, `${day}-tenants`);
writeFileSync(`${base}.json`, `${JSON.stringify(report, null, 2)}\n`);
const lines = [
  `# Tenants at scale, ${day}`,
  "",
  `\`npm run bench:tenants\` (tools/bench-tenants.mjs) on the \`npm start\` runtime, one workerd, local D1 and Durable Objects.`,
  `Machine: ${report.machine.nproc} cores (${report.machine.model}), ${report.machine.memGiB.toFixed(0)} GiB; commit ${report.git.commit.slice(0, 10)}.`,
  `Run from ${report.started} to ${report.finished}. Settings: ${JSON.stringify(report.settings)}.`,
  "",
  "## Loading",
  "",
  "| what | count | seconds | rate |",
  "| --- | ---: | ---: | ---: |",
  `| tenants created (each with its RS256 and ES256 keys) | ${TENANTS} | ${report.load.createSeconds.toFixed(0)} | ${report.load.tenantsPerSecond.toFixed(1)}/s |`,
  `| users imported (1,000 a call) | ${TENANTS * USERS_PER_TENANT} | ${report.load.importSeconds.toFixed(0)} | ${report.load.usersPerSecond.toFixed(0)}/s |`,
  "",
  `## Admin API at ${TENANTS} tenants (${SAMPLES} requests each, one at a time)`,
  "",
  "| request | p50 | p95 | max |",
  "| --- | ---: | ---: | ---: |",
  `| GET /admin/v1/tenants?limit=100&after=<random> | ${report.admin.list.p50.toFixed(1)} ms | ${report.admin.list.p95.toFixed(1)} ms | ${report.admin.list.max.toFixed(1)} ms |`,
  `| GET /admin/v1/tenants/{random} | ${report.admin.read.p50.toFixed(1)} ms | ${report.admin.read.p95.toFixed(1)} ms | ${report.admin.read.max.toFixed(1)} ms |`,
  "",
  "## The login, single tenant against a spread of tenants (same stack, same hour, alternating)",
  "",
  "| target | rate | ok/s | failed | full-login p95 | server cores | CPU ms/login | DO calls/login | D1 queries/login |",
  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ...report.rungs.map(
    (r) =>
      `| ${r.target} | ${r.rate}/s | ${r.okPerSecond.toFixed(1)} | ${pct(r.errorRate)} | ${fmtMs(r.trends.full_flow?.["p(95)"])} | ${r.cpu ? r.cpu.server.toFixed(2) : "–"} | ${cpuMsPerLogin(r)} | ${r.perLogin ? r.perLogin.durableObjectCalls.toFixed(2) : "–"} | ${r.perLogin ? r.perLogin.d1Queries.toFixed(2) : "–"} |`,
  ),
  "",
];
writeFileSync(`${base}.md`, lines.join("\n"));
console.log(`bench:tenants: wrote ${base}.md`);
