// Shard counts changed in the middle of a load run (issue 13): full logins at RATE/s (ramping arrival
// rate) while one VU doubles every store's shard count through POST /admin/v1/shards. The new
// generations are routed at once and issued into from their issue_from; the run checks that no login
// fails across the change, that logins after it land in the new generations, that a refresh token
// from before the change still rotates, and that replaying it still revokes its family.
//
//   k6 run -e ADMIN_TOKEN=... -e RATE=5 -e HOLD=80 k6/reshard.js    (the stack's POLICY should have a
//   short shard_config_cache_seconds, e.g. 1, so the switch comes 61 s after the append, or 3 s with
//   shard_issue_margin_seconds 2 as npm run smoke runs it)
import { check, sleep } from "k6";
import exec from "k6/execution";
import http from "k6/http";
import { Counter, Rate } from "k6/metrics";
import { createClient, deleteClient, requireAdminToken } from "./lib/admin.js";
import {
  ADMIN_TOKEN,
  arrivalScenario,
  BASE_URL,
  bool,
  cloudOptions,
  REQUEST_TIMEOUT,
  usersNeeded,
} from "./lib/config.js";
import { basicAuth, jsonBody } from "./lib/http-util.js";
import { login } from "./lib/login.js";
import { emailForIteration, newRunId, seededEmail, seedUsers } from "./lib/users.js";

const SCOPE = "openid email offline_access";
const STORES = ["session", "challenge", "code", "revocation", "refresh"];
const ADMIN = { Authorization: `Bearer ${ADMIN_TOKEN}`, "Content-Type": "application/json" };

const crossed = new Counter("logins_in_new_generation");
/**
 * CONTROLLER=1: after the admin API's change, the shard controller (op-mgmt's cron, which the stack
 * fires on a compressed clock; its POLICY makes this run's traffic hot) makes a second one; logins
 * must land in its generation too, and a refresh token from before it must rotate, its replay revoke.
 */
const CONTROLLER = bool("CONTROLLER", false);
const crossedController = new Counter("logins_in_controller_generation");
/** Logins begun in one generation (their transaction's) and finished in a later one (their refresh family's). */
const acrossSwitch = new Counter("logins_across_a_switch");
const reshardChecks = new Rate("reshard_checks");

export const options = {
  scenarios: {
    logins: arrivalScenario(1.0, { exec: "logins" }),
    reshard: {
      executor: "per-vu-iterations",
      vus: 1,
      iterations: 1,
      exec: "reshard",
      startTime: "1s",
      maxDuration: "8m",
    },
  },
  thresholds: {
    // Zero failed logins across the change, and every check of the reshard VU.
    login_success: ["rate==1"],
    reshard_checks: ["rate==1"],
    logins_in_new_generation: ["count>0"],
    ...(CONTROLLER ? { logins_in_controller_generation: ["count>0"] } : {}),
  },
  setupTimeout: "5m",
  cloud: cloudOptions("Keyway reshard"),
};

export function setup() {
  requireAdminToken();
  const runId = newRunId();
  const client = createClient(`k6 reshard ${runId}`, SCOPE);
  const pool = seedUsers(runId, usersNeeded() + 2);
  return { client, pool };
}

// Ids are `<prefix>_<region>_<generation>_<shard>_<secret>` (workers/shared/routing/ids.ts): a refresh
// token's prefix is `gr`, a login transaction's `tx`.
const generationOf = (id) => {
  const m = /^[a-z]+_[a-z][a-z0-9]+_([0-9a-z]{1,2})_/.exec(String(id));
  return m ? Number.parseInt(m[1], 36) : Number.NaN;
};

export function logins(data) {
  const r = login(data.client, emailForIteration(data.pool));
  if (r.ok && generationOf(r.tokens.refresh_token) > 0) crossed.add(1);
  if (r.ok && generationOf(r.tokens.refresh_token) > 1) crossedController.add(1);
  if (r.ok && generationOf(r.tx) < generationOf(r.tokens.refresh_token)) acrossSwitch.add(1);
}

function refresh(client, token) {
  return http.post(`${BASE_URL}/token`, `grant_type=refresh_token&refresh_token=${encodeURIComponent(token)}`, {
    headers: {
      Authorization: basicAuth(client.client_id, client.client_secret),
      "Content-Type": "application/x-www-form-urlencoded",
    },
    timeout: REQUEST_TIMEOUT,
    tags: { step: "Refresh", name: "POST /token refresh_token" },
  });
}

export function reshard(data) {
  // A login before the change, whose refresh token must outlive it. Its address is past the pool the
  // logins scenario walks through.
  const before = login(data.client, seededEmail(data.pool, data.pool.count - 1), { record: false });
  reshardChecks.add(
    check(before, { "a login before the change": (r) => r.ok && generationOf(r.tokens.refresh_token) === 0 }),
  );
  const listed = jsonBody(http.get(`${BASE_URL}/admin/v1/shards`, { headers: ADMIN }));
  let switchAt = 0;
  for (const store of STORES) {
    const current = listed.stores[store].shards;
    const res = http.post(`${BASE_URL}/admin/v1/shards`, JSON.stringify({ store, shards: current * 2 }), {
      headers: ADMIN,
    });
    const body = jsonBody(res);
    reshardChecks.add(check(res, { [`${store} doubled`]: (r) => r.status === 201 }));
    if (body?.issue_from) switchAt = Math.max(switchAt, Date.parse(body.issue_from));
  }
  console.log(
    `reshard: every store doubled at ${Math.round((Date.now() - exec.scenario.startTime) / 1000)} s; ids go to the new generations from ${new Date(switchAt).toISOString()}`,
  );
  sleep(Math.max(0, (switchAt - Date.now()) / 1000) + 2);
  rotateAndReplay(data.client, before.tokens.refresh_token, "the change");
  if (CONTROLLER) controllerChange(data);
}

/** After a switch: a refresh token from before it rotates; replaying it then revokes its family (RFC 9700 §4.14.2). */
function rotateAndReplay(client, token, change) {
  const rotated = refresh(client, token);
  const next = jsonBody(rotated);
  reshardChecks.add(
    check(rotated, {
      [`a refresh token from before ${change} rotates`]: (r) => r.status === 200 && !!next?.refresh_token,
    }),
  );
  sleep(6); // past the grace window for an identical retry
  const replay = refresh(client, token);
  reshardChecks.add(check(replay, { [`replaying it after ${change} is refused`]: (r) => r.status === 400 }));
  const afterReplay = refresh(client, next?.refresh_token || "");
  reshardChecks.add(check(afterReplay, { [`and its family is revoked (${change})`]: (r) => r.status === 400 }));
}

/**
 * The controller's change: wait until it appended a generation to the refresh store (it samples every
 * shard on each cron run and grows a store that stays above its ceiling), log in before that
 * generation is issued into, then check the same things across its switch.
 */
function controllerChange(data) {
  const deadline = Date.now() + 120_000;
  let issueFrom = 0;
  while (Date.now() < deadline) {
    const listed = jsonBody(http.get(`${BASE_URL}/admin/v1/shards`, { headers: ADMIN }));
    const refreshGens = listed?.stores?.refresh;
    if (refreshGens && refreshGens.generations.length >= 3) {
      issueFrom = Date.parse(refreshGens.issue_from[2]);
      break;
    }
    sleep(2);
  }
  reshardChecks.add(check(issueFrom, { "the controller appended a generation": (t) => t > 0 }));
  if (!issueFrom) return;
  console.log(
    `reshard: the controller appended a generation at ${Math.round((Date.now() - exec.scenario.startTime) / 1000)} s; ids go to it from ${new Date(issueFrom).toISOString()}`,
  );
  const before = login(data.client, seededEmail(data.pool, data.pool.count - 2), { record: false });
  reshardChecks.add(
    check(before, {
      "a login before the controller's change": (r) => r.ok && generationOf(r.tokens.refresh_token) === 1,
    }),
  );
  if (!before.ok) return;
  sleep(Math.max(0, (issueFrom - Date.now()) / 1000) + 2);
  rotateAndReplay(data.client, before.tokens.refresh_token, "the controller's change");
}

export function teardown(data) {
  if (!bool("KEEP_CLIENT", false)) deleteClient(data.client.client_id);
}
