// The device authorization grant (RFC 8628, issue 14) under load: per iteration a device asks for
// codes, a person opens verification_uri_complete, signs in with an emailed code and allows it, and
// the device's next poll gets its tokens. One device sign-in per iteration at RATE/s.
//
//   k6 run -e ADMIN_TOKEN=... -e RATE=20 k6/device-flow.js
//
// Mail is read like full-login.js's (the dev mailbox locally, MAILBOX=test against a deployment).
import { check } from "k6";
import http from "k6/http";
import { Rate, Trend } from "k6/metrics";
import { deleteClient, registerClient } from "./lib/admin.js";
import {
  arrivalScenario,
  BASE_URL,
  bool,
  cloudOptions,
  P95_MS,
  REQUEST_TIMEOUT,
  SUCCESS_RATE,
  usersNeeded,
} from "./lib/config.js";
import { header, jsonBody } from "./lib/http-util.js";
import { emailCodeGenerate, emailCodeVerify } from "./lib/login.js";
import { readCode } from "./lib/mailbox.js";
import { countFailure } from "./lib/metrics.js";
import { emailForIteration, newRunId, seedUsers } from "./lib/users.js";

const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
const FORM = { "Content-Type": "application/x-www-form-urlencoded" };

const stepDeviceAuthorization = new Trend("step_device_authorization", true);
const stepDevicePage = new Trend("step_device_page", true);
const stepDeviceDecision = new Trend("step_device_decision", true);
const stepDeviceToken = new Trend("step_device_token", true);
const deviceFlow = new Trend("device_flow", true);
const deviceSuccess = new Rate("device_success");

export const options = {
  scenarios: { device: arrivalScenario(1.0) },
  thresholds: { device_flow: [`p(95)<${P95_MS}`], device_success: [`rate>${SUCCESS_RATE}`] },
  setupTimeout: "5m",
  summaryTrendStats: ["avg", "min", "med", "p(90)", "p(95)", "p(99)", "max", "count"],
  cloud: cloudOptions("Keyway device flow"),
};

export function setup() {
  const runId = newRunId();
  const body = registerClient({
    client_name: `k6 device-flow ${runId}`,
    token_endpoint_auth_method: "none",
    grant_types: [DEVICE_GRANT, "refresh_token"],
    scope: "openid email offline_access",
  });
  return { client_id: body.client_id, pool: seedUsers(runId, usersNeeded()) };
}

const timed = (trend, res) => {
  trend.add(res.timings.duration);
  return res.timings.duration;
};

function fail(step, res, what) {
  countFailure(step, res, "other", what);
  deviceSuccess.add(false);
}

export default function (data) {
  // Each iteration is a new person's browser: no session from the last one.
  http.cookieJar().clear(BASE_URL);
  const email = emailForIteration(data.pool);
  let total = 0;

  const start = http.post(
    `${BASE_URL}/device_authorization`,
    `client_id=${encodeURIComponent(data.client_id)}&scope=${encodeURIComponent("openid email offline_access")}`,
    {
      headers: FORM,
      timeout: REQUEST_TIMEOUT,
      tags: { step: "DeviceAuthorization", name: "POST /device_authorization" },
    },
  );
  total += timed(stepDeviceAuthorization, start);
  const device = jsonBody(start);
  if (!check(start, { "DeviceAuthorization 200": (r) => r.status === 200 && !!device && !!device.device_code }))
    return fail("DeviceAuthorization", start, "no device code");

  const page = http.get(device.verification_uri_complete, {
    timeout: REQUEST_TIMEOUT,
    tags: { step: "DevicePage", name: "GET /device?user_code" },
  });
  total += timed(stepDevicePage, page);
  const tx = /name="tx" value="([^"]+)"/.exec(page.body || "");
  if (!check(page, { "DevicePage 200 login form": (r) => r.status === 200 && !!tx }))
    return fail("DevicePage", page, "no login page");

  const generated = emailCodeGenerate(tx[1], email, { record: false });
  total += generated.ms;
  if (!generated.ok) return deviceSuccess.add(false);
  const mail = readCode(email, generated.sentAt);
  if (!mail.code) return fail("Mailbox", mail.last, "no mail");
  const verified = emailCodeVerify(tx[1], email, mail.code, { record: false });
  total += verified.ms;
  if (!verified.ok) return deviceSuccess.add(false);

  const back = http.get(verified.redirectTo, {
    redirects: 0,
    timeout: REQUEST_TIMEOUT,
    tags: { step: "DevicePage", name: "GET /authorize?tx (device)" },
  });
  total += timed(stepDevicePage, back);
  const consent = http.get(`${BASE_URL}${header(back, "Location") || ""}`, {
    timeout: REQUEST_TIMEOUT,
    tags: { step: "DevicePage", name: "GET /device?user_code (signed in)" },
  });
  total += timed(stepDevicePage, consent);
  if (!check(consent, { "DevicePage consent": (r) => r.status === 200 && (r.body || "").includes("/device/decision") }))
    return fail("DevicePage", consent, "no consent page");

  const decision = http.post(
    `${BASE_URL}/device/decision`,
    `user_code=${encodeURIComponent(device.user_code)}&decision=approve`,
    {
      headers: Object.assign({ Origin: BASE_URL }, FORM),
      timeout: REQUEST_TIMEOUT,
      tags: { step: "DeviceDecision", name: "POST /device/decision" },
    },
  );
  total += timed(stepDeviceDecision, decision);
  if (!check(decision, { "DeviceDecision 200": (r) => r.status === 200 }))
    return fail("DeviceDecision", decision, "not allowed");

  // The device's first poll after the approval (its earlier ones would be authorization_pending).
  const token = http.post(
    `${BASE_URL}/token`,
    `grant_type=${encodeURIComponent(DEVICE_GRANT)}&device_code=${encodeURIComponent(device.device_code)}&client_id=${encodeURIComponent(data.client_id)}`,
    { headers: FORM, timeout: REQUEST_TIMEOUT, tags: { step: "DeviceToken", name: "POST /token device_code" } },
  );
  total += timed(stepDeviceToken, token);
  const tokens = jsonBody(token);
  if (
    !check(token, {
      "DeviceToken 200 tokens": (r) => r.status === 200 && !!tokens && !!tokens.id_token && !!tokens.refresh_token,
    })
  )
    return fail("DeviceToken", token, "no tokens");
  deviceFlow.add(total);
  deviceSuccess.add(true);
}

export function teardown(data) {
  if (!bool("KEEP_CLIENT", false)) deleteClient(data.client_id);
}
