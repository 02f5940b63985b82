import { check } from "k6";
import { Counter, Rate, Trend } from "k6/metrics";
import { arrivalScenario, bool, num, P95_MS, SUCCESS_RATE } from "./config.js";
import { describe, jsonBody } from "./http-util.js";

/** Per-step latency (ms, the step's HTTP request only; the mailbox read is never counted). */
export const stepTrend = {
  AuthorizeInit: new Trend("step_authorize_init", true),
  EmailCodeGenerate: new Trend("step_email_code_generate", true),
  EmailCodeVerify: new Trend("step_email_code_verify", true),
  AuthorizeCode: new Trend("step_authorize_code", true),
  Token: new Trend("step_token", true),
};

/** The five steps added up (no mailbox wait), for successful logins. */
export const fullFlow = new Trend("full_flow", true);
/** How long the code took to show up in the mailbox after EmailCodeGenerate answered. */
export const mailboxWait = new Trend("mailbox_wait", true);
/** Successful logins by the region their refresh token names (issue 12; `COUNTRIES`, `EXPECT_REGIONS`). */
export const loginsInRegion = new Counter("logins_in_region");
export const loginSuccess = new Rate("login_success");

export const errors = {
  rateLimited: new Counter("errors_rate_limited"), // any 429
  server: new Counter("errors_server"), // 5xx, timeouts, connection failures
  otp: new Counter("errors_otp"), // invalid_code, too_many_attempts-free OTP failures, no mail
  session: new Counter("errors_session"), // login transaction / session failures
  code: new Counter("errors_code"), // invalid_grant at the token endpoint
  other: new Counter("errors_other"), // anything else unexpected (invalid_client, bad claims, ...)
};

const LOG_LIMIT = num("LOG_FAILURES", 5);
let logged = 0;

/** Logs the first LOG_FAILURES failures of each VU, so a run says what went wrong without flooding. */
export function logFailure(step, what, res) {
  if (logged >= LOG_LIMIT) return;
  logged++;
  console.warn(`[${step}] ${what}: ${res ? describe(res) : ""}`);
}

/**
 * Counts one failed step in the right error counter. `kind` is the counter to use when the response
 * itself (429, 5xx, timeout) does not decide it. Returns the counter's name.
 */
export function countFailure(step, res, kind, what) {
  const tags = { step };
  const body = res ? jsonBody(res) : null;
  let bucket = kind;
  if (res && res.status === 429) bucket = "rateLimited";
  else if (res && (res.status === 0 || res.status >= 500)) bucket = "server";
  else if (body && body.error === "invalid_code") bucket = "otp";
  else if (body && body.error === "invalid_grant" && step !== "AuthorizeInit") bucket = "code";
  errors[bucket].add(1, tags);
  logFailure(step, `${what} [${bucket}]`, res);
  return bucket;
}

/**
 * EmailCodeVerify's answer on a peer or the floor (peer-oidc-provider.js, floor-login.js): the
 * `redirect_to` it must hold, or null with the failure counted.
 */
export function verifiedRedirect(res) {
  const body = jsonBody(res);
  const redirectTo = body && typeof body.redirect_to === "string" ? body.redirect_to : null;
  if (check(res, { "EmailCodeVerify 200 {redirect_to}": (r) => r.status === 200 && redirectTo !== null }))
    return redirectTo;
  countFailure("EmailCodeVerify", res, "session", "code not accepted");
  return null;
}

/**
 * PHASE_METRICS=1 (tools/bench.mjs): every metric of an iteration is tagged with the phase it started in,
 * `ramp` or `hold`, and the summary gets hold-only submetrics (the thresholds below always pass; they
 * exist because k6 reports a submetric only when a threshold names it).
 */
export function holdSubmetrics() {
  const trends = [
    "full_flow",
    "step_authorize_init",
    "step_email_code_generate",
    "step_email_code_verify",
    "step_authorize_code",
    "step_token",
    "mailbox_wait",
    "iteration_duration",
  ];
  const counters = [
    "iterations",
    "http_reqs",
    "errors_rate_limited",
    "errors_server",
    "errors_otp",
    "errors_session",
    "errors_code",
    "errors_other",
  ];
  const out = { "login_success{phase:hold}": ["rate>=0"] };
  for (const t of trends) out[`${t}{phase:hold}`] = ["max>=0"];
  for (const c of counters) out[`${c}{phase:hold}`] = ["count>=0"];
  // 0 is a timeout or a refused connection.
  for (const status of [0, 400, 429, 500, 502, 503]) out[`http_reqs{phase:hold,status:${status}}`] = ["count>=0"];
  return out;
}

/**
 * The options of a five-step login script (full-login.js, peer-oidc-provider.js): one login per
 * iteration at RATE, the pass rule as thresholds, and with PHASE_METRICS=1 (tools/bench.mjs) the
 * hold-only submetrics.
 */
export function loginScriptOptions(extra = {}) {
  return {
    scenarios: { full_login: arrivalScenario(1) },
    thresholds: {
      full_flow: [`p(95)<${P95_MS}`],
      login_success: [`rate>${SUCCESS_RATE}`],
      ...(bool("PHASE_METRICS", false) ? holdSubmetrics() : {}),
      // EXPECT_REGIONS=global,apac,eu: logins must land in each (the region their refresh token names).
      ...Object.fromEntries(
        (__ENV.EXPECT_REGIONS || "")
          .split(",")
          .filter(Boolean)
          .map((r) => [`logins_in_region{region:${r.trim()}}`, ["count>0"]]),
      ),
    },
    summaryTrendStats: ["avg", "min", "med", "p(90)", "p(95)", "p(99)", "max", "count"],
    ...extra,
  };
}
