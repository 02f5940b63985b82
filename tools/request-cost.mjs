#!/usr/bin/env node
// `npm run request-cost`: workerd's CPU per request of a few GET paths of one Keyway Worker, on the
// production-shaped stack (each Worker on its own port, as `SHAPED=1 npm run bench` runs it). k6 sends
// each round at a fixed rate; the figure is the process's CPU over the round divided by its requests.
// Where `npm run cost-model` prices the runtime's operations in a Worker of no code, this prices
// Keyway's own request pipeline and handlers, path by path, on the same runtime: a path that answers
// at once (an unknown path: 404) against discovery, the dev mailbox, and so on. Rounds of one path
// are taken in a row, paths one after another on one stack; compare paths within a run.
//
// Env: PATHS (comma-separated, default `/nope,/.well-known/openid-configuration,/__dev/mailbox/nobody%40example.com`),
// WORKER (op-auth or op-token, default op-auth), RATE (requests/s, default 400), SECONDS (per round,
// default 8), ROUNDS (default 3).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { exitOf, installK6, spawnK6, startLoadStack } from "./lib/k6-stack.mjs";
import { CLK_TCK, cpuTicks, workerdPids } from "./lib/proc.mjs";

const PATHS = (process.env.PATHS ?? "/nope,/.well-known/openid-configuration,/__dev/mailbox/nobody%40example.com")
  .split(",")
  .filter(Boolean);
const WORKER = process.env.WORKER ?? "op-auth";
const RATE = Number(process.env.RATE ?? 400);
const SECONDS = Number(process.env.SECONDS ?? 8);
const ROUNDS = Number(process.env.ROUNDS ?? 3);

const K6_SCRIPT = `
import http from "k6/http";
export const options = {
  discardResponseBodies: true,
  scenarios: { paths: { executor: "constant-arrival-rate", rate: Number(__ENV.RATE), timeUnit: "1s",
    duration: __ENV.SECONDS + "s", preAllocatedVUs: 50, maxVUs: 400 } },
};
export default function () { http.get(__ENV.URL, { headers: { Accept: "application/json" } }); }`;

if (installK6() !== 0) process.exit(1);
const stack = await startLoadStack({ productionShaped: true });
try {
  const base = stack.workerUrls?.[WORKER];
  if (!base) throw new Error(`WORKER is op-auth or op-token, not ${WORKER}`);
  const script = join(stack.tmp, "request-cost.js");
  writeFileSync(script, K6_SCRIPT);
  const pids = workerdPids();
  const ticks = () => pids.reduce((sum, pid) => sum + (cpuTicks(pid) ?? 0), 0);
  const run = async (url, rate, seconds) => {
    const code = await exitOf(
      spawnK6(["run", "--quiet", script], { URL: url, RATE: String(rate), SECONDS: String(seconds) }, "ignore"),
    );
    if (code !== 0) throw new Error(`k6 exited ${code} on ${url}`);
  };
  console.log(`request-cost: ${WORKER}, ${RATE} requests/s, ${ROUNDS} rounds of ${SECONDS} s per path`);
  console.log("| path | workerd CPU per request (ms), each round |");
  console.log("| --- | --- |");
  for (const path of PATHS) {
    const url = `${base}${path}`;
    await run(url, 100, 2); // warm: the isolate's code, caches, objects
    const rounds = [];
    for (let i = 0; i < ROUNDS; i++) {
      const before = ticks();
      await run(url, RATE, SECONDS);
      rounds.push((((ticks() - before) / CLK_TCK) * 1000) / (RATE * SECONDS));
    }
    console.log(`| \`${path}\` | ${rounds.map((ms) => ms.toFixed(3)).join(", ")} |`);
  }
} finally {
  await stack.dispose();
}
