// GET /userinfo with bearer tokens (CONTRACT §3): setup logs in POOL users (default 10) and every
// iteration presents one of their access tokens. Access tokens live 10 minutes: keep RAMP + HOLD
// well below that.
//
//   k6 run -e ADMIN_TOKEN=... -e RATE=50 k6/userinfo.js

import { check } from "k6";
import exec from "k6/execution";
import http from "k6/http";
import { Rate, Trend } from "k6/metrics";
import { createClient, deleteClient, requireAdminToken } from "./lib/admin.js";
import { arrivalScenario, BASE_URL, bool, cloudOptions, P95_MS, REQUEST_TIMEOUT, SUCCESS_RATE } from "./lib/config.js";
import { jsonBody } from "./lib/http-util.js";
import { loginPool } from "./lib/login.js";
import { countFailure } from "./lib/metrics.js";
import { freshEmail, newRunId, seededEmail, seedUsers } from "./lib/users.js";

const SCOPE = __ENV.SCOPE || "openid email";

const stepUserinfo = new Trend("step_userinfo", true);
const userinfoSuccess = new Rate("userinfo_success");

export const options = {
  scenarios: { userinfo: arrivalScenario(0.05) },
  thresholds: {
    step_userinfo: [`p(95)<${P95_MS}`],
    userinfo_success: [`rate>${SUCCESS_RATE}`],
  },
  setupTimeout: "10m",
  summaryTrendStats: ["avg", "min", "med", "p(90)", "p(95)", "p(99)", "max", "count"],
  cloud: cloudOptions("Keyway userinfo"),
};

export function setup() {
  requireAdminToken();
  const runId = newRunId();
  const client = createClient(`k6 userinfo ${runId}`, SCOPE);
  const size = Number(__ENV.POOL || 10);
  const pool = seedUsers(runId, size);
  const emails = [];
  for (let i = 0; i < size; i++) emails.push(pool.mode === "signup" ? freshEmail(runId, "ui") : seededEmail(pool, i));
  const users = loginPool(client, emails, 1).map((u) => ({ email: u.email, access_token: u.tokens.access_token }));
  return { client, users };
}

export default function (data) {
  const user = data.users[exec.scenario.iterationInTest % data.users.length];
  const res = http.get(`${BASE_URL}/userinfo`, {
    headers: { Authorization: `Bearer ${user.access_token}` },
    timeout: REQUEST_TIMEOUT,
    tags: { step: "UserInfo", name: "GET /userinfo" },
  });
  stepUserinfo.add(res.timings.duration, { step: "UserInfo" });
  const body = jsonBody(res);
  const ok = check(res, {
    "UserInfo 200 {sub, email}": (r) => r.status === 200 && !!body && !!body.sub && body.email === user.email,
  });
  userinfoSuccess.add(ok);
  if (!ok) countFailure("UserInfo", res, res.status === 401 ? "session" : "other", "userinfo refused");
}

export function teardown(data) {
  if (!bool("KEEP_CLIENT", false)) deleteClient(data.client.client_id);
}
