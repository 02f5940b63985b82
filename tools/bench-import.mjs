#!/usr/bin/env node
import { execFileSync } from "node:child_process";
// `npm run bench:import` (issue 24): bulk import into `npm start` (workerd, local Durable Objects and
// D1) through the admin API's NDJSON jobs, as an operator would load a directory. It loads USERS
// users, ENTITIES entities of a type with ten attributes each, and one organization membership and
// one entity grant per user, JOBS jobs at a time of JOB_LINES lines, and reports the rates (a
// minute's worth), the state's size on disk and the largest entity shard.
//
//   ENTITIES=10000000 USERS=1000000 DATASET=.keyway/dataset npm run bench:import   (the data set)
//   ENTITIES=200000 USERS=100000 npm run bench:import                              (a quick run; the default)
//
// DATASET=<folder> keeps the state (and the secrets it is bound to) in that folder, for
// `ENTITY_CLAIMS=1 DATASET=<folder> npm run bench` against it. OUT=<file> writes the report as JSON;
// RERUN=1 imports the first 200,000 entities a second time (they must all come back unchanged).
import { readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { startLoadStack } from "./lib/k6-stack.mjs";

const ENTITIES = Number(process.env.ENTITIES || 200_000);
const USERS = Number(process.env.USERS || 100_000);
const JOB_LINES = Number(process.env.JOB_LINES || 50_000);
const JOBS = Number(process.env.JOBS || 4);
const GRANTS = process.env.GRANTS !== "0";
const ORGS = Number(process.env.ORGS || 1_000);
/** PHASES=grants: only those phases (a DATASET loaded before keeps its entities and users). */
const PHASES = new Set((process.env.PHASES || "entities,users,grants").split(","));

const stack = await startLoadStack({
  ...(process.env.DATASET ? { dataset: process.env.DATASET } : {}),
  vars: process.env.SHARDS_ENTITY
    ? {
        SHARDS: JSON.stringify({
          session: [4],
          challenge: [4],
          code: [4],
          revocation: [4],
          refresh: [4],
          entity: [Number(process.env.SHARDS_ENTITY)],
        }),
      }
    : {},
});
console.log(`stack at ${stack.url}, state in ${stack.tmp}`);

/** An admin call over node:http: a job of 50,000 lines answers when it is done, with no client-side timeout. */
const admin = (path, init = {}) =>
  new Promise((resolve, reject) => {
    const req = request(
      `${stack.url}/admin/v1${path}`,
      {
        method: init.method ?? "GET",
        headers: {
          Authorization: `Bearer ${stack.adminToken}`,
          "Content-Type": "application/json",
          ...(init.headers ?? {}),
        },
      },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          if ((res.statusCode ?? 500) >= 300) reject(new Error(`${path}: ${res.statusCode} ${text}`));
          else resolve(text ? JSON.parse(text) : null);
        });
      },
    );
    req.on("error", reject);
    req.end(init.body);
  });

/** Ten attributes, shaped like FusionAuth's load test's. */
const attributes = (i) => ({
  serial: `SN-${i.toString(36).padStart(8, "0")}`,
  model: `model-${i % 97}`,
  firmware: `1.${i % 13}.${i % 7}`,
  region: ["eu", "us", "apac", "latam"][i % 4],
  active: i % 5 !== 0,
  capacity: (i * 7919) % 10_000,
  site: `site-${i % 5_000}`,
  owner: `team-${i % 250}`,
  tags: [`t${i % 11}`, `t${i % 17}`],
  installed: 1_600_000_000 + (i % 100_000_000),
});

/** Runs jobs of `kind` over `total` records, JOBS at a time; returns the totals and the time taken. */
async function load(kind, total, record) {
  const jobs = [];
  for (let start = 0; start < total; start += JOB_LINES) jobs.push([start, Math.min(total, start + JOB_LINES)]);
  const totals = { lines: 0, created: 0, updated: 0, unchanged: 0, failed: 0, errors: [] };
  const started = performance.now();
  let next = 0;
  let done = 0;
  async function worker() {
    while (next < jobs.length) {
      const [from, to] = jobs[next++];
      const lines = [];
      for (let i = from; i < to; i++) lines.push(JSON.stringify(record(i)));
      const job = await admin(`/imports/${kind}`, {
        method: "POST",
        headers: { "Content-Type": "application/x-ndjson" },
        body: `${lines.join("\n")}\n`,
      });
      for (const k of ["lines", "created", "updated", "unchanged", "failed"]) totals[k] += job[k];
      if (totals.errors.length < 5) totals.errors.push(...job.errors.slice(0, 5));
      done += to - from;
      const s = (performance.now() - started) / 1000;
      process.stdout.write(
        `\r${kind}: ${done.toLocaleString()} of ${total.toLocaleString()}, ${Math.round((done / s) * 60).toLocaleString()}/min   `,
      );
    }
  }
  await Promise.all(Array.from({ length: Math.min(JOBS, jobs.length) }, worker));
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write("\n");
  return { ...totals, seconds: Math.round(seconds * 10) / 10, per_minute: Math.round((total / seconds) * 60) };
}

const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
const report = {
  at: new Date().toISOString(),
  load_before: loadavg(),
  entities: ENTITIES,
  users: USERS,
  job_lines: JOB_LINES,
  jobs_in_parallel: JOBS,
};
try {
  // The type may exist already (a DATASET loaded before).
  await admin("/entity-types", {
    method: "POST",
    body: JSON.stringify({
      name: "device",
      roles: { owner: { permissions: ["device:write"] }, viewer: { permissions: ["device:read"] } },
    }),
  }).catch((err) => {
    if (!String(err.message).includes(" 409 ")) throw err;
  });
  if (PHASES.has("entities"))
    report.organizations = await load("entities", ORGS, (i) => ({
      type: "organization",
      name: `Org ${i}`,
      external_id: `org-${i}`,
      attributes: { plan: ["free", "pro", "enterprise"][i % 3] },
    }));
  if (PHASES.has("entities"))
    report.entity_import = await load("entities", ENTITIES, (i) => ({
      type: "device",
      name: `Device ${i}`,
      external_id: `dev-${i}`,
      attributes: attributes(i),
    }));
  if (PHASES.has("users"))
    report.user_import = await load("users", USERS, (i) => ({
      email: `user-${i}@load.keyway.test`,
      name: `User ${i}`,
    }));
  if (GRANTS && PHASES.has("grants")) {
    report.membership_import = await load("grants", USERS, (i) => ({
      email: `user-${i}@load.keyway.test`,
      target_external_id: `org-${i % ORGS}`,
      roles: [i % 10 === 0 ? "admin" : "member"],
    }));
    report.device_grant_import = await load("grants", USERS, (i) => ({
      email: `user-${i}@load.keyway.test`,
      target_external_id: `dev-${(i * 7) % ENTITIES}`,
      roles: ["owner"],
    }));
  }
  if (process.env.RERUN === "1")
    report.entity_rerun = await load("entities", Math.min(ENTITIES, 200_000), (i) => ({
      type: "device",
      name: `Device ${i}`,
      external_id: `dev-${i}`,
      attributes: attributes(i),
    }));
  const stats = await admin("/stats");
  const entity = stats.stores.entity;
  report.entity_shards = entity?.shards.length;
  report.entity_storage_bytes = entity?.shards.reduce((a, s) => a + (s.storage_bytes ?? 0), 0);
  report.largest_entity_shard_bytes = Math.max(...(entity?.shards.map((s) => s.storage_bytes ?? 0) ?? [0]));
  report.load_after = loadavg();
  report.state_on_disk = execFileSync("du", ["-sh", process.env.DATASET ?? stack.tmp], { encoding: "utf8" }).split(
    "\t",
  )[0];
  console.log(JSON.stringify(report, null, 2));
  if (process.env.OUT) writeFileSync(process.env.OUT, `${JSON.stringify(report, null, 2)}\n`);
} finally {
  await stack.dispose();
  if (process.env.DATASET) console.log(`the data set is in ${process.env.DATASET}`);
}
