#!/usr/bin/env node
// npm run k6:smoke [-- extra k6 args]: about 20 s of k6/full-login.js at a low rate (RATE=5,
// RAMP=5, HOLD=15 unless set) against the local stack (or BASE_URL). ADMIN_TOKEN comes from the
// environment, else from .dev.vars. Exits with k6's status: non-zero when a threshold fails.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { readDevVars } from "../scripts/lib/local.mjs";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const k6 = join(repo, ".keyway", "bin", "k6");

/**
 * Every local request comes from one address, so the per-IP quotas on generate and verify
 * (CONTRACT §6: raised, not switched off, for load tests) must allow the run's whole rate.
 * Returns a warning when POLICY in .dev.vars does not, for a local BASE_URL.
 */
function localQuotaHint(baseUrl, devVars, rate) {
  if (!/^https?:\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:|\/|$)/.test(baseUrl)) return null;
  let policy = {};
  try {
    policy = devVars.POLICY ? JSON.parse(devVars.POLICY) : {};
  } catch {
    return ".dev.vars has a POLICY that is not JSON";
  }
  const need = Math.ceil(rate * 60 * 1.5);
  // Unset means the defaults of workers/shared/config/policy.ts, which are one person's scale, far below a run's.
  const gen = policy.ip_generate_per_minute ?? 0;
  const ver = policy.ip_verify_per_minute ?? 0;
  if (gen >= need && ver >= need) return null;
  const raised = JSON.stringify({
    ...policy,
    ip_generate_per_minute: Math.max(gen, 100000),
    ip_verify_per_minute: Math.max(ver, 100000),
  });
  return (
    `the local per-IP quotas (generate ${gen || "default"}/min, verify ${ver || "default"}/min) are below ${need}/min, so logins will get 429. ` +
    `Add POLICY='${raised}' to .dev.vars and restart the stack.`
  );
}

const devVarsPath = join(repo, ".dev.vars");
const devVars = existsSync(devVarsPath) ? readDevVars(devVarsPath) : {};
const adminToken = process.env.ADMIN_TOKEN || devVars.ADMIN_TOKEN;
const baseUrl = (process.env.BASE_URL || `http://127.0.0.1:${process.env.PORT || 8787}`).replace(/\/+$/, "");

if (!adminToken) {
  console.error(`k6:smoke: no ADMIN_TOKEN in the environment or in ${devVarsPath} (start the stack once: npm run dev)`);
  process.exit(1);
}

if (!existsSync(k6)) {
  console.log("k6:smoke: k6 is not installed yet; running npm run k6:install first");
  const r = spawnSync(process.execPath, [join(repo, "tools", "k6-install.mjs")], { stdio: "inherit" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

try {
  const res = await fetch(`${baseUrl}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`discovery answered ${res.status}`);
} catch (err) {
  console.error(`k6:smoke: ${baseUrl} is not serving Keyway (${err.message}); start it with npm run dev or npm start`);
  process.exit(1);
}

const env = {
  ...process.env,
  ADMIN_TOKEN: adminToken,
  BASE_URL: baseUrl,
  RATE: process.env.RATE || "5",
  RAMP: process.env.RAMP || "5",
  HOLD: process.env.HOLD || "15",
  // k6 would otherwise report usage to Grafana at the end of the run.
  K6_NO_USAGE_REPORT: "true",
};
const quotaHint = localQuotaHint(baseUrl, devVars, Number(env.RATE));
if (quotaHint) console.warn(`k6:smoke: warning: ${quotaHint}`);

console.log(`k6:smoke: ${env.RATE} logins/s (ramp ${env.RAMP} s, hold ${env.HOLD} s) against ${baseUrl}`);
const r = spawnSync(k6, ["run", ...process.argv.slice(2), join(repo, "k6", "full-login.js")], {
  stdio: "inherit",
  env,
  cwd: repo,
});
if (r.error) {
  console.error(`k6:smoke: could not run ${k6}: ${r.error.message}`);
  process.exit(1);
}
if (r.status !== 0 && quotaHint) console.warn(`k6:smoke: failed; if errors_rate_limited > 0: ${quotaHint}`);
process.exit(r.status ?? 1);
