// `RESHARD=1 npm run bench` (issue 13): the long version of k6/reshard.js against a fresh Keyway, and a
// report in docs/benchmarks/<date>-reshard.md saying how many logins crossed each change.
//
// Full logins at RESHARD_RATE/s (50) for RESHARD_HOLD seconds (300) through three regions (Japan,
// Germany, the US in turn). At 1 s the admin API doubles every store's shards; the shard controller,
// its cron fired every 10 s (a compressed clock: on Cloudflare it runs every 5 minutes) with a ceiling
// this run's load exceeds, doubles them again once the first change is live. Zero failed logins is
// the pass rule, with every check of the reshard VU (refresh tokens from before each change rotate,
// their replays revoke the family).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { exitOf, RESHARD, raisedPolicy, spawnK6, startLoadStack } from "./k6-stack.mjs";

const REGIONS = {
  regions: { global: {}, apac: { hint: "apac" }, eu: { jurisdiction: "eu" } },
  default: "global",
  continents: { AS: "apac", OC: "apac" },
  countries: { JP: "apac" },
  residency: { region: "eu", countries: ["EEA"] },
};

/** @param {{ outDir: string, date: string, commit: string, machine: string }} o */
export async function runReshardBench(o) {
  const rate = Number(process.env.RESHARD_RATE || 50);
  const hold = Number(process.env.RESHARD_HOLD || 300);
  const controller = {
    enabled: true,
    ceiling_per_shard: Number(process.env.RESHARD_CEILING || 1),
    floor_per_shard: 0,
    runs: 1,
    min_interval_minutes: 1,
    max_shards: 32,
  };
  const policy = { ...raisedPolicy(), shard_config_cache_seconds: 1, shard_controller: controller };
  console.log(`bench: reshard run, ${rate} logins/s for ${hold} s; starting Keyway ...`);
  const stack = await startLoadStack({ policy, vars: { REGIONS: JSON.stringify(REGIONS) } });
  const summaryFile = join(stack.tmp, "reshard-summary.json");
  const logFile = join(stack.tmp, "reshard.log");
  let status = 1;
  const startedAt = new Date();
  try {
    const cron = setInterval(() => void stack.fireCron("*/5 * * * *"), 10_000);
    const k6 = spawnK6(["run", "--quiet", "--summary-export", summaryFile, "--console-output", logFile, RESHARD], {
      RATE: String(rate),
      RAMP: "10",
      HOLD: String(hold),
      BASE_URL: stack.url,
      ADMIN_TOKEN: stack.adminToken,
      USERS: "seeded",
      COUNTRIES: "JP,DE,US",
      CONTROLLER: "1",
    });
    status = await exitOf(k6);
    clearInterval(cron);
  } finally {
    await stack.dispose(true);
  }
  const summary = JSON.parse(readFileSync(summaryFile, "utf8"));
  const m = summary.metrics;
  const count = (name) => m[name]?.count ?? 0;
  const success = m.login_success ?? {};
  const logins = (success.passes ?? 0) + (success.fails ?? 0);
  const flow = m.full_flow ?? {};
  const checks = m.reshard_checks ?? {};
  const console_ = readFileSync(logFile, "utf8")
    .split("\n")
    .filter((l) => l.includes("reshard:"))
    .map((l) => (/msg="([^"]+)"/.exec(l)?.[1] ?? l).trim());
  const lines = [
    `# Live reshard under load, ${o.date}`,
    "",
    `\`RESHARD=1 npm run bench\` at ${o.commit}, ${startedAt.toISOString()}; ${o.machine}.`,
    "",
    `Full logins at ${rate}/s (10 s ramp, ${hold} s hold; k6 ramping-arrival-rate, k6/reshard.js with CONTROLLER=1)`,
    "through three regions (global, apac by hint, eu by jurisdiction; logins from Japan, Germany and the US in turn).",
    `At 1 s the admin API doubled every store's shards (\`POST /admin/v1/shards\`); the shard controller, its cron`,
    `fired every 10 s (compressed; every 5 minutes on Cloudflare) with \`ceiling_per_shard\` ${controller.ceiling_per_shard}`,
    "call/s, doubled them again once the first change was live. Each change is issued into 61 s after it is",
    "appended (`shard_config_cache_seconds` 1, plus a minute).",
    "",
    "| | |",
    "| --- | --- |",
    `| k6 exit | ${status} (${status === 0 ? "every threshold passed" : "a threshold FAILED"}) |`,
    `| logins | ${logins}; failed ${success.fails ?? "?"} |`,
    `| logins finished in a newer generation than the first (after the admin API's switch) | ${count("logins_in_new_generation")} |`,
    `| of which in the controller's generation (after its switch) | ${count("logins_in_controller_generation")} |`,
    `| logins that crossed a switch: begun in one generation (their transaction's), finished in the next (their refresh family's) | ${count("logins_across_a_switch")} |`,
    `| full_flow p50 / p95 / max | ${fmt(flow.med)} / ${fmt(flow["p(95)"])} / ${fmt(flow.max)} ms |`,
    `| reshard checks (refresh from before each change rotates, replay refused, family revoked) | ${checks.passes ?? 0} passed, ${checks.fails ?? 0} failed |`,
    "",
    "What the run logged:",
    "",
    ...console_.map((l) => `- ${l}`),
    "",
  ];
  mkdirSync(o.outDir, { recursive: true });
  const file = join(o.outDir, `${o.date}-reshard.md`);
  writeFileSync(file, `${lines.join("\n")}\n`);
  console.log(`bench: wrote ${relative(process.cwd(), file)}`);
  return status;
}

const fmt = (v) => (typeof v === "number" ? v.toFixed(1) : "?");
