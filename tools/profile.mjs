#!/usr/bin/env node
// Profiles the login on the `npm start` runtime: starts a load stack with the V8 inspector open,
// records a CPU profile of every Worker and Durable Object isolate while k6 runs full-login.js, and
// prints where the CPU goes: per isolate (tools/lib/isolate-cpu.mjs: samples taken while the isolate
// was entered, times the tick), by role (Workers, Durable Objects, local-only), and by function within
// each isolate (self time). Env: RATE (default 80), SECONDS (15), TOP (25), OUT (folder for the raw
// .cpuprofile files, default .keyway/profiles), SCRIPT (the k6 script, default k6/full-login.js),
// TICK_US (the profilers' interval, default 1000; finer is more detail and more disturbance), SHAPED=1
// (the production-shaped stack of `SHAPED=1 npm run bench`: each Worker on its own port, no gateway),
// FLOOR=keyway|minimal (the bench's floor instead of Keyway, tools/lib/floor-login.mjs, driven by
// k6/floor-login.js; with SHAPED=1, production-shaped), so the two compare isolate by isolate.
// For CPU per operation, `npm run cost-model` measures; docs/performance.md has both.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../scripts/stack.mjs";
import { floorTarget } from "./lib/floor-login.mjs";
import { byRole, openIsolateProfiler } from "./lib/isolate-cpu.mjs";
import { FULL_LOGIN, installK6, REPO, spawnK6, startLoadStack } from "./lib/k6-stack.mjs";
import { CLK_TCK, cpuTicks, threadClock, workerdPids } from "./lib/proc.mjs";

const RATE = Number(process.env.RATE ?? 80);
const SECONDS = Number(process.env.SECONDS ?? 15);
const TOP = Number(process.env.TOP ?? 25);
const TICK_US = Number(process.env.TICK_US ?? 1000);
const OUT = process.env.OUT ?? join(REPO, ".keyway", "profiles");
const FLOOR = process.env.FLOOR;
if (FLOOR !== undefined && FLOOR !== "keyway" && FLOOR !== "minimal") throw new Error("FLOOR is keyway or minimal");
const SCRIPT = process.env.SCRIPT ?? (FLOOR ? join(REPO, "k6/floor-login.js") : FULL_LOGIN);

if (installK6() !== 0) process.exit(1);
const inspectorPort = await freePort();
const productionShaped = process.env.SHAPED === "1";
/** @type {{ url: string, adminToken: string, workerUrls?: Record<string, string>, env?: Record<string, string>, dispose(): Promise<void> }} */
const stack = FLOOR
  ? await floorTarget({ ops: FLOOR, productionShaped, inspectorPort })
  : await startLoadStack({ inspectorPort, productionShaped });
try {
  const profiler = await openIsolateProfiler(inspectorPort, TICK_US);
  // Warm up first (cold isolates, first key import), then profile a steady run.
  await runK6({ RATE: "10", RAMP: "2", HOLD: "5" });
  await profiler.start();
  const pids = workerdPids();
  const ticks = () => pids.reduce((a, p) => a + (cpuTicks(p) ?? 0), 0);
  const clock = threadClock(pids);
  const cpu0 = ticks();
  await runK6({ RATE: String(RATE), RAMP: "3", HOLD: String(SECONDS) });
  const processMs = ((ticks() - cpu0) / CLK_TCK) * 1000;
  const [mainThread = { tid: 0, name: "", ms: 0 }, ...helpers] = clock();
  const isolates = await profiler.stop();
  profiler.close();
  mkdirSync(OUT, { recursive: true });
  const inIsolates = isolates.reduce((a, i) => a + i.ms, 0);
  for (const i of [...isolates].sort((a, b) => b.ms - a.ms)) {
    writeFileSync(join(OUT, `${i.name.replace(/[^\w.-]+/g, "_")}.cpuprofile`), JSON.stringify(i.profile));
    if (i.samples === 0) continue;
    const self = selfTimes(i.profile, i.tickUs);
    console.log(
      `\n== ${i.name} (${i.role}): ${i.ms.toFixed(0)} ms of CPU (${((100 * i.ms) / processMs).toFixed(1)} % of workerd's)`,
    );
    for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, TOP))
      console.log(
        `${(us / 1000).toFixed(1).padStart(9)} ms  ${((100 * us) / (i.ms * 1000)).toFixed(1).padStart(5)} %  ${name}`,
      );
  }
  const roles = byRole(isolates);
  console.log(
    `\nworkerd: ${processMs.toFixed(0)} ms of CPU over the run at ${RATE} logins/s (ramp included), ${mainThread.ms.toFixed(0)} ms of it on the thread that runs the isolates; ` +
      `in isolates ${inIsolates.toFixed(0)} ms (Workers ${roles.worker.toFixed(0)}, Durable Objects ${roles["durable-object"].toFixed(0)}, local-only ${roles["local-only"].toFixed(0)}), ` +
      `on that thread outside them ${(mainThread.ms - inIsolates).toFixed(0)} ms; tick ${isolates[0]?.tickUs ?? 0} µs; raw profiles in ${OUT}`,
  );
  const others = new Map();
  for (const t of helpers) others.set(t.name, (others.get(t.name) ?? 0) + t.ms);
  console.log(`other threads: ${[...others].map(([n, ms]) => `${n} ${ms.toFixed(0)} ms`).join(", ")}`);
} finally {
  await stack.dispose();
}

/** Self time (µs) per function, from the sampled call tree; idle and program time are kept by name. */
function selfTimes(profile, tickUs) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const counts = new Map();
  for (const id of profile.samples) counts.set(id, (counts.get(id) ?? 0) + 1);
  const out = new Map();
  for (const [id, n] of counts) {
    const node = byId.get(id);
    const f = node.callFrame;
    if (f.functionName === "(idle)") continue;
    const where = f.url ? `${f.url.split("/").slice(-1)[0]}:${f.lineNumber + 1}` : "";
    const key = `${f.functionName || "(anonymous)"} ${where}`.trim();
    out.set(key, (out.get(key) ?? 0) + n * tickUs);
  }
  return out;
}

function runK6(env) {
  return new Promise((resolve, reject) => {
    const k6 = spawnK6(
      ["run", "--quiet", "--no-thresholds", SCRIPT],
      {
        BASE_URL: stack.url,
        ADMIN_TOKEN: stack.adminToken,
        // Production-shaped: each login request straight to its Worker's own port, as the bench sends it.
        ...stack.env,
        ...(stack.workerUrls?.["op-auth"]
          ? { AUTH_URL: stack.workerUrls["op-auth"], TOKEN_URL: stack.workerUrls["op-token"] }
          : {}),
        ...env,
      },
      "ignore",
    );
    k6.on("exit", (code) => (code === 0 || code === 99 ? resolve(code) : reject(new Error(`k6 exited ${code}`))));
  });
}
