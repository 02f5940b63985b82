// Silent authentication (CONTRACT §2.4, prompt=none with a live session): each VU logs in once
// (its first iteration, not counted in the step Trends) and then, once per iteration, sends a new
// authorization request with prompt=none, expecting a 302 with a code; with REDEEM (default on)
// it also redeems the code at /token. A VU whose session is gone (login_required) logs in again.
//
//   k6 run -e ADMIN_TOKEN=... -e RATE=20 k6/silent-auth.js
import { Rate, Trend } from "k6/metrics";
import { createClient, deleteClient, requireAdminToken } from "./lib/admin.js";
import { arrivalScenario, bool, cloudOptions, P95_MS, SUCCESS_RATE } from "./lib/config.js";
import { authorizeCode, login, newAuthRequest, tokenExchange } from "./lib/login.js";
import { emailForVU, freshEmail, newRunId, seedUsers } from "./lib/users.js";

const SCOPE = __ENV.SCOPE || "openid email";
const REDEEM = bool("REDEEM", true);
const scenario = arrivalScenario(REDEEM ? 0.1 : 0.05);

const vuLogin = new Trend("vu_login", true);
const silentFlow = new Trend("silent_flow", true);
const silentSuccess = new Rate("silent_success");

export const options = {
  scenarios: { silent_auth: scenario },
  // The session cookie must outlive the iteration (k6 empties each VU's jar between iterations by default).
  noCookiesReset: true,
  thresholds: {
    step_authorize_code: [`p(95)<${P95_MS}`],
    silent_success: [`rate>${SUCCESS_RATE}`],
  },
  setupTimeout: "5m",
  summaryTrendStats: ["avg", "min", "med", "p(90)", "p(95)", "p(99)", "max", "count"],
  cloud: cloudOptions("Keyway silent auth"),
};

export function setup() {
  requireAdminToken();
  const runId = newRunId();
  const client = createClient(`k6 silent-auth ${runId}`, SCOPE);
  return { client, pool: seedUsers(runId, scenario.maxVUs) };
}

let loggedIn = false;
let logins = 0;

export default function (data) {
  if (!loggedIn) {
    // The VU's own seeded address first; after that a fresh one (the resend interval would refuse a second code).
    const email = logins === 0 ? emailForVU(data.pool) : freshEmail(data.pool.runId, `sa${logins}`);
    logins++;
    const started = Date.now();
    const r = login(data.client, email, { record: false });
    vuLogin.add(Date.now() - started);
    loggedIn = r.ok;
    return;
  }
  const request = newAuthRequest(data.client, { prompt: "none" });
  const authz = authorizeCode(request.url, data.client, request.state, { name: "GET /authorize prompt=none" });
  let ok = authz.ok;
  let total = authz.ms;
  if (!ok && authz.error === "login_required") loggedIn = false;
  if (ok && REDEEM) {
    const tok = tokenExchange(data.client, authz.code, request.verifier, request.nonce);
    ok = tok.ok;
    total += tok.ms;
  }
  silentSuccess.add(ok);
  if (ok) silentFlow.add(total);
}

export function teardown(data) {
  if (!bool("KEEP_CLIENT", false)) deleteClient(data.client.client_id);
}
