// POST /token with grant_type=client_credentials (RFC 6749 §4.4, issue 14): a machine client asks for
// its own access token at RATE requests/s, and every 10th token is introspected by the same client.
// PEER=oidc-provider runs the token requests against tools/peers/oidc-provider (no introspection).
//
//   k6 run -e ADMIN_TOKEN=... -e RATE=200 k6/client-credentials.js
//
// The same script runs on k6 Cloud against a deployment (BASE_URL, ADMIN_TOKEN); see k6/README.md.
import { check } from "k6";
import encoding from "k6/encoding";
import exec from "k6/execution";
import http from "k6/http";
import { Rate, Trend } from "k6/metrics";
import { deleteClient, registerClient } from "./lib/admin.js";
import { arrivalScenario, BASE_URL, bool, cloudOptions, P95_MS, REQUEST_TIMEOUT, SUCCESS_RATE } from "./lib/config.js";
import { jsonBody } from "./lib/http-util.js";
import { countFailure } from "./lib/metrics.js";
import { newRunId } from "./lib/users.js";

const SCOPE = __ENV.SCOPE || "reports:read reports:write";

const stepToken = new Trend("step_client_token", true);
const stepIntrospect = new Trend("step_introspect", true);
const tokenSuccess = new Rate("client_token_success");

export const options = {
  scenarios: { client_credentials: arrivalScenario(0.05) },
  thresholds: {
    step_client_token: [`p(95)<${P95_MS}`],
    client_token_success: [`rate>${SUCCESS_RATE}`],
  },
  summaryTrendStats: ["avg", "min", "med", "p(90)", "p(95)", "p(99)", "max", "count"],
  cloud: cloudOptions("Keyway client credentials"),
};

/** PEER=oidc-provider: the same requests against tools/peers/oidc-provider (its token path is /token too). */
const PEER = __ENV.PEER === "oidc-provider";

export function setup() {
  if (PEER) {
    const peer = jsonBody(http.post(`${BASE_URL}/__peer/machine-client`));
    return { client_id: peer.client_id, basic: encoding.b64encode(`${peer.client_id}:${peer.client_secret}`) };
  }
  const body = registerClient({
    client_name: `k6 client-credentials ${newRunId()}`,
    token_endpoint_auth_method: "client_secret_basic",
    grant_types: ["client_credentials"],
    scope: SCOPE,
  });
  return { client_id: body.client_id, basic: encoding.b64encode(`${body.client_id}:${body.client_secret}`) };
}

export default function (data) {
  const headers = { Authorization: `Basic ${data.basic}`, "Content-Type": "application/x-www-form-urlencoded" };
  const res = http.post(`${BASE_URL}/token`, `grant_type=client_credentials&scope=${encodeURIComponent(SCOPE)}`, {
    headers,
    timeout: REQUEST_TIMEOUT,
    tags: { step: "ClientToken", name: "POST /token client_credentials" },
  });
  stepToken.add(res.timings.duration, { step: "ClientToken" });
  const body = jsonBody(res);
  const ok = check(res, {
    "ClientToken 200 {access_token, scope}": (r) =>
      r.status === 200 && !!body && !!body.access_token && body.scope === SCOPE,
  });
  tokenSuccess.add(ok);
  if (!ok) {
    countFailure("ClientToken", res, "other", "client_credentials refused");
    return;
  }
  // The peer keeps no JWT access token, so it cannot introspect one: only Keyway's are introspected.
  if (PEER || exec.scenario.iterationInTest % 10 !== 0) return;
  const intro = http.post(`${BASE_URL}/introspect`, `token=${encodeURIComponent(body.access_token)}`, {
    headers,
    timeout: REQUEST_TIMEOUT,
    tags: { step: "Introspect", name: "POST /introspect" },
  });
  stepIntrospect.add(intro.timings.duration, { step: "Introspect" });
  const ib = jsonBody(intro);
  if (!check(intro, { "Introspect active": (r) => r.status === 200 && !!ib && ib.active === true }))
    countFailure("Introspect", intro, "other", "introspection said inactive");
}

export function teardown(data) {
  if (!PEER && !bool("KEEP_CLIENT", false)) deleteClient(data.client_id);
}
