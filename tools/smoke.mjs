#!/usr/bin/env node
// npm run smoke (the last part of npm test): about 20 s of k6/full-login.js at 5 logins/s against a
// freshly started stack (scripts/stack.mjs, the `npm start` runtime) on a free port, with fresh secrets,
// a temporary state folder, raised per-IP quotas and three regions, logins coming from Japan, Germany
// and the US in turn (each region must get some), spread over three tenants (TENANTS). Exits with
// k6's status: non-zero when a threshold (full_flow p95 < P95_MS, default 1000 ms, generous for CI
// noise; login_success > 0.99) fails. Then a live reshard run (k6/reshard.js), a short run on the
// production-shaped stack (scripts/stack.mjs `productionShaped`), and shorter ones on the bench's floor.
//
// k6 is built by tools/k6-install.mjs when missing, which needs Go. Without Go the smoke is skipped
// with a warning, unless CI is set (.ci/run sets it): CI never skips.
//   npm run smoke [-- extra k6 args]      RATE, RAMP, HOLD, P95_MS, SUCCESS_RATE override the defaults

import { floorTarget } from "./lib/floor-login.mjs";
import {
  exitOf,
  FULL_LOGIN,
  findGo,
  installedK6,
  installK6,
  K6_VERSION,
  RESHARD,
  raisedPolicy,
  spawnK6,
  startLoadStack,
  tmpfsDir,
} from "./lib/k6-stack.mjs";

const inCI = !!process.env.CI && process.env.CI !== "0" && process.env.CI !== "false";

if (installedK6() !== K6_VERSION) {
  if (!findGo()) {
    const msg = `no k6 ${K6_VERSION} in .keyway/bin and no Go toolchain to build it (set GO=/path/to/go, or install Go >= 1.24)`;
    if (inCI) {
      console.error(`smoke: ${msg}; CI never skips the k6 smoke`);
      process.exit(1);
    }
    const bar = "!".repeat(100);
    console.warn(`\n${bar}\n!!  smoke: SKIPPED: ${msg}.\n!!  The k6 load smoke did NOT run; CI runs it.\n${bar}\n`);
    process.exit(0);
  }
  const status = installK6();
  if (status !== 0) process.exit(status);
}

const settings = {
  RATE: process.env.RATE || "5",
  RAMP: process.env.RAMP || "5",
  HOLD: process.env.HOLD || "15",
  P95_MS: process.env.P95_MS || "1000",
  SUCCESS_RATE: process.env.SUCCESS_RATE || "0.99",
};

const started = Date.now();
console.log("smoke: bundling the Workers and starting the stack ...");
// A short live-shard cache and issue margin, so the reshard run's new generations are issued into
// 3 s after it appends them (a deployment waits the cache plus a minute: one machine has no clock skew).
// Three regions (issue 12): the default, apac by hint, and eu by jurisdiction for EEA countries; the k6
// logins say they come from Japan, Germany and the US in turn (the dev gateway's X-Keyway-Dev-Country).
const SMOKE_REGIONS = {
  regions: { global: {}, apac: { hint: "apac" }, eu: { jurisdiction: "eu" } },
  default: "global",
  continents: { AS: "apac", OC: "apac" },
  countries: { JP: "apac" },
  residency: { region: "eu", countries: ["EEA"] },
};
// The shard controller is on, with a ceiling this run's few calls a second exceed: during the reshard
// run, its cron (fired every 10 s, a compressed clock) grows the stores after the admin API did.
const CONTROLLER_POLICY = {
  enabled: true,
  ceiling_per_shard: 0.05,
  floor_per_shard: 0,
  runs: 1,
  min_interval_minutes: 1,
  max_shards: 16,
};
const stack = await startLoadStack({
  policy: {
    ...raisedPolicy(),
    shard_config_cache_seconds: 1,
    shard_issue_margin_seconds: 2,
    shard_controller: CONTROLLER_POLICY,
  },
  vars: { REGIONS: JSON.stringify(SMOKE_REGIONS) },
});
console.log(`smoke: stack at ${stack.url} in ${((Date.now() - started) / 1000).toFixed(1)} s`);

/** @type {import("node:child_process").ChildProcess | null} */
let k6 = null;
let stopping = false;
for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"]))
  process.on(signal, async () => {
    if (stopping) return;
    stopping = true;
    if (k6?.pid && k6.exitCode === null) k6.kill("SIGTERM");
    await stack.dispose();
    process.exit(130);
  });

let status = 1;
try {
  console.log(
    `smoke: ${settings.RATE} logins/s (ramp ${settings.RAMP} s, hold ${settings.HOLD} s), ` +
      `thresholds full_flow p(95) < ${settings.P95_MS} ms, login_success > ${settings.SUCCESS_RATE}`,
  );
  k6 = spawnK6(["run", "--quiet", ...process.argv.slice(2), FULL_LOGIN], {
    ...settings,
    BASE_URL: stack.url,
    ADMIN_TOKEN: stack.adminToken,
    USERS: "seeded",
    COUNTRIES: "JP,DE,US",
    EXPECT_REGIONS: "apac,eu,global",
    // Logins spread over three tenants (issue 23), each with its own issuer, keys and users.
    TENANTS: process.env.TENANTS || "3",
  });
  status = await exitOf(k6);
  // Then every store's shard count doubled in the middle of a run (k6/reshard.js, issue 13): no login
  // may fail across the change. SMOKE_RESHARD=0 skips it.
  if (status === 0 && process.env.SMOKE_RESHARD !== "0" && !stopping) {
    console.log(
      "smoke: reshard run: 5 logins/s for 65 s; every store's shards doubled by the admin API at 1 s, then by the controller (its cron fired every 10 s)",
    );
    const cron = setInterval(() => void stack.fireCron("*/5 * * * *"), 10_000);
    k6 = spawnK6(["run", "--quiet", RESHARD], {
      RATE: "5",
      RAMP: "5",
      HOLD: "60",
      BASE_URL: stack.url,
      ADMIN_TOKEN: stack.adminToken,
      USERS: "seeded",
      COUNTRIES: "JP,DE,US",
      CONTROLLER: "1",
    });
    status = await exitOf(k6);
    clearInterval(cron);
  }
} finally {
  await stack.dispose();
}
// Last, the production-shaped stack `SHAPED=1 npm run bench` measures with (issue 28 item 4): each login
// request straight to op-auth's or op-token's own port, Rate Limiting in memory, the state on a tmpfs
// where the machine has one. SMOKE_SHAPED=0 skips it.
if (status === 0 && process.env.SMOKE_SHAPED !== "0" && !stopping) {
  const inMemory = tmpfsDir() !== null;
  const shaped = await startLoadStack({ productionShaped: true, stateInMemory: inMemory });
  try {
    console.log(
      `smoke: production-shaped run: 5 logins/s for 10 s, no dev gateway hop, Rate Limiting in memory, state ${inMemory ? "on a tmpfs" : "on disk (no writable tmpfs)"}`,
    );
    k6 = spawnK6(["run", "--quiet", FULL_LOGIN], {
      ...settings,
      RAMP: "2",
      HOLD: "8",
      BASE_URL: shaped.url,
      AUTH_URL: /** @type {string} */ (shaped.workerUrls["op-auth"]),
      TOKEN_URL: /** @type {string} */ (shaped.workerUrls["op-token"]),
      ADMIN_TOKEN: shaped.adminToken,
      USERS: "seeded",
    });
    status = await exitOf(k6);
  } finally {
    await shaped.dispose();
  }
}
// And the floor `FLOOR= npm run bench` measures against (issue 28 item 3, tools/lib/floor-login.mjs), in
// both shapes, briefly, so the bench's yardstick cannot rot unnoticed. SMOKE_FLOOR=0 skips it.
if (status === 0 && process.env.SMOKE_FLOOR !== "0" && !stopping) {
  for (const productionShaped of tmpfsDir() !== null ? [false, true] : [false]) {
    const floor = await floorTarget({ ops: "keyway", productionShaped });
    try {
      console.log(`smoke: ${floor.name}: 5 logins/s for 5 s`);
      k6 = spawnK6(["run", "--quiet", floor.script], {
        ...settings,
        ...floor.env,
        RAMP: "1",
        HOLD: "4",
        BASE_URL: floor.url,
      });
      status = await exitOf(k6);
    } finally {
      await floor.dispose();
    }
    if (status !== 0 || stopping) break;
  }
}
console.log(`smoke: k6 exited with ${status} (${status === 0 ? "passed" : "FAILED"})`);
process.exit(status);
