// Overload: the five-step login offered at RATE logins/s, well past what the stack sustains, with a
// discovery probe beside it. What it measures is how refusals behave (issue 27 item 17, issue 44 item
// 3): every refusal a 503 or 429 with Retry-After, how soon it comes, whether a login already admitted
// is refused later on (it should not be), how long admitted logins take, and how long an unrelated
// cheap request waits. `npm run overload` (tools/overload.mjs) runs it and reads its summary.
//
//   k6 run -e ADMIN_TOKEN=... -e RATE=150 -e RAMP=5 -e HOLD=30 k6/overload.js
//
// Metrics besides k6's own and the login's (full_flow, login_success, step_*):
//   refused_ms                  how long each refusal (503 or 429, at any step) took to come
//   refused_new, refused_underway   refusals of a new login (AuthorizeInit) and of a login under way (steps 2-5)
//   answers_ok, answers_503, answers_429, answers_failed   every login answer by status (failed: other 5xx, timeouts)
//   refusals_without_retry_after    must be 0
//   probe_discovery             discovery's latency meanwhile
import http from "k6/http";
import { Counter, Trend } from "k6/metrics";
import { createClient, deleteClient, requireAdminToken } from "./lib/admin.js";
import { BASE_URL, HOLD, num, RAMP, RATE, usersNeeded } from "./lib/config.js";
import { login } from "./lib/login.js";
import { emailForIteration, newRunId, seedUsers } from "./lib/users.js";

const probe = new Trend("probe_discovery", true);
const noRetryAfter = new Counter("refusals_without_retry_after");
const retryAfter = new Trend("refusal_retry_after_s");
const refusedMs = new Trend("refused_ms", true);
const refusedNew = new Counter("refused_new");
const refusedUnderway = new Counter("refused_underway");
const answers = {
  ok: new Counter("answers_ok"),
  503: new Counter("answers_503"),
  429: new Counter("answers_429"),
  failed: new Counter("answers_failed"),
};

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
    refused_ms: SHOW,
    full_flow: SHOW,
  },
};

export function setup() {
  requireAdminToken();
  const runId = newRunId();
  return { client: createClient(`k6 overload ${runId}`, "openid email"), pool: seedUsers(runId, usersNeeded()) };
}

/**
 * Counts each answer of one login by status; every refusal (503 or 429) must carry Retry-After. The
 * first answer is AuthorizeInit's (the mailbox reads do not come here), so a refusal after it is of a
 * login already under way.
 */
function watchAnswers() {
  let seen = 0;
  return (res) => {
    const first = seen++ === 0;
    if (res.status === 503 || res.status === 429) {
      answers[res.status].add(1);
      refusedMs.add(res.timings.duration);
      (first ? refusedNew : refusedUnderway).add(1);
      const after = Number(res.headers["Retry-After"]);
      if (!(after >= 1)) noRetryAfter.add(1);
      else retryAfter.add(after);
    } else if (res.status === 0 || res.status >= 500) answers.failed.add(1);
    else answers.ok.add(1);
  };
}

export function logins(data) {
  login(data.client, emailForIteration(data.pool), { onResponse: watchAnswers() });
}

export function discovery() {
  const res = http.get(`${BASE_URL}/.well-known/openid-configuration`, { tags: { name: "discovery" }, timeout: "30s" });
  probe.add(res.timings.duration);
}

export function teardown(data) {
  deleteClient(data.client.client_id);
}
