// The five-step login's requests against the floor (tools/lib/floor-login.mjs): Workers that make a
// login's operations and nothing else, so tools/bench.mjs (FLOOR=keyway,minimal) measures what the
// operations alone cost the runtime, side by side with Keyway. Same metrics, phases and thresholds
// as full-login.js; each request only has to answer as the step's would (status, and the value the
// next step needs).
//
//   k6 run -e BASE_URL=http://127.0.0.1:<the floor's port> k6/floor-login.js
import { check } from "k6";
import exec from "k6/execution";
import http from "k6/http";
import { BASE_URL, bool, DIRECT_HOST, MAILBOX_EXTRA_READS, RAMP, REQUEST_TIMEOUT, routed } from "./lib/config.js";
import { header, jsonBody, queryOf } from "./lib/http-util.js";
import {
  countFailure,
  errors,
  fullFlow,
  loginScriptOptions,
  loginSuccess,
  stepTrend,
  verifiedRedirect,
} from "./lib/metrics.js";
import { newRunId } from "./lib/users.js";

const PHASE_METRICS = bool("PHASE_METRICS", false);
const HEADERS = DIRECT_HOST ? { Host: DIRECT_HOST } : {};
const JSON_HEADERS = { ...HEADERS, "Content-Type": "application/json", Accept: "application/json" };

export const options = loginScriptOptions();

export function setup() {
  const runId = newRunId();
  // tools/bench.mjs starts a rung's clock at this line.
  console.log(`seeded 0 users: the floor keeps none (run ${runId})`);
  return { runId };
}

function params(step, name, headers = HEADERS) {
  return { timeout: REQUEST_TIMEOUT, redirects: 0, headers, tags: { step, name } };
}

function timed(step, res) {
  stepTrend[step].add(res.timings.duration, { step });
  return res.timings.duration;
}

function mailbox(email, step) {
  return http.get(routed(`${BASE_URL}/mailbox?email=${encodeURIComponent(email)}`), params(step, "GET /mailbox"));
}

function login(email) {
  const done = (ok, failedStep, total) => {
    loginSuccess.add(ok, failedStep ? { failed_step: failedStep } : {});
    if (ok) fullFlow.add(total);
    return ok;
  };
  let res = http.get(
    routed(`${BASE_URL}/authorize?state=${exec.scenario.iterationInTest}`),
    params("AuthorizeInit", "GET /authorize"),
  );
  const init = timed("AuthorizeInit", res);
  if (!check(res, { "AuthorizeInit 200": (r) => r.status === 200 })) {
    countFailure("AuthorizeInit", res, "session", "no transaction");
    return done(false, "AuthorizeInit");
  }

  res = http.post(
    routed(`${BASE_URL}/generate`),
    JSON.stringify({ email }),
    params("EmailCodeGenerate", "POST generate", JSON_HEADERS),
  );
  const gen = timed("EmailCodeGenerate", res);
  if (!check(res, { "EmailCodeGenerate 200 {sent:true}": (r) => r.status === 200 && jsonBody(r)?.sent === true })) {
    countFailure("EmailCodeGenerate", res, "session", "code not sent");
    return done(false, "EmailCodeGenerate");
  }

  res = mailbox(email, "Mailbox");
  const code = jsonBody(res)?.messages?.[0]?.code;
  if (typeof code !== "string") {
    errors.otp.add(1, { step: "Mailbox" });
    return done(false, "Mailbox");
  }
  for (let i = 0; i < MAILBOX_EXTRA_READS; i++) mailbox(email, "MailboxExtra");

  res = http.post(
    routed(`${BASE_URL}/verify`),
    JSON.stringify({ email, code }),
    params("EmailCodeVerify", "POST verify", JSON_HEADERS),
  );
  const ver = timed("EmailCodeVerify", res);
  const redirectTo = verifiedRedirect(res);
  if (redirectTo === null) return done(false, "EmailCodeVerify");

  res = http.get(
    routed(`${BASE_URL}${redirectTo.replace(/^https?:\/\/[^/]+/, "")}`),
    params("AuthorizeCode", "GET /code"),
  );
  const authz = timed("AuthorizeCode", res);
  const q = queryOf(header(res, "Location") || "");
  if (!check(res, { "AuthorizeCode 302 with code": (r) => r.status === 302 && !!q.code })) {
    countFailure("AuthorizeCode", res, "session", "no code");
    return done(false, "AuthorizeCode");
  }

  res = http.post(
    routed(`${BASE_URL}/token`),
    { grant_type: "authorization_code", code: q.code },
    params("Token", "POST /token", { ...HEADERS, Accept: "application/json" }),
  );
  const tok = timed("Token", res);
  const body = jsonBody(res);
  if (!check(res, { "Token 200 with tokens": (r) => r.status === 200 && !!body?.access_token && !!body?.id_token })) {
    countFailure("Token", res, "other", "no tokens");
    return done(false, "Token");
  }
  return done(true, null, init + gen + ver + authz + tok);
}

export default function (data) {
  if (PHASE_METRICS) exec.vu.metrics.tags.phase = Date.now() - exec.scenario.startTime < RAMP * 1000 ? "ramp" : "hold";
  login(`floor-${data.runId}-${exec.scenario.iterationInTest}@loadtest.keyway.test`);
}
