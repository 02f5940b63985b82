// Overload: the five-step login offered at RATE logins/s, well past what the stack sustains, with a
// discovery probe beside it. What it measures is how refusals behave (issue 27 item 17): every
// refusal a 503 with Retry-After, how soon it comes, and how long an unrelated cheap request waits.
//
//   k6 run -e ADMIN_TOKEN=... -e RATE=150 -e RAMP=5 -e HOLD=30 k6/overload.js
//
// The summary's `http_req_duration{status:503}` is how late refusals are; `probe_discovery` how long
// discovery took meanwhile; `refusals_without_retry_after` must be 0.
import http from "k6/http";
import { Counter, Trend } from "k6/metrics";
import { createClient, deleteClient, requireAdminToken } from "./lib/admin.js";
import { BASE_URL, HOLD, num, RAMP, RATE, usersNeeded } from "./lib/config.js";
import { login } from "./lib/login.js";
import { emailForIteration, newRunId, seedUsers } from "./lib/users.js";

const probe = new Trend("probe_discovery", true);
const noRetryAfter = new Counter("refusals_without_retry_after");
const retryAfter = new Trend("refusal_retry_after_s");

const SHOW = ["p(50)>=0", "p(95)>=0", "p(99)>=0", "max>=0"];

export const options = {
  setupTimeout: "5m",
  scenarios: {
    logins: {
      executor: "ramping-arrival-rate",
      startRate: 0,
      timeUnit: "1s",
      preAllocatedVUs: Math.ceil(RATE * 4),
      maxVUs: Math.ceil(RATE * 20),
      stages: [
        { target: RATE, duration: `${RAMP}s` },
        { target: RATE, duration: `${HOLD}s` },
      ],
      exec: "logins",
    },
    probe: {
      executor: "constant-arrival-rate",
      rate: num("PROBE_RATE", 5),
      timeUnit: "1s",
      duration: `${RAMP + HOLD}s`,
      preAllocatedVUs: 20,
      maxVUs: 200,
      exec: "discovery",
    },
  },
  summaryTrendStats: ["p(50)", "p(95)", "p(99)", "max", "count"],
  // Thresholds that always hold, so the summary prints these sub-metrics' percentiles.
  thresholds: {
    "http_req_duration{status:503}": SHOW,
    "http_req_duration{status:200}": SHOW,
    probe_discovery: SHOW,
    refusals_without_retry_after: ["count==0"],
    refusal_retry_after_s: SHOW,
  },
};

export function setup() {
  requireAdminToken();
  const runId = newRunId();
  return { client: createClient(`k6 overload ${runId}`, "openid email"), pool: seedUsers(runId, usersNeeded()) };
}

/** Every 503 of the login must carry Retry-After. */
function watchRefusals() {
  return (res) => {
    if (res.status !== 503) return;
    const after = Number(res.headers["Retry-After"]);
    if (!(after >= 1)) noRetryAfter.add(1);
    else retryAfter.add(after);
  };
}

export function logins(data) {
  login(data.client, emailForIteration(data.pool), { onResponse: watchRefusals() });
}

export function discovery() {
  const res = http.get(`${BASE_URL}/.well-known/openid-configuration`, { tags: { name: "discovery" }, timeout: "30s" });
  probe.add(res.timings.duration);
}

export function teardown(data) {
  deleteClient(data.client.client_id);
}
