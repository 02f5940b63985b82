// Shared configuration for the Keyway k6 suite: every knob is an environment variable (k6 run -e KEY=value
// or the process environment). See k6/README.md.

function str(name, fallback) {
  const v = __ENV[name];
  return v === undefined || v === "" ? fallback : v;
}

export function num(name, fallback) {
  const raw = __ENV[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got ${raw}`);
  return n;
}

export function bool(name, fallback) {
  const raw = __ENV[name];
  if (raw === undefined || raw === "") return fallback;
  return !/^(0|false|no|off)$/i.test(raw);
}

export const BASE_URL = str("BASE_URL", "http://127.0.0.1:8787").replace(/\/+$/, "");
/** The issuer the server puts in `iss`; the same as BASE_URL unless the server sits behind a proxy. */
export const ISSUER = str("ISSUER", BASE_URL).replace(/\/+$/, "");
export const ADMIN_TOKEN = str("ADMIN_TOKEN", "");

/**
 * Issue 28 item 4 (tools/bench.mjs, scripts/stack.mjs `productionShaped`): op-auth's and op-token's own
 * origins. With both set, each login request goes straight to its Worker with the issuer's Host, as
 * production's routes send it, instead of through the dev gateway.
 */
const AUTH_URL = str("AUTH_URL", "").replace(/\/+$/, "");
const TOKEN_URL = str("TOKEN_URL", "").replace(/\/+$/, "");
/** The Host header direct requests carry: the issuer's. */
export const DIRECT_HOST = AUTH_URL && TOKEN_URL ? BASE_URL.replace(/^https?:\/\//, "") : "";

/** `url` on BASE_URL, sent where AUTH_URL and TOKEN_URL say (op-token serves /token), or as it is. */
export function routed(url) {
  if (!DIRECT_HOST || !url.startsWith(BASE_URL)) return url;
  const rest = url.slice(BASE_URL.length);
  return `${/^\/token(?:[?#]|$)/.test(rest) ? TOKEN_URL : AUTH_URL}${rest}`;
}
export const EMAIL_DOMAIN = str("LOADTEST_EMAIL_DOMAIN", "loadtest.keyway.test");
/** `dev`: GET /__dev/mailbox/{email} (local). `test`: GET /admin/v1/test-mailbox/{email} with the admin token. */
export const MAILBOX = str("MAILBOX", "dev");
/** `seeded`: users imported in setup, one per iteration. `signup`: a fresh address per iteration. */
export const USERS = str("USERS", "seeded");
/** Fixed prefix of seeded addresses; by default a new one per run (see lib/users.js). */
export const USER_PREFIX = str("USER_PREFIX", "");
export const REDIRECT_URI = str("REDIRECT_URI", "https://loadtest.keyway.invalid/callback");
export const REQUEST_TIMEOUT = str("REQUEST_TIMEOUT", "10s");
/** The ID token's algorithm, registered as the client's `id_token_signed_response_alg` (CONTRACT §3). */
export const ID_TOKEN_ALG = str("ID_TOKEN_ALG", "RS256");

export const MAILBOX_POLLS = num("MAILBOX_POLLS", 20);
export const MAILBOX_INTERVAL_MS = num("MAILBOX_INTERVAL_MS", 50);
/** How much older than the generate request (by the server's clock) a message may look and still count as new. */
export const MAILBOX_SKEW_MS = num("MAILBOX_SKEW_MS", 5000);
/**
 * Reads of the mailbox after the one that found the code, each thrown away (tools/bench.mjs): what a
 * target spends on the test's mailbox read, which a production login does not make, is the CPU these
 * add divided by their number.
 */
export const MAILBOX_EXTRA_READS = Math.max(0, Math.floor(num("MAILBOX_EXTRA_READS", 0)));

/**
 * COUNTRIES=JP,DE,US: each login says, through the local dev gateway's X-Keyway-Dev-Country, that it
 * comes from the next of these countries in turn, so a local run drives logins through several
 * regions (issue 12). A deployment ignores the header: Cloudflare's own `cf.country` decides there.
 */
export const COUNTRIES = str("COUNTRIES", "")
  .split(",")
  .map((c) => c.trim().toUpperCase())
  .filter((c) => /^[A-Z]{2}$/.test(c));

export const RATE = num("RATE", 20);
export const RAMP = num("RAMP", 10);
export const HOLD = num("HOLD", 20);
export const P95_MS = num("P95_MS", 500);
export const SUCCESS_RATE = num("SUCCESS_RATE", 0.999);

if (MAILBOX !== "dev" && MAILBOX !== "test") throw new Error(`MAILBOX must be dev or test, got ${MAILBOX}`);
if (USERS !== "seeded" && USERS !== "signup") throw new Error(`USERS must be seeded or signup, got ${USERS}`);
if (ID_TOKEN_ALG !== "RS256" && ID_TOKEN_ALG !== "ES256")
  throw new Error(`ID_TOKEN_ALG must be RS256 or ES256, got ${ID_TOKEN_ALG}`);
if (RATE <= 0) throw new Error("RATE must be > 0");

/**
 * Users to seed so each iteration gets its own: RATE x (RAMP + HOLD) x 1.2, an upper bound on the
 * iterations a run starts (the ramp really starts only about half of RATE x RAMP).
 */
export function usersNeeded() {
  return Math.max(10, Math.ceil(RATE * (RAMP + HOLD) * 1.2));
}

/**
 * The one scenario every script uses: ramp from 0 to RATE iterations/s over RAMP seconds, hold HOLD seconds.
 * `secondsPerIteration` is a guess at one iteration's duration, used only for the default VU counts.
 */
export function arrivalScenario(secondsPerIteration, extra = {}) {
  const pre = num("PREALLOCATED_VUS", Math.max(5, Math.ceil(RATE * secondsPerIteration * 2)));
  const max = Math.max(pre, num("MAX_VUS", Math.max(20, pre * 4)));
  // Targets are whole numbers of iterations per timeUnit: a fractional RATE counts per minute.
  const perMinute = !Number.isInteger(RATE);
  const target = perMinute ? Math.max(1, Math.round(RATE * 60)) : RATE;
  const stages = [];
  if (RAMP > 0) stages.push({ target, duration: `${RAMP}s` });
  if (HOLD > 0) stages.push({ target, duration: `${HOLD}s` });
  if (stages.length === 0) throw new Error("RAMP + HOLD must be > 0");
  return {
    executor: "ramping-arrival-rate",
    startRate: RAMP > 0 ? 0 : target,
    timeUnit: perMinute ? "1m" : "1s",
    preAllocatedVUs: pre,
    maxVUs: max,
    stages,
    gracefulStop: "30s",
    ...extra,
  };
}

/** The most VUs a scenario can have: scripts that give each VU its own user or token family size pools by it. */
export function maxVUs(scenario) {
  return scenario.maxVUs;
}

export function cloudOptions(name) {
  const cloud = { name: str("K6_CLOUD_NAME", name) };
  const project = __ENV.K6_CLOUD_PROJECT_ID;
  if (project) cloud.projectID = Number(project);
  return cloud;
}
