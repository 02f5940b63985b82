import exec from "k6/execution";
import { importUsers } from "./admin.js";
import { EMAIL_DOMAIN, USER_PREFIX, USERS } from "./config.js";
import { randomUrlSafe } from "./pkce.js";

/** A short id for this run, made in setup() and handed to every VU. */
export function newRunId() {
  return `${Date.now().toString(36)}${randomUrlSafe(3)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, "")}`;
}

export function seededEmail(pool, i) {
  return `${pool.prefix}-${i}@${EMAIL_DOMAIN}`;
}

/**
 * Seeds `count` users (USERS=seeded) so that no address is used twice in a run: the resend
 * interval (one code per address per 60 s) must never throttle the load test. The prefix is new
 * for every run unless USER_PREFIX pins it (reuse a pinned pool no sooner than a minute later, and
 * at most 10 times an hour: the per-address send limits apply across runs).
 */
export function seedUsers(runId, count, tenant) {
  const pool = { mode: USERS, runId, prefix: USER_PREFIX || `lt-${runId}`, count: Math.max(1, Math.ceil(count)) };
  if (USERS !== "seeded") return pool;
  const emails = [];
  for (let i = 0; i < pool.count; i++) emails.push(seededEmail(pool, i));
  const started = Date.now();
  const { created, existing } = importUsers(emails, tenant);
  console.log(
    `seeded ${pool.count} users ${pool.prefix}-N@${EMAIL_DOMAIN}${tenant ? ` in tenant ${tenant}` : ""} (${created} new, ${existing} existing) in ${Date.now() - started} ms`,
  );
  return pool;
}

let wrapped = false;

/** A first-time sign-up address, unique across VUs, iterations and runs. */
export function freshEmail(runId, tag = "su") {
  return `${tag}-${runId}-${exec.vu.idInTest}-${exec.vu.iterationInScenario}-${randomUrlSafe(4)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, "")}@${EMAIL_DOMAIN}`;
}

/**
 * The address for this iteration: a distinct seeded user per iteration, or a fresh sign-up. With
 * tenants, `index` is the iteration's place among its tenant's iterations.
 */
export function emailForIteration(pool, index = exec.scenario.iterationInTest) {
  if (pool.mode === "signup") return freshEmail(pool.runId);
  const i = index;
  if (i >= pool.count && !wrapped) {
    wrapped = true;
    console.warn(`iteration ${i} ran past the ${pool.count} seeded users: addresses are reused and may be throttled`);
  }
  return seededEmail(pool, i % pool.count);
}

/** The address owned by this VU (scripts where each VU logs in once). */
export function emailForVU(pool) {
  if (pool.mode === "signup") return freshEmail(pool.runId, "vu");
  return seededEmail(pool, (exec.vu.idInTest - 1) % pool.count);
}
