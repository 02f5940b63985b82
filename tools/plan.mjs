#!/usr/bin/env node
// npm run plan -- --peak <logins/s> --typical <logins/s> [--refresh-per-login N] [--userinfo-per-s N] [--entities N]
// Each store's shard count for that traffic, with its reasoning (workers/shared/config/shard-plan.ts, the same
// code as POST /admin/v1/shards/plan), and the SHARDS value to deploy or append as a generation.
//
// npm run plan -- --measure <issuer URL> [--window 10] [--peak-factor 3]
// The same from the calls a running deployment's stores take now, per region (POST
// /admin/v1/shards/plan with `measured`; ADMIN_TOKEN from the environment, else .dev.vars).
import { parseArgs } from "node:util";
import { readDevVars } from "../scripts/lib/local.mjs";
import { planEntityShards, planShards } from "../workers/shared/config/shard-plan.ts";

const { values } = parseArgs({
  options: {
    peak: { type: "string" },
    typical: { type: "string" },
    "refresh-per-login": { type: "string", default: "0" },
    "userinfo-per-s": { type: "string", default: "0" },
    entities: { type: "string" },
    measure: { type: "string" },
    window: { type: "string", default: "10" },
    "peak-factor": { type: "string", default: "3" },
  },
});

/** @param {{ store: string, shards: number, reasoning: string, calls_per_login: number | null }[]} plan */
const print = (plan) => {
  for (const p of plan)
    console.log(
      `${p.store.padEnd(10)} ${String(p.shards).padStart(4)} shard(s)  ` +
        `${p.calls_per_login === null ? "" : `(${p.calls_per_login} call(s)/login) `}${p.reasoning}`,
    );
};

if (values.measure) {
  const token = process.env.ADMIN_TOKEN || readDevVars().ADMIN_TOKEN;
  if (!token) {
    console.error("plan: --measure needs ADMIN_TOKEN (environment or .dev.vars)");
    process.exit(2);
  }
  const measured = { window_seconds: Number(values.window), peak_factor: Number(values["peak-factor"]) };
  console.log(`plan: watching ${values.measure}'s stores for ${measured.window_seconds} s ...`);
  const res = await fetch(new URL("/admin/v1/shards/plan", values.measure), {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ measured }),
  });
  if (res.status !== 200) {
    console.error(`plan: ${res.status} ${await res.text()}`);
    process.exit(1);
  }
  const body =
    /** @type {{ regions: Record<string, { measured: Record<string, number>, plan: any[], shards: Record<string, number> }> }} */ (
      await res.json()
    );
  for (const [region, r] of Object.entries(body.regions)) {
    console.log(`\n${region}: calls/s measured ${JSON.stringify(r.measured)}, peak = ${measured.peak_factor} x that`);
    print(r.plan);
  }
  const counts = Object.fromEntries(Object.entries(body.regions).map(([region, r]) => [region, r.shards]));
  console.log(`\nPlanned counts per region: ${JSON.stringify(counts)}`);
  console.log(
    "Append each count that changes as a new generation of its region's list (SHARDS.regions.<name>, or the " +
      "default list the region follows); never replace a list: live ids name its generations (docs/sharding.md).",
  );
  process.exit(0);
}
const number = (/** @type {string | undefined} */ v, /** @type {string} */ name) => {
  const n = Number(v);
  if (v === undefined || !Number.isFinite(n) || n < 0) {
    console.error(`plan: --${name} must be a number of logins (or calls) a second, 0 or more`);
    process.exit(2);
  }
  return n;
};
const input = {
  peak: number(values.peak, "peak"),
  typical: number(values.typical, "typical"),
  refresh_per_login: number(values["refresh-per-login"], "refresh-per-login"),
  userinfo_per_s: number(values["userinfo-per-s"], "userinfo-per-s"),
};
if (input.typical > input.peak) {
  console.error("plan: --typical cannot exceed --peak");
  process.exit(2);
}
const plan = planShards(input);
// Issue 24: the entity store is sized by what it holds.
const entity = values.entities !== undefined ? planEntityShards(number(values.entities, "entities")) : null;
print(plan);
if (entity) console.log(`entity: ${entity.shards} shards. ${entity.reasoning}`);
const counts = Object.fromEntries(plan.map((p) => [p.store, [p.shards]]));
if (entity) counts.entity = [entity.shards];
console.log(`\nSHARDS='${JSON.stringify(counts)}'`);
console.log("On a running deployment, append each count as a new generation with a `from` (docs/sharding.md).");
