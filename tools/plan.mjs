#!/usr/bin/env node
// npm run plan -- --peak <logins/s> --typical <logins/s> [--refresh-per-login N] [--userinfo-per-s N]
// Each store's shard count for that traffic, with its reasoning (workers/shared/shard-plan.ts, the same
// code as POST /admin/v1/shards/plan), and the SHARDS value to deploy or append as a generation.
import { parseArgs } from "node:util";
import { planShards } from "../workers/shared/shard-plan.ts";

const { values } = parseArgs({
  options: {
    peak: { type: "string" },
    typical: { type: "string" },
    "refresh-per-login": { type: "string", default: "0" },
    "userinfo-per-s": { type: "string", default: "0" },
  },
});
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
for (const p of plan)
  console.log(
    `${p.store.padEnd(10)} ${String(p.shards).padStart(4)} shard(s)  (${p.calls_per_login} call(s)/login) ${p.reasoning}`,
  );
console.log(`\nSHARDS='${JSON.stringify(Object.fromEntries(plan.map((p) => [p.store, [p.shards]])))}'`);
console.log("On a running deployment, append each count as a new generation with a `from` (docs/sharding.md).");
