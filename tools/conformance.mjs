// `npm run conformance` (issue 40): the OpenID Foundation's OP certification plans against Keyway,
// at the origin and at a tenant, and docs/conformance.md written from what they gave.
//
//   CONFORMANCE_SERVER=https://localhost.emobix.co.uk:8443 npm run conformance
//
// The suite must already be running at CONFORMANCE_SERVER: this workplace keeps a fetched program's
// code, and any script that builds it, out of the repository, so building and starting the suite is
// done by hand as ../shared/CONFORMANCE.md says. This tool does the rest: it starts Keyway (`npm start`
// on fresh state, behind a TLS front: the suite needs https), registers the suite's clients through
// the admin API (confidential, `require_pkce: false`: the suite sends no PKCE, as OIDC Core allows),
// mints an initial access token for the dynamic plan (open registration stays off), creates each plan,
// runs its tests one at a time, is the person at the browser (headless Chromium reading the dev
// mailbox), rotates the signing keys when oidcc-server-rotate-keys asks for it, and prints one line a
// plan: `plan <name> at <target>: N passed, N warnings, N failed, N review, N skipped`. It exits 1 on
// any failure.
//
// Variables:
//   CONFORMANCE_SERVER   the running suite's URL (required)
//   CONFORMANCE_PLANS    comma-separated, of: basic, formpost, config, dynamic, logout, fapi2 (default: all)
//   CONFORMANCE_AT       origin, tenant, or both (default: origin,tenant)
//   CONFORMANCE_TESTS    only these test modules (comma-separated), for a rerun
//   CONFORMANCE_DOCS     0: do not write docs/conformance.md and docs/conformance/<date>-<commit>/
//   KEYWAY_TLS_PORT      the TLS front's port (default 19443)
// Output: .keyway/conformance/<run>/ (Keyway's log, the browser's screenshots, each plan's report and
// the suite's HTML export), and with CONFORMANCE_DOCS unset the results in docs/conformance.md between
// its `conformance:results` markers, the reports and exports in docs/conformance/<date>-<commit>/.
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { exportJWK, generateKeyPair } from "jose";
import { ROOT } from "../scripts/lib/local.mjs";
import { ensureSecrets } from "../scripts/setup.mjs";
import { freePort, startStack } from "../scripts/stack.mjs";
import { api, Suite } from "./lib/conformance-suite.mjs";
import { startTlsFront } from "./lib/tls-front.mjs";

/** The plans issue 40 names, with the variants Keyway is tested in (code flow, discovery). */
const PLANS = {
  basic: {
    name: "oidcc-basic-certification-test-plan",
    variant: { server_metadata: "discovery", client_registration: "static_client" },
  },
  formpost: {
    name: "oidcc-formpost-basic-certification-test-plan",
    variant: { server_metadata: "discovery", client_registration: "static_client" },
  },
  config: { name: "oidcc-config-certification-test-plan", variant: undefined },
  dynamic: { name: "oidcc-dynamic-certification-test-plan", variant: { response_type: "code" } },
  logout: {
    name: "oidcc-rp-initiated-logout-certification-test-plan",
    variant: { client_registration: "static_client", response_type: "code" },
  },
  // Issue 41: the FAPI 2.0 Security Profile, private_key_jwt and DPoP, OpenID Connect.
  fapi2: {
    name: "fapi2-security-profile-final-test-plan",
    variant: {
      client_auth_type: "private_key_jwt",
      sender_constrain: "dpop",
      openid: "openid_connect",
      fapi_profile: "plain_fapi",
      authorization_request_type: "simple",
    },
  },
};

/**
 * The policy the plans run under, at the origin and at the tenant; each is an operator's choice
 * docs/conformance.md explains. The suite's dynamic clients carry no Keyway metadata: a confidential
 * one may go without PKCE (RFC 9700 §2.1.1); public clients always need it. Its private_key_jwt
 * assertions name the token endpoint as their audience (OIDC Core §9), which RFC 10070 forbids and
 * Keyway refuses by default (docs/security.md).
 */
const CONFORMANCE_POLICY = {
  registration_require_pkce: false,
  client_assertion_token_endpoint_audience: true,
  // prompt=login and max_age tests sign the same person in twice within a minute: no need to wait a minute.
  resend_interval_seconds: 10,
  // FAPI 2.0 Security Profile §5.3.2.1-9: a rotated refresh token lost in transit must be recoverable;
  // its plan presents the previous one 30 s after a rotation (Keyway answers it the same way).
  refresh_grace_seconds: 35,
  // The suite pushes a request, then waits for the person: 90 s for a request_uri leaves room for a
  // loaded machine (the plan's expiry test waits as long).
  pushed_request_ttl_seconds: 90,
};

/** Which section of docs/conformance.md a plan's results go in. @param {string} plan */
const familyOf = (plan) => (plan.startsWith("fapi") ? "fapi" : "oidc");

/** A test's result in the suite, and how it counts. */
const COUNTED = { PASSED: "passed", WARNING: "warnings", FAILED: "failed", REVIEW: "review", SKIPPED: "skipped" };

// Every https peer here is on this machine: the suite's front and Keyway's own self-signed one.
process.env.NODE_TLS_REJECT_UNAUTHORIZED ??= "0";
const suiteUrl = process.env.CONFORMANCE_SERVER?.replace(/\/$/, "");
if (!suiteUrl) {
  console.error(`npm run conformance needs a running OpenID Foundation conformance suite: set CONFORMANCE_SERVER to its URL.
The suite is built and started outside this repository (../shared/CONFORMANCE.md says how); see docs/conformance.md.`);
  process.exit(2);
}
const planKeys = (process.env.CONFORMANCE_PLANS ?? Object.keys(PLANS).join(","))
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);
for (const k of planKeys)
  if (!(k in PLANS)) {
    console.error(`unknown plan ${k}: one of ${Object.keys(PLANS).join(", ")}`);
    process.exit(2);
  }
const targets = (process.env.CONFORMANCE_AT ?? "origin,tenant").split(",").map((s) => s.trim());
for (const t of targets)
  if (t !== "origin" && t !== "tenant") {
    console.error(`CONFORMANCE_AT: origin and/or tenant, not ${t}`);
    process.exit(2);
  }
const onlyTests = process.env.CONFORMANCE_TESTS?.split(",").map((s) => s.trim());
const writeDocs = process.env.CONFORMANCE_DOCS !== "0";

const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
const dirty = execFileSync("git", ["status", "--porcelain"], { cwd: ROOT, encoding: "utf8" }).trim() !== "";
const runId = new Date().toISOString().replace(/[-:]/g, "").slice(0, 15);
const out = join(ROOT, ".keyway", "conformance", runId);
mkdirSync(out, { recursive: true });
const log = (/** @type {unknown[]} */ ...a) => console.log(`[${new Date().toISOString().slice(11, 19)}]`, ...a);
const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));
const suite = new Suite(suiteUrl);
if (!(await suite.available())) {
  console.error(`no conformance suite answers at ${suiteUrl} (GET /api/runner/available)`);
  process.exit(2);
}

// ---- Keyway: fresh state, the issuer on https through the TLS front.
const tlsPort = Number(process.env.KEYWAY_TLS_PORT ?? 19443);
const issuer = `https://127.0.0.1:${tlsPort}`;
const persistTo = ".keyway/conformance/state";
rmSync(join(ROOT, persistTo), { recursive: true, force: true });
const vars = ensureSecrets();
const port = await freePort();
log(`starting Keyway ${commit}${dirty ? " (with uncommitted changes)" : ""} at ${issuer}`);
const stack = await startStack({
  port,
  issuer,
  persistTo,
  vars: {
    ...vars,
    POLICY: JSON.stringify(CONFORMANCE_POLICY),
  },
});
const front = await startTlsFront({ port: tlsPort, upstream: port, dir: join(ROOT, ".keyway", "conformance", "tls") });
const adminToken = vars.ADMIN_TOKEN;
/** @param {string} method @param {string} path @param {unknown} [body] */
const admin = (method, path, body) =>
  api(method, `${issuer}/admin/v1${path}`, body, { Authorization: `Bearer ${adminToken}` });

/** @type {{ target: string, plan: string, planId: string, counts: Record<string, number>, tests: { name: string, result: string, notes: string[] }[] }[]} */
const results = [];
/** The tests this run created: the only ones its person acts in. @type {Set<string>} */
const mine = new Set();
let stopPerson = async () => {};
for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"]))
  process.once(signal, async () => {
    await stopPerson().catch(() => {});
    await front.close().catch(() => {});
    await stack.dispose().catch(() => {});
    process.exit(130);
  });
try {
  const tenantId = `conformance-${runId.slice(-6)}`;
  /** @type {Record<string, { issuer: string, adminPrefix: string }>} */
  const places = {};
  if (targets.includes("origin")) places.origin = { issuer, adminPrefix: "" };
  if (targets.includes("tenant")) {
    const created = await admin("POST", "/tenants", {
      id: tenantId,
      name: "Conformance",
      policy: CONFORMANCE_POLICY,
    });
    if (created.status !== 201) throw new Error(`tenant not created: ${created.status} ${created.text}`);
    places.tenant = { issuer: created.json.issuer, adminPrefix: `/tenants/${tenantId}` };
  }
  stopPerson = await suite.person({
    mine,
    keyway: [issuer],
    mailbox: async (email) => {
      // The mailbox of whichever place the login is at: each tenant's is its own.
      const all = await Promise.all(
        Object.values(places).map((p) =>
          api("GET", `${p.issuer}/__dev/mailbox/${encodeURIComponent(email)}`).then((r) => r.json?.messages ?? []),
        ),
      );
      return all.flat();
    },
    shots: join(out, "screenshots"),
    tag: runId,
    log,
  });

  // The places run side by side: each has its own alias at the suite, its own clients and its own
  // browser contexts, and a plan's tests run one at a time within a place, as an alias requires.
  const runPlace = async (
    /** @type {string} */ target,
    /** @type {{ issuer: string, adminPrefix: string }} */ place,
  ) => {
    const alias = `keyway-${target}`;
    const callback = `${suiteUrl}/test/a/${alias}/callback`;
    const clients = [];
    for (const [name, method] of [
      ["conformance client 1", "client_secret_basic"],
      ["conformance client 2", "client_secret_basic"],
      ["conformance client_secret_post", "client_secret_post"],
    ]) {
      const r = await admin("POST", `${place.adminPrefix}/clients`, {
        client_name: name,
        redirect_uris: [callback],
        post_logout_redirect_uris: [`${suiteUrl}/test/a/${alias}/post_logout_redirect`],
        token_endpoint_auth_method: method,
        grant_types: ["authorization_code", "refresh_token"],
        require_pkce: false,
        // The plans send unsigned request objects; a client must be registered for them.
        request_object_signing_alg: "none",
      });
      if (r.status !== 201) throw new Error(`client not registered at ${target}: ${r.status} ${r.text}`);
      clients.push({ client_id: r.json.client_id, client_secret: r.json.client_secret });
    }
    // FAPI 2.0: two private_key_jwt clients whose keys only the suite holds (PS256 and ES256), pushed
    // requests required, DPoP-bound tokens, ES256 ID tokens (the profile refuses RS256). The second
    // client's redirect URI carries a query the response must keep.
    const fapi = [];
    if (planKeys.includes("fapi2"))
      for (const [n, alg, redirect] of /** @type {const} */ ([
        [1, "PS256", callback],
        [2, "ES256", `${callback}?dummy1=lorem&dummy2=ipsum`],
      ])) {
        const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true, modulusLength: 2048 });
        const kid = `fapi${n}-${runId}`;
        const pub = { ...(await exportJWK(publicKey)), kid, alg, use: "sig" };
        const r = await admin("POST", `${place.adminPrefix}/clients`, {
          client_name: `conformance FAPI 2.0 client ${n}`,
          redirect_uris: [redirect],
          token_endpoint_auth_method: "private_key_jwt",
          jwks: { keys: [pub] },
          grant_types: ["authorization_code", "refresh_token"],
          scope: "openid email offline_access",
          id_token_signed_response_alg: "ES256",
          require_pushed_authorization_requests: true,
          dpop_bound_access_tokens: true,
        });
        if (r.status !== 201) throw new Error(`FAPI client not registered at ${target}: ${r.status} ${r.text}`);
        fapi.push({
          client_id: r.json.client_id,
          scope: "openid email offline_access",
          jwks: { keys: [{ ...(await exportJWK(privateKey)), kid, alg, use: "sig" }] },
          ...(n === 2 ? { dpop_signing_alg: "ES256" } : {}),
        });
      }
    const token = await admin("POST", `${place.adminPrefix}/registration-tokens`, {
      multi_use: true,
      expires_in: 6 * 3600,
    });
    if (token.status !== 201) throw new Error(`no initial access token at ${target}: ${token.status} ${token.text}`);

    for (const key of planKeys) {
      const plan = PLANS[/** @type {keyof typeof PLANS} */ (key)];
      const dynamic = key === "dynamic";
      const config = {
        alias,
        description: `Keyway ${commit} at the ${target} (${place.issuer})`,
        server: { discoveryUrl: discoveryUrl(place.issuer) },
        ...(dynamic
          ? // Both of the suite's dynamic clients register with it (AbstractOIDCCMultipleClient's second too).
            { client: { initial_access_token: token.json.token }, client2: { initial_access_token: token.json.token } }
          : key === "fapi2"
            ? // The protected resource its plan calls with the DPoP-bound token: userinfo.
              { client: fapi[0], client2: fapi[1], resource: { resourceUrl: `${place.issuer}/userinfo` } }
            : { client: clients[0], client2: clients[1], client_secret_post: clients[2] }),
        consent: {},
      };
      const created = await suite.createPlan(plan.name, plan.variant, config);
      log(`plan ${plan.name} at the ${target}: ${created.id}, ${created.modules.length} tests`);
      for (const m of created.modules) {
        if (onlyTests && !onlyTests.includes(m.testModule)) continue;
        await runModule(created.id, m, place);
      }
      const done = await summarize(target, plan.name, created.id);
      results.push(done);
      await suite.exportHtml(created.id, join(out, `${plan.name}-${target}.zip`));
      const c = done.counts;
      console.log(
        `plan ${plan.name} at ${target}: ${c.passed} passed, ${c.warnings} warnings, ${c.failed} failed, ${c.review} review, ${c.skipped} skipped`,
      );
    }
  };
  await Promise.all(Object.entries(places).map(([target, place]) => runPlace(target, place)));
  const order = (/** @type {{ plan: string, target: string }} */ r) =>
    planKeys.findIndex((k) => PLANS[/** @type {keyof typeof PLANS} */ (k)].name === r.plan) * 2 +
    (r.target === "tenant" ? 1 : 0);
  results.sort((a, b) => order(a) - order(b));
} finally {
  await stopPerson();
  await front.close();
  await stack.dispose();
}

if (writeDocs) writeResults();
process.exit(results.some((r) => r.counts.failed > 0) ? 1 : 0);

/** RFC 8414 §3.1 puts a path issuer's well-known segment first; OIDC Discovery §4 appends it. Keyway serves both. */
function discoveryUrl(/** @type {string} */ iss) {
  return `${iss}/.well-known/openid-configuration`;
}

/**
 * One test: created in the plan, started by hand where it waits for that (oidcc-server-rotate-keys,
 * after the keys are rotated), and waited for while the person at the browser does their part.
 * @param {string} planId @param {{ testModule: string, variant?: Record<string, string> }} m
 * @param {{ issuer: string, adminPrefix: string }} place
 */
async function runModule(planId, m, place) {
  const id = await suite.createModule(planId, m.testModule, m.variant);
  mine.add(id);
  log(`  ${m.testModule} ${id} (${place.issuer})`);
  const state = await suite.waitFor(id, ["CONFIGURED", "WAITING", "RUNNING"], 240_000);
  if (state === "CONFIGURED") {
    if (m.testModule === "oidcc-server-rotate-keys") await rotateKeys(place);
    await suite.start(id);
  }
  const end = await suite.waitFor(id, ["FINISHED", "INTERRUPTED"], 300_000);
  if (end !== "FINISHED" && end !== "INTERRUPTED") log(`  ${m.testModule}: still ${end} after 5 minutes`);
}

/** Rotates the place's signing keys and waits until its JWKS publishes the new one. @param {{ issuer: string, adminPrefix: string }} place */
async function rotateKeys(place) {
  const jwksUri = (await api("GET", discoveryUrl(place.issuer))).json?.jwks_uri;
  const jwks = async () =>
    new Set(((await api("GET", jwksUri)).json?.keys ?? []).map((/** @type {{ kid: string }} */ k) => k.kid));
  const before = await jwks();
  const r = await admin("POST", `${place.adminPrefix}/keys/rotate`);
  if (r.status !== 200) throw new Error(`key rotation refused: ${r.status} ${r.text}`);
  for (let i = 0; i < 90; i++) {
    const now = await jwks();
    if ([...now].some((k) => !before.has(k))) return;
    await sleep(1000);
  }
  log("  the rotated key did not appear in the JWKS within 90 s");
}

/** Each test's result and its failures and warnings, from the suite. @param {string} target @param {string} plan @param {string} planId */
async function summarize(target, plan, planId) {
  const info = await suite.plan(planId);
  /** @type {Record<string, number>} */
  const counts = { passed: 0, warnings: 0, failed: 0, review: 0, skipped: 0 };
  const tests = [];
  for (const m of info?.modules ?? []) {
    const ids = m.instances ?? [];
    if (!ids.length) continue;
    const id = ids[ids.length - 1];
    const i = await suite.info(id);
    // An interrupted test without a result of its own did not pass.
    const result = i.result && i.result !== "UNKNOWN" ? i.result : "FAILED";
    const kind = COUNTED[/** @type {keyof typeof COUNTED} */ (result)] ?? "failed";
    counts[kind] = (counts[kind] ?? 0) + 1;
    const notes = new Set();
    for (const e of await suite.log(id))
      if (e.result === "FAILURE" || e.result === "WARNING")
        notes.add(
          `${e.result.toLowerCase()}: ${e.src}: ${String(e.msg ?? "")
            .replace(/\s+/g, " ")
            .slice(0, 240)}`,
        );
    tests.push({ name: m.testModule, result: result.toLowerCase(), notes: [...notes] });
  }
  const report = [
    `${plan} at the ${target} (${planId})`,
    ...tests.flatMap((t) => [`- ${t.name}: ${t.result}`, ...t.notes.map((n) => `    ${n}`)]),
  ];
  writeFileSync(join(out, `${plan}-${target}.report.txt`), `${report.join("\n")}\n`);
  return { target, plan, planId, counts, tests };
}

/** docs/conformance.md's results section, and the reports and exports beside it. */
function writeResults() {
  const day = new Date().toISOString().slice(0, 10);
  const folder = `conformance/${day}-${commit}`;
  const dir = join(ROOT, "docs", folder);
  mkdirSync(dir, { recursive: true });
  for (const r of results)
    for (const ext of ["report.txt", "zip"]) {
      const file = join(out, `${r.plan}-${r.target}.${ext}`);
      if (existsSync(file)) copyFileSync(file, join(dir, `${r.plan}-${r.target}.${ext}`));
    }
  // Each family of plans has its own section between its markers, so a run of one family (FAPI 2.0,
  // say) leaves the other's latest results on the page.
  let text = readFileSync(join(ROOT, "docs", "conformance.md"), "utf8");
  for (const family of /** @type {const} */ (["oidc", "fapi"])) {
    const ran = results.filter((r) => familyOf(r.plan) === family);
    if (!ran.length) continue;
    const lines = [
      `Run by \`npm run conformance\` on ${day} against ${commit}${dirty ? " with uncommitted changes" : ""}; the reports and the suite's HTML exports are in [${folder}/](${folder}/).`,
      "",
      "| plan | at | passed | warnings | failed | review | skipped |",
      "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
      ...ran.map(
        (r) =>
          `| \`${r.plan}\` | ${r.target} | ${r.counts.passed} | ${r.counts.warnings} | ${r.counts.failed} | ${r.counts.review} | ${r.counts.skipped} |`,
      ),
      "",
      ...ran.flatMap((r) => [
        `#### \`${r.plan}\` at the ${r.target}`,
        "",
        "| test | result | what the suite said |",
        "| --- | --- | --- |",
        ...r.tests.map(
          (t) => `| ${t.name} | ${t.result} | ${t.notes.map((n) => n.replace(/\|/g, "\\|")).join("<br>")} |`,
        ),
        "",
      ]),
    ];
    const tag = family === "oidc" ? "conformance:results" : "conformance:results:fapi";
    const begin = `<!-- ${tag}:begin -->`;
    const end = `<!-- ${tag}:end -->`;
    const section = `${begin}\n${lines.join("\n")}\n${end}`;
    text =
      text.includes(begin) && text.includes(end)
        ? text.slice(0, text.indexOf(begin)) + section + text.slice(text.indexOf(end) + end.length)
        : `${text.trimEnd()}\n\n## The latest run${family === "fapi" ? " of the FAPI 2.0 plan" : ""}\n\n${section}\n`;
  }
  writeFileSync(join(ROOT, "docs", "conformance.md"), text);
  log(`wrote docs/conformance.md and docs/${folder}/`);
}
