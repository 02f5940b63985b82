// The same five-step mail-code login as full-login.js, against the node-oidc-provider peer
// (tools/peers/oidc-provider/server.mjs), with the same metrics, phases and thresholds, so
// tools/bench.mjs (PEER=oidc-provider) reads both summaries alike.
//
//   PORT=9090 node tools/peers/oidc-provider/server.mjs &
//   k6 run -e BASE_URL=http://127.0.0.1:9090 k6/peer-oidc-provider.js
//
// Per login, as on Keyway: the authorization request (PKCE, state, nonce), a code request, the
// mailbox read, the code check, the resume URL that answers with the code, and the token request
// with the verifier; the token response must hold an access token, an RS256 ID token with the nonce,
// and a refresh token. The peer wants `prompt=consent` for `offline_access` (OIDC Core §11); its
// interaction grants consent with the login, so no extra step. Its client is public (PKCE only);
// Keyway's load client is confidential (client_secret_basic), a little more work on Keyway's side.
import { check } from "k6";
import exec from "k6/execution";
import http from "k6/http";
import { BASE_URL, bool, RAMP, REQUEST_TIMEOUT } from "./lib/config.js";
import { header, jsonBody, qs, queryOf, withoutQuery } from "./lib/http-util.js";
import { readCode } from "./lib/mailbox.js";
import {
  countFailure,
  errors,
  fullFlow,
  logFailure,
  loginScriptOptions,
  loginSuccess,
  mailboxWait,
  stepTrend,
  verifiedRedirect,
} from "./lib/metrics.js";
import { jwtHeader, jwtPayload, pkcePair, randomUrlSafe } from "./lib/pkce.js";
import { newRunId } from "./lib/users.js";

const PHASE_METRICS = bool("PHASE_METRICS", false);
const SCOPE = "openid email offline_access";
const JSON_HEADERS = { "Content-Type": "application/json", Accept: "application/json" };

export const options = loginScriptOptions({ setupTimeout: "1m" });

export function setup() {
  const res = http.post(`${BASE_URL}/__peer/client`);
  const client = jsonBody(res);
  if (res.status !== 200 || !client?.client_id) throw new Error(`the peer gave no client: ${res.status}`);
  const runId = newRunId();
  console.log(`seeded 0 users: the peer creates each on its first login (run ${runId})`);
  return { client, runId };
}

function params(step, name, extra = {}) {
  return Object.assign({ timeout: REQUEST_TIMEOUT, redirects: 0, tags: { step, name } }, extra);
}

function timed(step, res) {
  stepTrend[step].add(res.timings.duration, { step });
  return res.timings.duration;
}

function login(client, email) {
  http.cookieJar().clear(BASE_URL);
  const done = (ok, failedStep, total) => {
    loginSuccess.add(ok, failedStep ? { failed_step: failedStep } : {});
    if (ok) fullFlow.add(total);
    return ok;
  };
  const { verifier, challenge } = pkcePair();
  const state = randomUrlSafe(16);
  const nonce = randomUrlSafe(16);
  const query = {
    response_type: "code",
    client_id: client.client_id,
    redirect_uri: client.redirect_uri,
    scope: SCOPE,
    state,
    nonce,
    code_challenge: challenge,
    code_challenge_method: "S256",
    prompt: "consent",
  };

  // 1. The authorization request: a redirect to the login interaction, whose uid is the transaction.
  let res = http.get(`${BASE_URL}/auth?${qs(query)}`, params("AuthorizeInit", "GET /auth"));
  const init = timed("AuthorizeInit", res);
  const interaction = header(res, "Location") || "";
  if (
    !check(res, {
      "AuthorizeInit 303 to the interaction": (r) => r.status === 303 && interaction.includes("/interaction/"),
    })
  ) {
    countFailure("AuthorizeInit", res, "session", "no interaction");
    return done(false, "AuthorizeInit");
  }
  const base = `${BASE_URL}${interaction.replace(/^https?:\/\/[^/]+/, "")}`;

  // 2. A code for the address.
  const sentAt = Date.now();
  res = http.post(
    `${base}/generate`,
    JSON.stringify({ email }),
    params("EmailCodeGenerate", "POST generate", { headers: JSON_HEADERS }),
  );
  const gen = timed("EmailCodeGenerate", res);
  if (!check(res, { "EmailCodeGenerate 200 {sent:true}": (r) => r.status === 200 && jsonBody(r)?.sent === true })) {
    countFailure("EmailCodeGenerate", res, "session", "code not sent");
    return done(false, "EmailCodeGenerate");
  }
  const mail = readCode(email, sentAt);
  if (!mail.code) {
    errors.otp.add(1, { step: "Mailbox" });
    logFailure("Mailbox", `no new code for ${email}`, mail.last);
    return done(false, "Mailbox");
  }
  mailboxWait.add(mail.waitedMs);

  // 3. The code: the login and its grant, answered with the URL that resumes the authorization.
  res = http.post(
    `${base}/verify`,
    JSON.stringify({ email, code: mail.code }),
    params("EmailCodeVerify", "POST verify", { headers: JSON_HEADERS }),
  );
  const ver = timed("EmailCodeVerify", res);
  const redirectTo = verifiedRedirect(res);
  if (redirectTo === null) return done(false, "EmailCodeVerify");

  // 4. The resume: a redirect to the client with code, state and iss.
  res = http.get(
    `${BASE_URL}${redirectTo.replace(/^https?:\/\/[^/]+/, "")}`,
    params("AuthorizeCode", "GET /auth/{uid}"),
  );
  const authz = timed("AuthorizeCode", res);
  const location = header(res, "Location") || "";
  const q = queryOf(location);
  if (
    !check(res, {
      "AuthorizeCode redirect to redirect_uri with code": (r) =>
        (r.status === 302 || r.status === 303) && withoutQuery(location) === client.redirect_uri && !!q.code,
      "AuthorizeCode state matches": () => q.state === state,
    })
  ) {
    countFailure("AuthorizeCode", res, "session", `no code (Location: ${location.slice(0, 200)})`);
    return done(false, "AuthorizeCode");
  }

  // 5. The token request.
  res = http.post(
    `${BASE_URL}/token`,
    {
      grant_type: "authorization_code",
      code: q.code,
      redirect_uri: client.redirect_uri,
      code_verifier: verifier,
      client_id: client.client_id,
    },
    params("Token", "POST /token", { headers: { Accept: "application/json" } }),
  );
  const tok = timed("Token", res);
  const body = jsonBody(res);
  const claims = body?.id_token ? jwtPayload(body.id_token) : null;
  const ok = check(res, {
    "Token 200 with access_token, id_token, refresh_token": (r) =>
      r.status === 200 && !!body?.access_token && !!body?.id_token && !!body?.refresh_token,
    "id_token RS256 with aud and nonce": () =>
      jwtHeader(body?.id_token)?.alg === "RS256" && claims?.aud === client.client_id && claims?.nonce === nonce,
  });
  if (!ok) {
    countFailure("Token", res, "other", "no tokens");
    return done(false, "Token");
  }
  return done(true, null, init + gen + ver + authz + tok);
}

export default function (data) {
  if (PHASE_METRICS) exec.vu.metrics.tags.phase = Date.now() - exec.scenario.startTime < RAMP * 1000 ? "ramp" : "hold";
  const i = exec.scenario.iterationInTest;
  login(data.client, `peer-${data.runId}-${i}@loadtest.keyway.test`);
}
