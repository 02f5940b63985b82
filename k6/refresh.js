// Refresh-token rotation under load (CONTRACT §3): setup logs in one user per VU; each VU keeps
// its own refresh token and rotates that family once per iteration (a VU never runs two
// iterations at once, so a family is never raced). A timed-out or 5xx rotation is retried once
// with the same token, which the grace window must answer with the same result.
//
//   k6 run -e ADMIN_TOKEN=... -e RATE=20 k6/refresh.js

import { check } from "k6";
import exec from "k6/execution";
import http from "k6/http";
import { Counter, Rate, Trend } from "k6/metrics";
import { createClient, deleteClient, requireAdminToken } from "./lib/admin.js";
import { arrivalScenario, BASE_URL, bool, cloudOptions, P95_MS, REQUEST_TIMEOUT, SUCCESS_RATE } from "./lib/config.js";
import { basicAuth, jsonBody } from "./lib/http-util.js";
import { login, loginPool } from "./lib/login.js";
import { countFailure } from "./lib/metrics.js";
import { freshEmail, newRunId, seededEmail, seedUsers } from "./lib/users.js";

const SCOPE = __ENV.SCOPE || "openid email offline_access";
const scenario = arrivalScenario(0.05);

const stepRefresh = new Trend("step_refresh", true);
const refreshSuccess = new Rate("refresh_success");
const graceRetries = new Counter("refresh_grace_retries");
const relogins = new Counter("refresh_relogins");

export const options = {
  scenarios: { refresh: scenario },
  thresholds: {
    step_refresh: [`p(95)<${P95_MS}`],
    refresh_success: [`rate>${SUCCESS_RATE}`],
  },
  setupTimeout: "10m",
  summaryTrendStats: ["avg", "min", "med", "p(90)", "p(95)", "p(99)", "max", "count"],
  cloud: cloudOptions("Keyway refresh rotation"),
};

export function setup() {
  requireAdminToken();
  const runId = newRunId();
  const client = createClient(`k6 refresh ${runId}`, SCOPE);
  // One family per VU that can exist (POOL overrides, but must be >= MAX_VUS to keep families unshared).
  const size = Number(__ENV.POOL || scenario.maxVUs);
  const pool = seedUsers(runId, size);
  const emails = [];
  for (let i = 0; i < size; i++) emails.push(pool.mode === "signup" ? freshEmail(runId, "rf") : seededEmail(pool, i));
  const families = loginPool(client, emails, 1).map((u) => u.tokens.refresh_token);
  return { client, runId, families };
}

let current = null; // this VU's refresh token
let n = 0;

function rotate(client, token) {
  return http.post(
    `${BASE_URL}/token`,
    { grant_type: "refresh_token", refresh_token: token },
    {
      headers: { Authorization: basicAuth(client.client_id, client.client_secret) },
      timeout: REQUEST_TIMEOUT,
      tags: { step: "Refresh", name: "POST /token refresh_token" },
    },
  );
}

export default function (data) {
  if (current === null) current = data.families[(exec.vu.idInTest - 1) % data.families.length];
  let res = rotate(data.client, current);
  stepRefresh.add(res.timings.duration, { step: "Refresh" });
  if (res.status === 0 || res.status >= 500) {
    // Duplicate retry inside the grace window: must not be taken for reuse.
    graceRetries.add(1);
    countFailure("Refresh", res, "server", "rotation failed, retrying with the same token");
    res = rotate(data.client, current);
  }
  const body = jsonBody(res);
  const ok = check(res, {
    "Refresh 200 with new refresh_token": (r) =>
      r.status === 200 && !!body && !!body.access_token && !!body.refresh_token && body.refresh_token !== current,
  });
  refreshSuccess.add(ok);
  if (ok) {
    current = body.refresh_token;
    return;
  }
  countFailure("Refresh", res, "code", "rotation refused");
  if (res.status === 400 && body && body.error === "invalid_grant") {
    // The family is gone: start a new one with a first-time address (the VU's own address is in its resend interval).
    relogins.add(1);
    const again = login(data.client, freshEmail(data.runId, `rl${n++}`), { record: false });
    if (again.ok) current = again.tokens.refresh_token;
  }
}

export function teardown(data) {
  if (!bool("KEEP_CLIENT", false)) deleteClient(data.client.client_id);
}
