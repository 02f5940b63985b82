#!/usr/bin/env node
// Profiles the login on the `npm start` runtime: starts a load stack with the V8 inspector open,
// records a CPU profile of every Worker and Durable Object isolate while k6 runs full-login.js, and
// prints where the time goes (self time by function, per isolate). Env: RATE (default 80), SECONDS (15),
// TOP (25), OUT (folder for the raw .cpuprofile files, default .keyway/profiles), SCRIPT (the k6
// script, default k6/full-login.js). Read the shares with care: workerd's profiler samples its thread
// while it waits as well, so the last JS frame and (program) absorb idle time. For CPU per operation,
// `npm run cost-model` measures; docs/performance.md has both.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../scripts/stack.mjs";
import { FULL_LOGIN, installK6, REPO, spawnK6, startLoadStack } from "./lib/k6-stack.mjs";

const RATE = Number(process.env.RATE ?? 80);
const SECONDS = Number(process.env.SECONDS ?? 15);
const TOP = Number(process.env.TOP ?? 25);
const OUT = process.env.OUT ?? join(REPO, ".keyway", "profiles");
const SCRIPT = process.env.SCRIPT ?? FULL_LOGIN;

if (installK6() !== 0) process.exit(1);
const inspectorPort = await freePort();
const stack = await startLoadStack({ inspectorPort });
try {
  const targets = /** @type {{ title: string, webSocketDebuggerUrl: string }[]} */ (
    await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()
  );
  const sessions = await Promise.all(targets.map((t) => openSession(t.title, t.webSocketDebuggerUrl)));
  await Promise.all(
    sessions.map((s) =>
      s.send("Profiler.enable").then(() => s.send("Profiler.setSamplingInterval", { interval: 200 })),
    ),
  );
  // Warm up first (cold isolates, first key import), then profile a steady run.
  await runK6({ RATE: "10", RAMP: "2", HOLD: "5" });
  await Promise.all(sessions.map((s) => s.send("Profiler.start")));
  await runK6({ RATE: String(RATE), RAMP: "3", HOLD: String(SECONDS) });
  const profiles = await Promise.all(
    sessions.map(async (s) => ({ title: s.title, profile: (await s.send("Profiler.stop")).profile })),
  );
  mkdirSync(OUT, { recursive: true });
  let grand = 0;
  const rows = [];
  for (const { title, profile } of profiles) {
    writeFileSync(join(OUT, `${title.replace(/[^\w.-]+/g, "_")}.cpuprofile`), JSON.stringify(profile));
    const self = selfTimes(profile);
    const total = [...self.values()].reduce((a, b) => a + b, 0);
    grand += total;
    rows.push({ title, total, self });
  }
  for (const { title, total, self } of rows.sort((a, b) => b.total - a.total)) {
    console.log(
      `\n== ${title}: ${(total / 1000).toFixed(0)} ms busy (${((100 * total) / grand).toFixed(1)} % of all isolates)`,
    );
    for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, TOP))
      console.log(
        `${(us / 1000).toFixed(1).padStart(9)} ms  ${((100 * us) / total).toFixed(1).padStart(5)} %  ${name}`,
      );
  }
  console.log(
    `\nall isolates: ${(grand / 1000).toFixed(0)} ms of JS over ~${SECONDS + 3} s at ${RATE} logins/s; raw profiles in ${OUT}`,
  );
  for (const s of sessions) s.close();
} finally {
  await stack.dispose();
}

/** Self time (µs) per function, from the sampled call tree; idle and program time are kept by name. */
function selfTimes(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const counts = new Map();
  for (const id of profile.samples) counts.set(id, (counts.get(id) ?? 0) + 1);
  const interval = (profile.endTime - profile.startTime) / Math.max(1, profile.samples.length);
  const out = new Map();
  for (const [id, n] of counts) {
    const node = byId.get(id);
    const f = node.callFrame;
    if (f.functionName === "(idle)") continue;
    const where = f.url ? `${f.url.split("/").slice(-1)[0]}:${f.lineNumber + 1}` : "";
    const key = `${f.functionName || "(anonymous)"} ${where}`.trim();
    out.set(key, (out.get(key) ?? 0) + n * interval);
  }
  return out;
}

function runK6(env) {
  return new Promise((resolve, reject) => {
    const k6 = spawnK6(
      ["run", "--quiet", "--no-thresholds", SCRIPT],
      { BASE_URL: stack.url, ADMIN_TOKEN: stack.adminToken, ...env },
      "ignore",
    );
    k6.on("exit", (code) => (code === 0 || code === 99 ? resolve(code) : reject(new Error(`k6 exited ${code}`))));
  });
}

function openSession(title, url) {
  const ws = new WebSocket(url);
  let next = 1;
  const pending = new Map();
  ws.addEventListener("message", (ev) => {
    const msg = JSON.parse(String(ev.data));
    const p = pending.get(msg.id);
    if (!p) return;
    pending.delete(msg.id);
    if (msg.error) p.reject(new Error(msg.error.message));
    else p.resolve(msg.result);
  });
  return new Promise((resolve, reject) => {
    ws.addEventListener("error", () => reject(new Error(`inspector ${title}: connection failed`)));
    ws.addEventListener("open", () =>
      resolve({
        title,
        close: () => ws.close(),
        send: (method, params = {}) =>
          new Promise((res, rej) => {
            const id = next++;
            pending.set(id, { resolve: res, reject: rej });
            ws.send(JSON.stringify({ id, method, params }));
          }),
      }),
    );
  });
}
