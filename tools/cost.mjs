#!/usr/bin/env node
// `npm run cost` (issue 28 item 1): what Cloudflare bills for a returning user's login, by line, from
// counters measured over a run. It starts the `npm start` stack with a real mail transport (the `http`
// transport, Resend's API, against a receiver this script starts), signs LOGINS users in once to make
// them returning users, waits out the resend interval, then signs them in again and reads
// `GET /admin/v1/stats` before and after that second pass (its `billing` block). It prices each
// counter per login with the table in docs/cost.md (the one place prices are kept, with their sources
// and the date each was read), and prints the cost per million logins by line.
//
// Rows written later (expiry sweeps, the audit outbox's flushes, D1 retention) are counted when the
// login makes them: a shard reports the rows a sweep or a flush will delete (`pending_deletes`), and
// every audit event written to D1 is one row retention deletes.
//
// Local-only figures are kept apart (issue 28 item 4). The local workerd process runs the Workers,
// every Durable Object, Miniflare's D1 and Rate Limiting emulation and the dev gateway on one thread.
// The second pass is profiled isolate by isolate (tools/lib/isolate-cpu.mjs): the CPU in the Keyway
// Workers' isolates is the Workers CPU production bills, and is in the total; the CPU in the Durable
// Object isolates (billed by request, not CPU), in local-only isolates and outside any isolate (the
// runtime's own work) is reported line by line, apart.
//
//   LOGINS=3000 CONCURRENCY=8 npm run cost     (writes docs/benchmarks/<date>-cost.md unless OUT=-;
//                                              PROFILE_TICK_US, the profilers' interval, 4000)
//
// PASSKEYS=1 (issue 42): the first pass also makes each user a passkey (the offer after the code, a
// software authenticator, tools/lib/soft-authenticator.mjs), and a third pass signs the returning users
// in with it, measured the same way: the bill of a passkey login beside the code login's, mail included.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { freePort } from "../scripts/stack.mjs";
import { byRole, openIsolateProfiler } from "./lib/isolate-cpu.mjs";
import { REPO, raisedPolicy, startLoadStack } from "./lib/k6-stack.mjs";
import { CLK_TCK, cpuTicks, threadClock, workerdPids } from "./lib/proc.mjs";
import { SoftAuthenticator, signInChallengeOf } from "./lib/soft-authenticator.mjs";

const LOGINS = Number(process.env.LOGINS || 3000);
const CONCURRENCY = Number(process.env.CONCURRENCY || 8);
const RESEND_INTERVAL_S = 10;
/** The profilers' tick: each interrupts workerd's thread, so a coarse one disturbs the run least. */
const PROFILE_TICK_US = Number(process.env.PROFILE_TICK_US || 4000);
const PASSKEYS = process.env.PASSKEYS === "1";
/** Each user's passkey, made in the first pass (PASSKEYS=1). */
const authenticators = new Map();

// ---- Prices: the marked table of docs/cost.md.
const COST_DOC = join(REPO, "docs", "cost.md");
const priceTable = /<!-- prices -->([\s\S]*?)<!-- \/prices -->/.exec(readFileSync(COST_DOC, "utf8"))?.[1];
if (!priceTable) throw new Error("docs/cost.md has no <!-- prices --> table");
/** @type {Map<string, { item: string, per: number, price: number, source: string, read: string }>} */
const prices = new Map();
for (const line of priceTable.split("\n")) {
  const cells = line.split("|").map((c) => c.trim());
  if (cells.length < 7 || !/^`[a-z0-9_]+`$/.test(cells[1] ?? "")) continue;
  const [, key, item, per, price, source, read] = cells;
  prices.set(key.slice(1, -1), {
    item,
    per: Number(per.replace(/,/g, "")),
    price: Number(price.replace("$", "")),
    source,
    read,
  });
}
const price = (key) => {
  const p = prices.get(key);
  if (!p) throw new Error(`docs/cost.md has no price for ${key}`);
  return p;
};

// ---- The mail provider: Resend's POST /emails, as the http transport calls it.
/** @type {Map<string, string>} */
const codes = new Map();
let mails = 0;
const receiver = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    mails++;
    const code = /^(\d{6})\b/.exec(body.subject ?? "")?.[1];
    if (code) codes.set(body.to[0], code);
    res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ id: `cost-${mails}` }));
  });
});
await new Promise((r) => receiver.listen(0, "127.0.0.1", r));

const inspectorPort = await freePort();
const stack = await startLoadStack({
  inspectorPort,
  policy: { ...raisedPolicy(), resend_interval_seconds: RESEND_INTERVAL_S },
  vars: {
    MAIL_TRANSPORT: "http",
    MAIL_HTTP_URL: `http://127.0.0.1:${receiver.address().port}/emails`,
    MAIL_API_KEY: "re_local_cost_run",
  },
});
const admin = async (path, init = {}) => {
  const res = await fetch(`${stack.url}/admin/v1${path}`, {
    ...init,
    headers: { Authorization: `Bearer ${stack.adminToken}`, "Content-Type": "application/json" },
  });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json();
};

const client = await admin("/clients", {
  method: "POST",
  body: JSON.stringify({
    client_name: "cost run",
    redirect_uris: ["https://rp.cost.example/callback"],
    token_endpoint_auth_method: "none",
  }),
});

const b64url = (buf) => Buffer.from(buf).toString("base64url");
async function pkce() {
  const verifier = b64url(crypto.getRandomValues(new Uint8Array(32)));
  return { verifier, challenge: b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))) };
}

/** A browser's fetch: a cookie jar, redirects not followed. */
function browser() {
  const jar = new Map();
  return async (url, init = {}) => {
    const headers = new Headers(init.headers);
    if (jar.size) headers.set("Cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "));
    const res = await fetch(url, { ...init, headers, redirect: "manual" });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const eq = pair.indexOf("=");
      jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    return res;
  };
}

/** AuthorizeInit (CONTRACT §2 step 1) as an API client: the login transaction and its PKCE verifier. */
async function authorizeInit(go) {
  const { verifier, challenge } = await pkce();
  const q = new URLSearchParams({
    response_type: "code",
    client_id: client.client_id,
    redirect_uri: client.redirect_uris[0],
    scope: "openid email offline_access",
    state: "s",
    code_challenge: challenge,
    code_challenge_method: "S256",
  });
  const init = await go(`${stack.url}/authorize?${q}`, { headers: { Accept: "application/json" } });
  if (init.status !== 200) throw new Error(`authorize ${init.status}`);
  const { tx } = await init.json();
  return { tx, verifier };
}

/**
 * The five steps of CONTRACT §2, with a cookie jar; the code read from the mail provider. With
 * `enrol`, the code is posted as a person's browser does (the passkey offer comes back) and a passkey
 * is made before the login goes on (issue 42).
 */
async function login(email, enrol = false) {
  const go = browser();
  const post = (path, body) =>
    go(`${stack.url}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
    });
  const { tx, verifier } = await authorizeInit(go);
  codes.delete(email);
  const gen = await post("/email-code/generate", { tx, email });
  if (gen.status !== 200) throw new Error(`generate ${gen.status} ${await gen.text()}`);
  let code = codes.get(email);
  for (let i = 0; i < 200 && !code; i++) {
    await new Promise((r) => setTimeout(r, 25));
    code = codes.get(email);
  }
  if (!code) throw new Error(`no mail for ${email}`);
  let redirectTo;
  if (enrol) {
    const form = (path, body) =>
      go(`${stack.url}${path}`, {
        method: "POST",
        headers: {
          "Content-Type": "application/x-www-form-urlencoded",
          Origin: stack.url,
          "Sec-Fetch-Dest": "document",
          "Sec-Fetch-Mode": "navigate",
        },
        body: new URLSearchParams(body),
      });
    const offer = await form("/email-code/verify", { tx, email, code });
    const html = await offer.text();
    if (offer.status !== 200) throw new Error(`verify ${offer.status}`);
    const fromHtml = (v) => v.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));
    const options = JSON.parse(fromHtml(/data-options="([^"]*)"/.exec(html)?.[1] ?? "null"));
    const done = fromHtml(/name="done" value="([^"]*)"/.exec(html)?.[1] ?? "");
    const authenticator = await SoftAuthenticator.create();
    const credential = await authenticator.register({
      challenge: options.challenge,
      origin: stack.url,
      rpId: options.rp.id,
      userHandle: options.user.id,
    });
    const made = await form("/passkey/register", { tx, done, credential: JSON.stringify(credential) });
    if (made.status !== 303) throw new Error(`passkey/register ${made.status} ${await made.text()}`);
    authenticators.set(email, authenticator);
    redirectTo = made.headers.get("location");
  } else {
    const ver = await post("/email-code/verify", { tx, email, code });
    if (ver.status !== 200) throw new Error(`verify ${ver.status}`);
    redirectTo = (await ver.json()).redirect_to;
  }
  await finish(go, redirectTo, verifier);
}

/** A returning user's passkey login (issue 42): authorize, one touch, redirect_to, the token. */
async function passkeyLogin(email) {
  const go = browser();
  const { tx, verifier } = await authorizeInit(go);
  const credential = await authenticators.get(email).assert({
    challenge: signInChallengeOf(tx),
    origin: stack.url,
    rpId: new URL(stack.url).hostname,
  });
  const ver = await go(`${stack.url}/passkey/verify`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify({ tx, credential }),
  });
  if (ver.status !== 200) throw new Error(`passkey/verify ${ver.status} ${await ver.text()}`);
  await finish(go, (await ver.json()).redirect_to, verifier);
}

/** Steps 4 and 5: the code at the client's redirect, then the tokens. */
async function finish(go, redirectTo, verifier) {
  const back = await go(redirectTo);
  const authCode = new URL(back.headers.get("location")).searchParams.get("code");
  const token = await fetch(`${stack.url}/token`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: authCode,
      redirect_uri: client.redirect_uris[0],
      code_verifier: verifier,
      client_id: client.client_id,
    }),
  });
  if (token.status !== 200) throw new Error(`token ${token.status}`);
}

async function pass(users, one = (email) => login(email)) {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < users.length) await one(users[next++]);
    }),
  );
}

const users = Array.from({ length: LOGINS }, (_, i) => `cost-${i}-${Date.now().toString(36)}@example.com`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
try {
  console.log(`first pass: ${LOGINS} users sign up${PASSKEYS ? " and make a passkey" : ""}`);
  await pass(users, (email) => login(email, PASSKEYS));
  // Past the resend interval, and every flush of the first pass done.
  await sleep((RESEND_INTERVAL_S + 6) * 1000);
  /** One measured pass: what `run` cost per login, by billed counter and store, and the isolates' CPU. */
  const measurePass = async (label, run) => {
    const pids = workerdPids();
    const ticks = () => pids.reduce((a, p) => a + (cpuTicks(p) ?? 0), 0);
    const profiler = await openIsolateProfiler(inspectorPort, PROFILE_TICK_US);
    const beforeAll = await admin("/stats");
    const before = beforeAll.billing;
    const mailsBefore = mails;
    await profiler.start();
    const threads = threadClock(pids);
    const cpu0 = ticks();
    const t0 = Date.now();
    console.log(`${label}: ${LOGINS} returning users sign in (${CONCURRENCY} at a time)`);
    await run();
    const seconds = (Date.now() - t0) / 1000;
    const cpuMs = ((ticks() - cpu0) / CLK_TCK) * 1000;
    const threadMs = threads()[0]?.ms ?? 0;
    const isolates = await profiler.stop();
    profiler.close();
    const roles = byRole(isolates);
    // The audit outboxes flush 5 s after their last event; the mail's code_sent events come after it.
    await sleep(8_000);
    const afterAll = await admin("/stats");
    const after = afterAll.billing;
    // Where the Durable Object rows go: by store, written now and deleted later.
    const byStore = Object.keys(afterAll.stores)
      .map((store) => {
        const d = (k) => ((afterAll.stores[store]?.[k] ?? 0) - (beforeAll.stores[store]?.[k] ?? 0)) / LOGINS;
        return { store, calls: d("total"), rows: d("rows_written") + d("alarms_set"), later: d("pending_deletes") };
      })
      .filter((r) => r.calls || r.rows || r.later);
    const per = (k) => (after[k] - before[k]) / LOGINS;
    // The second stats call is itself a Worker request.
    const m = {
      worker_requests: (after.worker_requests - before.worker_requests - 1) / LOGINS,
      durable_object_requests: per("durable_object_requests"),
      durable_object_rows_written: per("durable_object_rows_written"),
      durable_object_later_deletes: per("durable_object_pending_deletes"),
      durable_object_rows_read: per("durable_object_rows_read"),
      durable_object_alarms_set: per("durable_object_alarms_set"),
      d1_rows_written: per("d1_rows_written"),
      d1_rows_read: per("d1_rows_read"),
      d1_queries: per("d1_queries"),
      durable_object_storage_bytes: per("durable_object_storage_bytes"),
      d1_storage_bytes: per("d1_size_bytes"),
      mails: (mails - mailsBefore) / LOGINS,
      local_cpu_ms: cpuMs / LOGINS,
      thread_cpu_ms: threadMs / LOGINS,
      worker_cpu_ms: roles.worker / LOGINS,
      durable_object_cpu_ms: roles["durable-object"] / LOGINS,
      local_only_cpu_ms: roles["local-only"] / LOGINS,
      runtime_cpu_ms: (threadMs - roles.worker - roles["durable-object"] - roles["local-only"]) / LOGINS,
    };
    return { m, byStore, seconds, isolates };
  };
  const { m, byStore, seconds, isolates } = await measurePass("second pass", () => pass(users));
  // PASSKEYS=1: a third pass, the same users with their passkeys (no mail), measured the same way.
  const passkeyRun = PASSKEYS ? await measurePass("third pass (passkeys)", () => pass(users, passkeyLogin)) : null;

  // ---- Cost per million logins, by line.
  const line = (label, quantity, key, unitPerLogin) => {
    const p = price(key);
    return { label, quantity, unit: unitPerLogin, usd: ((quantity * 1e6) / p.per) * p.price, key };
  };
  const GB = 1e9;
  const linesOf = (m) => [
    line("Workers requests", m.worker_requests, "worker_requests", "requests"),
    line(
      "Durable Object requests (calls and alarm runs)",
      m.durable_object_requests,
      "durable_object_requests",
      "requests",
    ),
    line(
      "Durable Object rows written (alarms set included)",
      m.durable_object_rows_written,
      "durable_object_rows_written",
      "rows",
    ),
    line(
      "Durable Object rows deleted later (sweeps, outbox flushes)",
      Math.max(0, m.durable_object_later_deletes),
      "durable_object_rows_written",
      "rows",
    ),
    line("Durable Object rows read", m.durable_object_rows_read, "durable_object_rows_read", "rows"),
    line("D1 rows written", m.d1_rows_written, "d1_rows_written", "rows"),
    line("D1 rows read", m.d1_rows_read, "d1_rows_read", "rows"),
    line(
      "Durable Object storage, a month (bytes a login leaves)",
      Math.max(0, m.durable_object_storage_bytes) / GB,
      "durable_object_storage_gb_month",
      "GB-month",
    ),
    line(
      "D1 storage, a month (bytes a login leaves)",
      Math.max(0, m.d1_storage_bytes) / GB,
      "d1_storage_gb_month",
      "GB-month",
    ),
    line("Workers CPU (measured in the Keyway Workers' isolates)", m.worker_cpu_ms, "worker_cpu_ms", "CPU-ms"),
  ];
  const lines = linesOf(m);
  const total = lines.reduce((a, l) => a + l.usd, 0);
  const mail = line("Mail (Cloudflare Email Sending)", m.mails, "email_sending", "messages");
  const local = [
    ["the whole workerd process", m.local_cpu_ms],
    ["of it, the thread that runs every isolate", m.thread_cpu_ms],
    ["on that thread, the Keyway Workers' isolates (in the total above)", m.worker_cpu_ms],
    ["on that thread, the Durable Objects' isolate (billed by request, not CPU)", m.durable_object_cpu_ms],
    [
      `on that thread, local-only isolates: ${isolates
        .filter((i) => i.role === "local-only" && i.samples > 0)
        .sort((a, b) => b.ms - a.ms)
        .map((i) => `${i.name} ${(i.ms / LOGINS).toFixed(2)}`)
        .join(", ")}`,
      m.local_only_cpu_ms,
    ],
    ["on that thread, outside any isolate (the runtime's own work)", m.runtime_cpu_ms],
  ];
  const rowsWritten = m.durable_object_rows_written + Math.max(0, m.durable_object_later_deletes) + m.d1_rows_written;

  const fmt = (n, d = 2) => (Math.abs(n) >= 100 ? n.toFixed(0) : n.toFixed(d));
  const table = [
    "| line | per login | unit | $ per million logins |",
    "| --- | --- | --- | --- |",
    ...lines.map(
      (l) =>
        `| ${l.label} | ${l.unit === "GB-month" ? `${fmt(l.quantity * GB, 0)} bytes` : fmt(l.quantity)} | ${l.unit === "GB-month" ? "GB-month" : l.unit} | ${l.usd.toFixed(2)} |`,
    ),
    `| **Total, Cloudflare charges (mail apart)** | | | **${total.toFixed(2)}** |`,
    `| Mail, separately | ${fmt(mail.quantity)} | messages | ${mail.usd.toFixed(2)} |`,
  ].join("\n");
  const localTable = [
    "| local CPU, measured over the second pass | ms per login |",
    "| --- | --- |",
    ...local.map(([label, ms]) => `| ${label} | ${Number(ms).toFixed(2)} |`),
  ].join("\n");
  const tick = isolates[0]?.tickUs ?? 0;
  const git = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: REPO, encoding: "utf8" }).trim();
  const summary = `${LOGINS} returning users' logins in ${seconds.toFixed(1)} s (${(LOGINS / seconds).toFixed(1)}/s, ${CONCURRENCY} at a time), commit ${git}, ${new Date().toISOString()}.
Billed rows written per login, later deletes included: ${rowsWritten.toFixed(2)} (Durable Objects ${m.durable_object_rows_written.toFixed(2)} + ${Math.max(0, m.durable_object_later_deletes).toFixed(2)} later, D1 ${m.d1_rows_written.toFixed(2)}, whose audit months retention drops whole); Durable Object requests ${m.durable_object_requests.toFixed(2)} (alarms set ${m.durable_object_alarms_set.toFixed(2)}); D1 statements ${m.d1_queries.toFixed(2)}.`;
  const stores = [
    "| store | calls per login | rows written per login (alarms set included) | rows deleted later per login |",
    "| --- | --- | --- | --- |",
    ...byStore.map((r) => `| ${r.store} | ${r.calls.toFixed(2)} | ${r.rows.toFixed(2)} | ${r.later.toFixed(2)} |`),
  ].join("\n");
  const localNote = `Local only (issue 28 item 4), not in the total: the isolates' CPU from V8's sampling profiler during the pass (tools/lib/isolate-cpu.mjs, one sample per ${tick} µs tick while an isolate is entered); the process and thread from /proc, with the profilers running.`;
  // Issue 42 (PASSKEYS=1): the passkey login's bill beside the code login's, mail included.
  let passkeys = "";
  if (passkeyRun) {
    const pk = passkeyRun.m;
    const pkLines = linesOf(pk);
    const pkMail = line("Mail (Cloudflare Email Sending)", pk.mails, "email_sending", "messages");
    const pkTotal = pkLines.reduce((a, l) => a + l.usd, 0);
    const rowsOf = (x) =>
      x.durable_object_rows_written + Math.max(0, x.durable_object_later_deletes) + x.d1_rows_written;
    const q = (l) => (l.unit === "GB-month" ? `${fmt(l.quantity * GB, 0)} bytes` : fmt(l.quantity));
    passkeys = [
      `## A passkey login beside the code login (issue 42)`,
      "",
      `${LOGINS} returning users signed in again with their passkeys in ${passkeyRun.seconds.toFixed(1)} s. Billed rows written per login, later deletes included: code ${rowsWritten.toFixed(2)}, passkey ${rowsOf(pk).toFixed(2)}; Durable Object requests: code ${m.durable_object_requests.toFixed(2)}, passkey ${pk.durable_object_requests.toFixed(2)}; D1 statements: code ${m.d1_queries.toFixed(2)}, passkey ${pk.d1_queries.toFixed(2)}; mail: code ${fmt(m.mails)}, passkey ${fmt(pk.mails)}.`,
      "",
      "| line | unit | code login, per login | passkey login, per login | code login, $ per million | passkey login, $ per million |",
      "| --- | --- | --- | --- | --- | --- |",
      ...lines.map((l, i) => {
        const p = pkLines[i];
        return `| ${l.label} | ${l.unit} | ${q(l)} | ${q(p)} | ${l.usd.toFixed(2)} | ${p.usd.toFixed(2)} |`;
      }),
      `| Mail (Cloudflare Email Sending) | messages | ${fmt(mail.quantity)} | ${fmt(pkMail.quantity)} | ${mail.usd.toFixed(2)} | ${pkMail.usd.toFixed(2)} |`,
      `| **Total, mail included** | | | | **${(total + mail.usd).toFixed(2)}** | **${(pkTotal + pkMail.usd).toFixed(2)}** |`,
      "",
      "Where the passkey login's Durable Object rows go:",
      "",
      "| store | calls per login | rows written per login (alarms set included) | rows deleted later per login |",
      "| --- | --- | --- | --- |",
      ...passkeyRun.byStore.map(
        (r) => `| ${r.store} | ${r.calls.toFixed(2)} | ${r.rows.toFixed(2)} | ${r.later.toFixed(2)} |`,
      ),
    ].join("\n");
  }
  console.log(
    `\n${summary}\n\n${table}\n\n${localNote}\n\n${localTable}\n\n${stores}\n${passkeys ? `\n${passkeys}\n` : ""}`,
  );
  if (process.env.OUT !== "-") {
    const date = new Date().toISOString().slice(0, 10);
    const out = process.env.OUT || join(REPO, "docs", "benchmarks", `${date}-cost.md`);
    writeFileSync(
      out,
      `# What a login costs on Cloudflare's bill, measured (${date})\n\nMeasured by \`npm run cost\` (tools/cost.mjs) on the \`npm start\` stack with the \`http\` mail transport; priced by docs/cost.md.\n\n${summary}\n\n${table}\n\n${localNote}\n\n${localTable}\n\nWhere the Durable Object rows go:\n\n${stores}\n${passkeys ? `\n${passkeys}\n` : ""}`,
    );
    console.log(`wrote ${out}`);
  }
} finally {
  await stack.dispose();
  receiver.close();
}
