#!/usr/bin/env node
// `npm run bench:webhooks` (issue 25): the login at RATE logins/s (50) for HOLD seconds (30), twice in
// one run on one stack: without a webhook endpoint, then with one subscribed to user.signed_in that
// points at a receiver this script starts (a Node HTTP server on another port, which verifies each
// delivery's Standard Webhooks signature with the reference library). It reports, for both runs, the
// login's p95 and Durable Object calls per login (GET /admin/v1/stats before and after), and counts
// the sign-ins the receiver got, waiting for the queues to drain.
//
//   RATE=50 HOLD=30 npm run bench:webhooks     (writes docs/benchmarks/<date>-webhooks.md unless OUT=-)
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { exitOf, FULL_LOGIN, installedK6, REPO, spawnK6, startLoadStack } from "./lib/k6-stack.mjs";

const RATE = Number(process.env.RATE || 50);
const HOLD = Number(process.env.HOLD || 30);
const RAMP = 5;

if (!installedK6()) {
  console.error("k6 is not installed: npm run k6:install");
  process.exit(1);
}

// ---- The receiver: counts verified sign-ins by webhook-id.
let verifier = null;
/** Verified sign-ins by webhook-id, with the time each sign-in happened (the envelope's timestamp). */
const seen = new Map();
let deliveries = 0;
let badSignatures = 0;
const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    deliveries++;
    const body = Buffer.concat(chunks).toString("utf8");
    try {
      const event = verifier.verify(body, {
        "webhook-id": req.headers["webhook-id"],
        "webhook-timestamp": req.headers["webhook-timestamp"],
        "webhook-signature": req.headers["webhook-signature"],
      });
      if (event.type === "user.signed_in") seen.set(req.headers["webhook-id"], Date.parse(event.timestamp));
      res.writeHead(200).end();
    } catch {
      badSignatures++;
      res.writeHead(400).end();
    }
  });
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const receiverUrl = `http://127.0.0.1:${server.address().port}/hooks`;

const stack = await startLoadStack();
const admin = async (path, init = {}) => {
  const res = await fetch(`${stack.url}/admin/v1${path}`, {
    ...init,
    headers: {
      Authorization: `Bearer ${stack.adminToken}`,
      "Content-Type": "application/json",
      ...(init.headers ?? {}),
    },
  });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json();
};
const calls = async () => (await admin("/stats")).totals.durable_object_calls;

/** One k6 run; returns its summary (logins, p95) and the Durable Object calls it made. */
async function run(label) {
  const summaryFile = join(stack.tmp, `${label}-summary.json`);
  const before = await calls();
  const k6 = spawnK6(
    ["run", "--quiet", "--summary-export", summaryFile, FULL_LOGIN],
    {
      BASE_URL: stack.url,
      ADMIN_TOKEN: stack.adminToken,
      RATE: String(RATE),
      RAMP: String(RAMP),
      HOLD: String(HOLD),
      SUCCESS_RATE: "0.99",
    },
    ["ignore", "ignore", "inherit"],
  );
  const status = await exitOf(k6);
  const after = await calls();
  const summary = JSON.parse(readFileSync(summaryFile, "utf8")).metrics;
  const logins = summary.login_success?.passes ?? 0;
  return {
    label,
    status,
    logins,
    failed: summary.login_success?.fails ?? 0,
    p95: summary.full_flow?.["p(95)"] ?? null,
    callsPerLogin: logins ? (after - before) / logins : null,
  };
}

let report;
try {
  const without = await run("without");
  const endpoint = await admin("/webhooks", {
    method: "POST",
    body: JSON.stringify({ url: receiverUrl, events: ["user.signed_in"] }),
  });
  verifier = new Webhook(endpoint.secret);
  // The stores read a tenant's endpoints at most every 5 s; the first run's last events flush meanwhile.
  await new Promise((r) => setTimeout(r, 6_000));
  const secondStarted = Date.now();
  const withHook = await run("with");
  const ofSecond = () => [...seen.values()].filter((t) => t >= secondStarted).length;
  // Sign-ins reach the queues when each store's alarm flushes (seconds); wait until every queue is empty.
  const ended = Date.now();
  let webhooks = (await admin("/stats")).webhooks;
  while ((webhooks.pending > 0 || ofSecond() < withHook.logins) && Date.now() < ended + 180_000) {
    await new Promise((r) => setTimeout(r, 1_000));
    webhooks = (await admin("/stats")).webhooks;
  }
  const waited = Math.round((Date.now() - ended) / 1000);
  report = {
    without,
    withHook,
    delivered: ofSecond(),
    earlier: seen.size - ofSecond(),
    deliveries,
    badSignatures,
    waited,
    webhooks,
  };
} finally {
  await stack.dispose();
  server.close();
}

const { without, withHook } = report;
const ms = (v) => (v === null ? "—" : `${Math.round(v)} ms`);
const per = (v) => (v === null ? "—" : v.toFixed(2));
const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: REPO }).toString().trim();
const date = new Date().toISOString().slice(0, 10);
const md = `# Webhooks beside the login (issue 25)

${date}, commit ${commit}, \`npm run bench:webhooks\` (RATE=${RATE}, HOLD=${HOLD} s after a ${RAMP} s ramp) on this
machine: k6 \`full-login.js\` against \`npm start\`'s runtime, twice on one stack, first without a webhook
endpoint, then with one subscribed to \`user.signed_in\` at a local receiver that verifies every
signature with the Standard Webhooks reference library.

| run | logins | failed | full login p95 | Durable Object calls per login |
| --- | --- | --- | --- | --- |
| without webhooks | ${without.logins} | ${without.failed} | ${ms(without.p95)} | ${per(without.callsPerLogin)} |
| with an endpoint for sign-ins | ${withHook.logins} | ${withHook.failed} | ${ms(withHook.p95)} | ${per(withHook.callsPerLogin)} |

The receiver got ${report.delivered} distinct verified \`user.signed_in\` messages for sign-ins of the second run, which
had ${withHook.logins} successful logins (and ${report.earlier} for sign-ins of the first run that the stores flushed after
the endpoint existed; ${report.deliveries} requests in all, ${report.badSignatures} with a bad signature). Every queue was
empty ${report.waited} s after the run's end; the queues' counters then: ${JSON.stringify(report.webhooks)}.

Calls per login count every Durable Object verb call in the run's window, so the second run's include the
enqueue calls the audit flush makes from the stores' alarms (one per flushed batch, not per login); no call is added to the login's own steps (test/login/login-budget.test.ts). What a webhook adds is work in the
alarms, after the response: the audit flush reads the tenant's endpoints (at most every 5 s per
isolate) and queues the messages, and the queue's alarm sends them.
`;
console.log(md);
if (process.env.OUT !== "-") {
  const file = join(REPO, "docs", "benchmarks", `${date}-webhooks.md`);
  writeFileSync(file, md);
  console.log(`written: ${file}`);
}
process.exit(without.status === 0 && withHook.status === 0 && report.delivered >= withHook.logins ? 0 : 1);
