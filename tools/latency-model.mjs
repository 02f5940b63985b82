#!/usr/bin/env node
// npm run latency-model (issue 12 item 5): where a login's time goes on the planet.
//
// 1. Measured here: a throwaway `npm start` stack with one region per Cloudflare location hint
//    (tools/lib/rtt.mjs MODEL_REGIONS) runs full logins for a user in each of the nine areas, told to
//    the dev gateway with X-Keyway-Dev-Country. Every step asks for a store trace (X-Keyway-Trace: 1,
//    refused in production): which Durable Objects it called, in which region, and which calls waited
//    for which. From it, per step, the sequential Durable Object round trips on the critical path.
// 2. Modeled: the p50 of a full login for a user in each area, given those round trips and the RTT
//    table of tools/lib/rtt.mjs, under
//      (a) first-touch hash placement: every shard lives where its first request came from, so a call
//          lands in area X with X's share of traffic, independently per shard (10,000 draws);
//      (b) Keyway's placement: every call lands where the trace says (the login's region).
//    Both add the same user-to-edge round trip per request (--edge-ms, 20) and the Worker time measured
//    here per step; only the Durable Object round trips differ.
//
//   npm run latency-model [-- --logins 3 --edge-ms 20 --rp same|enam --json out.json]
import { writeFileSync } from "node:fs";
import { startLoadStack } from "./lib/k6-stack.mjs";
import { HINTS, MODEL_REGIONS, rtt, TRAFFIC_SHARES, USERS } from "./lib/rtt.mjs";

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const LOGINS = Number(opt("logins", "3"));
const EDGE_MS = Number(opt("edge-ms", "20"));
/** Where the relying party's back end calls /token from: the user's own area, or a fixed one. */
const RP = opt("rp", "same");
const JSON_OUT = opt("json", "");
const DRAWS = 10_000;
const STEPS = ["AuthorizeInit", "EmailCodeGenerate", "EmailCodeVerify", "AuthorizeCode", "Token", "UserInfo"];
/** The prior system (docs/performance.md): 13 Durable Object calls in a row per login, first-touch placed. */
const PRIOR_CALLS = 13;

/** Parses `store@region.verb:start-end, ...` (durable-objects/contract/log.ts formatTrace). */
function parseTrace(header) {
  if (!header) return [];
  return header.split(", ").map((item) => {
    const m = /^([a-z]+)@([a-z0-9]+)\.([A-Za-z]+):(\d+)-(-?\d+)$/.exec(item);
    if (!m) throw new Error(`bad trace item ${item}`);
    return { store: m[1], region: m[2], verb: m[3], start: Number(m[4]), end: Number(m[5]) };
  });
}

/**
 * The critical path's round trips: calls grouped into rounds, a call beginning after every call of the
 * current round ended starting the next one. Calls still running when the response was sent (after
 * the response, `waitUntil`) are not on it.
 */
function rounds(calls) {
  const out = [];
  let current = null;
  for (const c of calls.filter((c) => c.end >= 0).sort((a, b) => a.start - b.start)) {
    if (current && c.start < current.end) {
      current.calls.push(c);
      current.end = Math.max(current.end, c.end);
    } else {
      current = { calls: [c], end: c.end };
      out.push(current);
    }
  }
  return out.map((r) => r.calls);
}

class Agent {
  constructor(base, geo) {
    this.base = base;
    this.geo = geo;
    this.cookies = new Map();
  }
  async fetch(path, init = {}, { geo = true } = {}) {
    const headers = new Headers(init.headers);
    headers.set("X-Keyway-Trace", "1");
    if (geo && this.geo) {
      headers.set("X-Keyway-Dev-Country", this.geo.country);
      headers.set("X-Keyway-Dev-Continent", this.geo.continent);
    }
    if (this.cookies.size) headers.set("Cookie", [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "));
    const t0 = performance.now();
    const res = await fetch(new URL(path, this.base), { ...init, headers, redirect: "manual" });
    const ms = performance.now() - t0;
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const eq = pair.indexOf("=");
      this.cookies.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    return { res, ms, trace: parseTrace(res.headers.get("x-keyway-store-trace")) };
  }
}

const b64url = (buf) => Buffer.from(buf).toString("base64url");

async function oneLogin(base, client, area) {
  const user = USERS[area];
  const browser = new Agent(base, user);
  const email = `model.${area}.${Date.now().toString(36)}.${Math.random().toString(36).slice(2, 7)}@example.com`;
  const verifier = b64url(crypto.getRandomValues(new Uint8Array(32)));
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  const steps = {};
  const q = new URLSearchParams({
    response_type: "code",
    client_id: client.client_id,
    redirect_uri: client.redirect_uris[0],
    scope: "openid email offline_access",
    state: "s",
    nonce: "n",
    code_challenge: challenge,
    code_challenge_method: "S256",
  });
  const init = await browser.fetch(`/authorize?${q}`, { headers: { Accept: "application/json" } });
  steps.AuthorizeInit = init;
  const { tx } = await init.res.json();
  const post = (path, body) =>
    browser.fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  steps.EmailCodeGenerate = await post("/email-code/generate", { tx, email });
  if (steps.EmailCodeGenerate.res.status !== 200)
    throw new Error(`generate: ${await steps.EmailCodeGenerate.res.text()}`);
  // Reading the dev mailbox is the person reading their mail: not a step.
  const mail = await (await fetch(new URL(`/__dev/mailbox/${encodeURIComponent(email)}`, base))).json();
  const code = mail.messages[0].code;
  steps.EmailCodeVerify = await post("/email-code/verify", { tx, email, code });
  const { redirect_to } = await steps.EmailCodeVerify.res.json();
  steps.AuthorizeCode = await browser.fetch(redirect_to);
  const authCode = new URL(steps.AuthorizeCode.res.headers.get("location")).searchParams.get("code");
  // The relying party's back end: its own geography (none: the default region of the stack, or --rp).
  const backEnd = new Agent(base, RP === "same" ? user : USERS[RP]);
  steps.Token = await backEnd.fetch("/token", {
    method: "POST",
    headers: {
      "Content-Type": "application/x-www-form-urlencoded",
      Authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString("base64")}`,
    },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: authCode,
      redirect_uri: client.redirect_uris[0],
      code_verifier: verifier,
    }),
  });
  if (steps.Token.res.status !== 200) throw new Error(`token: ${await steps.Token.res.text()}`);
  const tokens = await steps.Token.res.json();
  steps.UserInfo = await backEnd.fetch("/userinfo", { headers: { Authorization: `Bearer ${tokens.access_token}` } });
  for (const s of Object.values(steps)) await s.res.body?.cancel().catch(() => {});
  return Object.fromEntries(
    STEPS.map((name) => [name, { ms: steps[name].ms, rounds: rounds(steps[name].trace), trace: steps[name].trace }]),
  );
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s[Math.floor((s.length - 1) / 2)] + s[Math.ceil((s.length - 1) / 2)]) / 2 : 0;
};

/** A random area, weighted by traffic share. */
function drawArea() {
  let r = Math.random();
  for (const h of HINTS) {
    r -= TRAFFIC_SHARES[h];
    if (r <= 0) return h;
  }
  return HINTS[HINTS.length - 1];
}

/**
 * The modeled p50 of a login for a user in `area`: per step, the edge round trip and the Worker time
 * measured here, plus, per round of Durable Object calls, the slowest call's RTT from the area the
 * Worker runs in (the user's, or the relying party's for Token and UserInfo).
 */
function model(area, measured, placement) {
  const totals = [];
  for (let i = 0; i < DRAWS; i++) {
    let ms = 0;
    for (const name of STEPS) {
      const step = measured[name];
      const from = (name === "Token" || name === "UserInfo") && RP !== "same" ? RP : area;
      ms += EDGE_MS + step.workerMs;
      for (const round of step.rounds) {
        let slowest = 0;
        for (const call of round) {
          const where = placement === "first-touch" ? drawArea() : call.region;
          slowest = Math.max(slowest, rtt(from, where));
        }
        ms += slowest;
      }
    }
    totals.push(ms);
  }
  return median(totals);
}

/** The prior system: its 13 calls one after another, each on a first-touch shard, from one area. */
function priorModel(area) {
  const totals = [];
  for (let i = 0; i < DRAWS; i++) {
    let ms = 0;
    for (let c = 0; c < PRIOR_CALLS; c++) ms += rtt(area, drawArea());
    totals.push(ms);
  }
  return median(totals);
}

console.log("latency-model: starting the stack with one region per location hint ...");
const stack = await startLoadStack({ vars: { REGIONS: JSON.stringify(MODEL_REGIONS) } });
const results = {};
try {
  const admin = { Authorization: `Bearer ${stack.adminToken}`, "Content-Type": "application/json" };
  const res = await fetch(new URL("/admin/v1/clients", stack.url), {
    method: "POST",
    headers: admin,
    body: JSON.stringify({
      client_name: "latency model",
      redirect_uris: ["https://rp.example/callback"],
      scope: "openid email offline_access",
      token_endpoint_auth_method: "client_secret_basic",
      grant_types: ["authorization_code", "refresh_token"],
    }),
  });
  if (res.status !== 201) throw new Error(`client: ${res.status} ${await res.text()}`);
  const client = await res.json();
  for (const area of HINTS) {
    const logins = [];
    // One warm-up login per area (bundles, first objects), then the measured ones.
    await oneLogin(stack.url, client, area);
    for (let i = 0; i < LOGINS; i++) logins.push(await oneLogin(stack.url, client, area));
    const measured = {};
    for (const name of STEPS) {
      const first = logins[0][name];
      // The same shape every time (checked): rounds and regions of the first login stand for all.
      for (const l of logins) {
        const shape = (x) =>
          x[name].rounds
            .map((r) =>
              r
                .map((c) => `${c.store}@${c.region}`)
                .sort()
                .join("+"),
            )
            .join(" > ");
        const a = shape(logins[0]);
        const b = shape(l);
        if (a.replace(/@[a-z]+/g, "") !== b.replace(/@[a-z]+/g, ""))
          console.warn(`latency-model: ${area} ${name}: calls differ between logins: ${a} vs ${b}`);
      }
      measured[name] = {
        rounds: first.rounds.map((r) => r.map((c) => ({ store: c.store, region: c.region, verb: c.verb }))),
        // Local time of the step: the Worker's work plus local Durable Object calls (well under 1 ms each).
        workerMs: median(logins.map((l) => l[name].ms)),
      };
    }
    results[area] = {
      measured,
      keyway_ms: model(area, measured, "keyway"),
      first_touch_ms: model(area, measured, "first-touch"),
      prior_ms: priorModel(area),
    };
    console.log(
      `latency-model: ${area.padEnd(4)} round trips ${STEPS.map((s) => measured[s].rounds.length).join("/")}` +
        `  regions ${[...new Set(STEPS.flatMap((s) => measured[s].rounds.flat().map((c) => c.region)))].join(",")}` +
        `  p50 first-touch ${results[area].first_touch_ms.toFixed(0)} ms, Keyway ${results[area].keyway_ms.toFixed(0)} ms`,
    );
  }
} finally {
  await stack.dispose();
}

// The report: a markdown table for docs/performance.md.
const any = results[HINTS[0]].measured;
console.log(
  `\n### Measured: sequential Durable Object round trips per step (${LOGINS} logins per area, plus one warm-up)\n`,
);
console.log("| step | round trips | calls (store.verb) |\n| --- | --- | --- |");
for (const s of STEPS)
  console.log(
    `| ${s} | ${any[s].rounds.length} | ${any[s].rounds.map((r) => r.map((c) => `${c.store}.${c.verb}`).join(" + ")).join(" → ") || "none"} |`,
  );
console.log(
  `\n### Modeled p50 of a full login (${STEPS.length} requests, ${EDGE_MS} ms user-to-edge each, ` +
    `relying party back end: ${RP === "same" ? "in the user's area" : RP})\n`,
);
console.log(
  "| user in | Worker time here (ms) | (a) first-touch placement | (b) Keyway placement | every DO call in |\n| --- | --- | --- | --- | --- |",
);
for (const area of HINTS) {
  const r = results[area];
  const worker = STEPS.reduce((a, s) => a + r.measured[s].workerMs, 0);
  const regions = [...new Set(STEPS.flatMap((s) => r.measured[s].rounds.flat().map((c) => c.region)))].join(", ");
  console.log(
    `| ${area} (${USERS[area].city}) | ${worker.toFixed(1)} | ${r.first_touch_ms.toFixed(0)} ms | ${r.keyway_ms.toFixed(0)} ms | ${regions} |`,
  );
}
console.log(
  `\nThe prior system's ${PRIOR_CALLS} calls in a row, first-touch placed, Durable Object time alone: ` +
    HINTS.map((h) => `${h} ${results[h].prior_ms.toFixed(0)} ms`).join(", "),
);
if (JSON_OUT)
  writeFileSync(JSON_OUT, `${JSON.stringify({ edge_ms: EDGE_MS, rp: RP, logins: LOGINS, results }, null, 2)}\n`);
