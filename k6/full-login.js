// The five-step mail-OTP login under load (CONTRACT §2): AuthorizeInit, EmailCodeGenerate,
// EmailCodeVerify, AuthorizeCode, Token, one login per iteration at RATE logins/s.
//
//   k6 run -e ADMIN_TOKEN=... k6/full-login.js                  (local: BASE_URL http://127.0.0.1:8787)
//   k6 run -e RATE=100 -e HOLD=120 -e BASE_URL=https://id.example.com -e MAILBOX=test ... k6/full-login.js
//
// See k6/README.md for every variable.
import exec from "k6/execution";
import { createClient, deleteClient, requireAdminToken } from "./lib/admin.js";
import { bool, cloudOptions, RAMP, usersNeeded } from "./lib/config.js";
import { login } from "./lib/login.js";
import { loginScriptOptions } from "./lib/metrics.js";
import { emailForIteration, newRunId, seedUsers } from "./lib/users.js";

const SCOPE = __ENV.SCOPE || "openid email offline_access";

/** PHASE_METRICS=1 (tools/bench.mjs): each iteration's metrics are tagged with its phase (lib/metrics.js). */
const PHASE_METRICS = bool("PHASE_METRICS", false);

export const options = loginScriptOptions({ setupTimeout: "5m", cloud: cloudOptions("Keyway full login") });

export function setup() {
  requireAdminToken();
  const runId = newRunId();
  const client = createClient(`k6 full-login ${runId}`, SCOPE);
  // Enough distinct users that the per-address resend interval (60 s) never throttles the run.
  const pool = seedUsers(runId, usersNeeded());
  return { client, pool };
}

export default function (data) {
  if (PHASE_METRICS) exec.vu.metrics.tags.phase = Date.now() - exec.scenario.startTime < RAMP * 1000 ? "ramp" : "hold";
  login(data.client, emailForIteration(data.pool));
}

export function teardown(data) {
  if (!bool("KEEP_CLIENT", false)) deleteClient(data.client.client_id);
}
