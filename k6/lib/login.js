import { check } from "k6";
import http from "k6/http";
import { BASE_URL, COUNTRIES, DIRECT_HOST, ID_TOKEN_ALG, ISSUER, REQUEST_TIMEOUT, routed } from "./config.js";
import { basicAuth, header, jsonBody, qs, queryOf, withoutQuery } from "./http-util.js";
import { readCode } from "./mailbox.js";
import {
  countFailure,
  errors,
  fullFlow,
  logFailure,
  loginSuccess,
  loginsInRegion,
  mailboxWait,
  stepTrend,
} from "./metrics.js";
import { jwtHeader, jwtPayload, pkcePair, randomUrlSafe } from "./pkce.js";

const JSON_HEADERS = { "Content-Type": "application/json", Accept: "application/json" };

/** The country this VU's current login comes from (COUNTRIES), as headers for the dev gateway. */
let devGeo = {};
/** Per VU, from a random start: the VUs together spread their logins over COUNTRIES. */
let logins = Math.floor(Math.random() * 1000);

function params(step, name, extra = {}) {
  const p = Object.assign({ timeout: REQUEST_TIMEOUT, redirects: 0, tags: { step, name } }, extra);
  if (devGeo["X-Keyway-Dev-Country"]) p.headers = Object.assign({}, devGeo, extra.headers || {});
  if (DIRECT_HOST) p.headers = Object.assign({ Host: DIRECT_HOST }, p.headers || {});
  return p;
}

function record(opts, step, res) {
  if (opts.record !== false) stepTrend[step].add(res.timings.duration, { step });
  // k6/overload.js looks at every step's answer (a refusal's Retry-After).
  if (opts.onResponse) opts.onResponse(res);
  return res.timings.duration;
}

/**
 * Where a client's endpoints are and the issuer its tokens name: the origin's (BASE_URL, ISSUER), or a
 * tenant's (`client.base`, `client.issuer`: `<origin>/t/<tenant>`, see lib/admin.js createTenant).
 */
const baseOf = (client) => (client?.base ? client.base : BASE_URL);
const issuerOf = (client) => (client?.issuer ? client.issuer : ISSUER);

function cookieValue(res, name) {
  const list = res.cookies[name];
  return list?.length ? list[0].value : null;
}

/** A new authorization request: its query parameters and the secrets the client keeps. */
export function newAuthRequest(client, extra = {}) {
  const { verifier, challenge } = pkcePair();
  const state = randomUrlSafe(16);
  const nonce = randomUrlSafe(16);
  const query = Object.assign(
    {
      response_type: "code",
      client_id: client.client_id,
      redirect_uri: client.redirect_uri,
      scope: client.scope,
      state,
      nonce,
      code_challenge: challenge,
      code_challenge_method: "S256",
    },
    extra,
  );
  return { url: `${baseOf(client)}/authorize?${qs(query)}`, state, nonce, verifier };
}

/** Step 1. Returns { ok, tx, ms }. */
export function authorizeInit(request, opts = {}) {
  const step = "AuthorizeInit";
  const res = http.get(
    routed(request.url),
    params(step, "GET /authorize", { headers: { Accept: "application/json" } }),
  );
  const ms = record(opts, step, res);
  const body = jsonBody(res);
  const tx = body && typeof body.tx === "string" ? body.tx : null;
  const ok = check(res, {
    "AuthorizeInit 200 {tx}": (r) => r.status === 200 && tx !== null,
    // The tx is `<tx id>.<sealed request>`; the cookie binds the browser by the id.
    "AuthorizeInit sets kw_tx = tx id": (r) => tx !== null && cookieValue(r, "kw_tx") === tx.split(".")[0],
  });
  if (!ok) countFailure(step, res, "session", "no login transaction");
  return { ok, tx, ms };
}

/** Step 2. Returns { ok, ms, sentAt } (sentAt: when the request went out, for the mailbox). */
export function emailCodeGenerate(tx, email, opts = {}) {
  const step = "EmailCodeGenerate";
  const sentAt = Date.now();
  const res = http.post(
    routed(`${opts.base || BASE_URL}/email-code/generate`),
    JSON.stringify({ tx, email }),
    params(step, "POST /email-code/generate", { headers: JSON_HEADERS }),
  );
  const ms = record(opts, step, res);
  const body = jsonBody(res);
  const ok = check(res, {
    "EmailCodeGenerate 200 {sent:true}": (r) => r.status === 200 && body !== null && body.sent === true,
  });
  if (!ok) countFailure(step, res, "session", "code not sent");
  return { ok, ms, sentAt };
}

/** Step 3. Returns { ok, redirectTo, ms }. */
export function emailCodeVerify(tx, email, code, opts = {}) {
  const step = "EmailCodeVerify";
  const res = http.post(
    routed(`${opts.base || BASE_URL}/email-code/verify`),
    JSON.stringify({ tx, email, code }),
    params(step, "POST /email-code/verify", { headers: JSON_HEADERS }),
  );
  const ms = record(opts, step, res);
  const body = jsonBody(res);
  const redirectTo = body && typeof body.redirect_to === "string" ? body.redirect_to : null;
  const ok = check(res, {
    "EmailCodeVerify 200 {redirect_to}": (r) => r.status === 200 && redirectTo !== null,
    "EmailCodeVerify sets kw_session": (r) => r.status === 200 && !!cookieValue(r, "kw_session"),
  });
  if (!ok) countFailure(step, res, "session", "code not accepted");
  return { ok, redirectTo, ms };
}

/**
 * Step 4 (redirect_to, or an authorization request with prompt=none): a 302 to the redirect URI
 * with code, the request's state and iss. Returns { ok, code, error, ms }.
 */
export function authorizeCode(url, client, state, opts = {}) {
  const step = "AuthorizeCode";
  const name = opts.name || "GET /authorize?tx";
  const res = http.get(routed(url), params(step, name));
  const ms = record(opts, step, res);
  const location = header(res, "Location") || "";
  const q = queryOf(location);
  const ok = check(res, {
    "AuthorizeCode 302 to redirect_uri with code": (r) =>
      r.status === 302 && withoutQuery(location) === client.redirect_uri && !!q.code,
    "AuthorizeCode state and iss match": () => q.state === state && q.iss === issuerOf(client),
  });
  if (!ok) countFailure(step, res, "session", `no code (Location: ${location.slice(0, 200)})`);
  return { ok, code: ok ? q.code : null, error: q.error || null, ms };
}

/** Step 5. Returns { ok, tokens, ms }. */
export function tokenExchange(client, code, verifier, nonce, opts = {}) {
  const step = "Token";
  const res = http.post(
    routed(`${baseOf(client)}/token`),
    { grant_type: "authorization_code", code, redirect_uri: client.redirect_uri, code_verifier: verifier },
    params(step, "POST /token", {
      headers: { Authorization: basicAuth(client.client_id, client.client_secret), Accept: "application/json" },
    }),
  );
  const ms = record(opts, step, res);
  const body = jsonBody(res);
  const wantRefresh = client.scope.split(" ").includes("offline_access");
  const ok = check(res, {
    "Token 200 with access_token, id_token": (r) =>
      r.status === 200 && body !== null && !!body.access_token && !!body.id_token && body.token_type === "Bearer",
    "Token refresh_token with offline_access": (r) => r.status === 200 && (!wantRefresh || !!body?.refresh_token),
  });
  if (!ok) {
    countFailure(step, res, "other", "no tokens");
    return { ok, tokens: null, ms };
  }
  const claims = jwtPayload(body.id_token);
  const alg = jwtHeader(body.id_token)?.alg;
  const claimsOk = check(claims, {
    "id_token iss, aud, nonce": (c) =>
      !!c && c.iss === issuerOf(client) && c.aud === client.client_id && c.nonce === nonce,
    "id_token signed with ID_TOKEN_ALG": () => alg === ID_TOKEN_ALG,
  });
  if (!claimsOk) {
    errors.other.add(1, { step });
    logFailure(step, `id_token wrong: alg ${alg}, claims ${JSON.stringify(claims)}`, null);
    return { ok: false, tokens: null, ms };
  }
  return { ok: true, tokens: body, ms };
}

/**
 * The whole mail-OTP login (CONTRACT §2) in this VU's cookie jar, which it clears first.
 * opts.record=false keeps it out of the step Trends, full_flow and login_success (setup logins).
 * Returns { ok, tokens, failedStep, email, tx } (tx: the login transaction's id, once it has one).
 */
export function login(client, email, loginOpts = {}) {
  const opts = Object.assign({ base: baseOf(client) }, loginOpts);
  const rec = opts.record !== false;
  if (opts.clearJar !== false) http.cookieJar().clear(BASE_URL);
  devGeo = COUNTRIES.length ? { "X-Keyway-Dev-Country": COUNTRIES[logins++ % COUNTRIES.length] } : {};
  let tx = null;
  const done = (ok, failedStep, tokens, total) => {
    if (rec) {
      loginSuccess.add(ok, failedStep ? { failed_step: failedStep } : {});
      if (ok) fullFlow.add(total);
      // A refresh token starts with its family's id: `gr_[<tenant>~]<region>_...`.
      const region = ok && /^gr_(?:[a-z0-9-]+~)?([a-z][a-z0-9]+)_/.exec(String(tokens?.refresh_token))?.[1];
      if (region) loginsInRegion.add(1, { region });
    }
    return { ok, tokens: tokens || null, failedStep, email, tx };
  };

  const request = newAuthRequest(client, opts.authParams || {});
  const init = authorizeInit(request, opts);
  if (!init.ok) return done(false, "AuthorizeInit");
  tx = init.tx;

  const gen = emailCodeGenerate(init.tx, email, opts);
  if (!gen.ok) return done(false, "EmailCodeGenerate");

  const mail = readCode(email, gen.sentAt, client);
  if (!mail.code) {
    errors.otp.add(1, { step: "Mailbox" });
    logFailure("Mailbox", `no new code for ${email} after ${mail.waitedMs} ms`, mail.last);
    return done(false, "Mailbox");
  }
  if (rec) mailboxWait.add(mail.waitedMs);

  const verify = emailCodeVerify(init.tx, email, mail.code, opts);
  if (!verify.ok) return done(false, "EmailCodeVerify");

  const authz = authorizeCode(verify.redirectTo, client, request.state, opts);
  if (!authz.ok) return done(false, "AuthorizeCode");

  const tok = tokenExchange(client, authz.code, request.verifier, request.nonce, opts);
  if (!tok.ok) return done(false, "Token");

  return done(true, null, tok.tokens, init.ms + gen.ms + verify.ms + authz.ms + tok.ms);
}

/** Logs in users one after another (setup of refresh/userinfo). Throws if too few succeed. */
export function loginPool(client, emails, minOk = emails.length) {
  const started = Date.now();
  const out = [];
  for (const email of emails) {
    const r = login(client, email, { record: false });
    if (r.ok) out.push({ email, tokens: r.tokens });
    else console.warn(`setup login of ${email} failed at ${r.failedStep}`);
  }
  console.log(`logged in ${out.length}/${emails.length} users in ${Date.now() - started} ms`);
  if (out.length < minOk) throw new Error(`only ${out.length} of ${emails.length} setup logins succeeded`);
  return out;
}
