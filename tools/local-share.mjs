#!/usr/bin/env node
// What the local stack adds to a login's CPU, line by line (issue 28 item 4), measured by absence:
// the same checkout on three stacks, one after another and REPEAT times in alternating order, each
// loaded at RATE logins/s with k6/full-login.js:
//   1. `npm start` as it is: the dev gateway in front, Miniflare's Rate Limiting, state on disk;
//   2. production-shaped (scripts/stack.mjs `productionShaped`), state on disk;
//   3. production-shaped, state on a tmpfs (tools/lib/k6-stack.mjs `stateInMemory`).
// 1 less 2 is the gateway's hop and the emulated limiter, their dispatch included; 2 less 3 is the
// local disk's flush at each SQLite commit. Server CPU per finished login over the hold, as
// `npm run bench` counts it (tools/lib/bench-ladder.mjs). `npm run bench` measures the test's mailbox
// read itself (its mailbox pairs). Env: RATE (50), REPEAT (2), STEP_SECONDS (25), RAMP (5).
import { runRung } from "./lib/bench-ladder.mjs";
import { serverMsPerLogin } from "./lib/bench-report.mjs";
import { keywayTarget } from "./lib/bench-targets.mjs";
import { installK6, raisedPolicy } from "./lib/k6-stack.mjs";

const RATE = Number(process.env.RATE ?? 50);
const REPEAT = Math.max(1, Math.floor(Number(process.env.REPEAT ?? 2)));
const STEP = Number(process.env.STEP_SECONDS ?? 25);
const RAMP = Number(process.env.RAMP ?? 5);
if (installK6() !== 0) process.exit(1);

const policy = raisedPolicy();
const stacks = [
  { key: "npm start", open: () => keywayTarget({ policy, inspect: false }) },
  {
    key: "shaped, disk",
    open: () => keywayTarget({ policy, productionShaped: true, stateInMemory: false, inspect: false }),
  },
  {
    key: "shaped, tmpfs",
    open: () => keywayTarget({ policy, productionShaped: true, stateInMemory: true, inspect: false }),
  },
];
/** @type {Record<string, number[]>} */
const ms = Object.fromEntries(stacks.map((s) => [s.key, []]));
for (let rep = 1; rep <= REPEAT; rep++) {
  for (const s of rep % 2 ? stacks : [...stacks].reverse()) {
    const target = await s.open();
    try {
      await runRung(target, { rate: 10, ramp: 0, hold: 8, label: "warmup", measure: false });
      const r = await runRung(target, {
        rate: RATE,
        ramp: RAMP,
        hold: STEP - RAMP,
        label: `share-${rep}`,
        measure: true,
      });
      const perLogin = r ? serverMsPerLogin(r) : null;
      if (perLogin === null) throw new Error(`${s.key}: the rung measured nothing`);
      ms[s.key].push(perLogin);
      console.log(
        `local-share: ${s.key} (run ${rep}): ${perLogin.toFixed(2)} ms/login, failed ${(100 * r.errorRate).toFixed(2)} %`,
      );
    } finally {
      await target.dispose();
    }
  }
}
const mean = (/** @type {string} */ k) => ms[k].reduce((a, b) => a + b, 0) / ms[k].length;
const [start, disk, tmpfs] = stacks.map((s) => mean(s.key));
console.log(
  `\nserver CPU ms per login at ${RATE}/s, mean of ${REPEAT} (each run: ${stacks.map((s) => `${s.key} ${ms[s.key].map((x) => x.toFixed(2)).join(", ")}`).join("; ")})`,
);
console.log(`| line | ms/login |\n| --- | ---: |`);
console.log(`| \`npm start\` | ${start.toFixed(2)} |`);
console.log(
  `| the dev gateway's hop and Miniflare's Rate Limiting, dispatch included (1 − 2) | ${(start - disk).toFixed(2)} |`,
);
console.log(`| the local disk's flush at each SQLite commit (2 − 3) | ${(disk - tmpfs).toFixed(2)} |`);
console.log(`| production-shaped, state on a tmpfs | ${tmpfs.toFixed(2)} |`);
