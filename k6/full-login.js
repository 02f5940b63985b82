// The five-step mail-OTP login under load (CONTRACT §2): AuthorizeInit, EmailCodeGenerate,
// EmailCodeVerify, AuthorizeCode, Token, one login per iteration at RATE logins/s.
//
//   k6 run -e ADMIN_TOKEN=... k6/full-login.js                  (local: BASE_URL http://127.0.0.1:8787)
//   k6 run -e RATE=100 -e HOLD=120 -e BASE_URL=https://id.example.com -e MAILBOX=test ... k6/full-login.js
//
// See k6/README.md for every variable.

import encoding from "k6/encoding";
import exec from "k6/execution";
import { Rate } from "k6/metrics";
import {
  createClient,
  createTenant,
  deleteClient,
  deleteTenant,
  ENTITY_CLAIMS_TEMPLATE,
  readTenant,
  requireAdminToken,
  setUpEntityClaims,
} from "./lib/admin.js";
import { bool, cloudOptions, num, RAMP, usersNeeded } from "./lib/config.js";
import { login } from "./lib/login.js";
import { loginScriptOptions } from "./lib/metrics.js";
import { emailForIteration, newRunId, seededEmail, seedUsers } from "./lib/users.js";

const SCOPE = __ENV.SCOPE || "openid email offline_access";

/** PHASE_METRICS=1 (tools/bench.mjs): each iteration's metrics are tagged with its phase (lib/metrics.js). */
const PHASE_METRICS = bool("PHASE_METRICS", false);

/**
 * TENANTS=N (issue 23): N tenants are created for the run, each with its client and its share of the
 * seeded users, and iteration i logs in at tenant i mod N (`/t/<tenant>/...`, its own issuer).
 * 0, the default: the origin's own endpoints (the default tenant).
 */
const TENANTS = Math.floor(num("TENANTS", 0));
/**
 * TENANT_IDS=a,b,c: log in at these existing tenants instead (tools/bench-tenants.mjs made them):
 * a client is registered in each and removed at the end; the tenants stay.
 */
const TENANT_IDS = (__ENV.TENANT_IDS || "")
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);

/**
 * ENTITY_CLAIMS=1 (issue 24): each seeded user is a member of one organization and owns a device
 * entity; the client's tokens carry the organization (asked for with `organization`), its plan, and
 * the user's devices and permissions. `entity_claims_present` is the share of logins whose ID token
 * carried them.
 */
const ENTITY_CLAIMS = bool("ENTITY_CLAIMS", false);
/**
 * ENTITY_GRANTS=1 (on with ENTITY_CLAIMS): setup makes the organization, devices and grants all the
 * same, but the logins ask for no claims. `npm run bench` ENTITY_CLAIMS=1 runs its plain side so, so
 * the two sides differ only in the login.
 */
const ENTITY_GRANTS = bool("ENTITY_GRANTS", ENTITY_CLAIMS);
const entityClaimsPresent = new Rate("entity_claims_present");

export const options = loginScriptOptions({ setupTimeout: "5m", cloud: cloudOptions("Keyway full login") });

export function setup() {
  requireAdminToken();
  const runId = newRunId();
  const count = TENANT_IDS.length || TENANTS;
  if (count > 0) {
    // Each tenant's users are its share of the run's iterations; the same addresses in every tenant
    // are different users there, with limits of their own.
    const share = Math.ceil(usersNeeded() / count) + 1;
    const tenants = [];
    let pool = null;
    for (let t = 0; t < count; t++) {
      const tenant = TENANT_IDS.length ? readTenant(TENANT_IDS[t]) : createTenant(`lt-${runId}-${t}`, `k6 tenant ${t}`);
      tenants.push({ tenant, client: createClient(`k6 full-login ${runId}`, SCOPE, tenant) });
      pool = seedUsers(runId, share, tenant.id);
    }
    console.log(`${count} tenants, ${share} users each`);
    return { tenants, pool, existing: TENANT_IDS.length > 0 };
  }
  const client = createClient(
    `k6 full-login ${runId}`,
    SCOPE,
    undefined,
    ENTITY_CLAIMS ? { token_claims: ENTITY_CLAIMS_TEMPLATE } : {},
  );
  // Enough distinct users that the per-address resend interval (60 s) never throttles the run.
  const pool = seedUsers(runId, usersNeeded());
  if (!ENTITY_GRANTS) return { client, pool };
  const emails = [];
  for (let i = 0; i < pool.count; i++) emails.push(seededEmail(pool, i));
  const organization = setUpEntityClaims(pool, emails);
  return ENTITY_CLAIMS ? { client, pool, organization } : { client, pool };
}

export default function (data) {
  if (PHASE_METRICS) exec.vu.metrics.tags.phase = Date.now() - exec.scenario.startTime < RAMP * 1000 ? "ramp" : "hold";
  if (!data.tenants && data.organization) {
    const out = login(data.client, emailForIteration(data.pool), { authParams: { organization: data.organization } });
    if (out.ok) entityClaimsPresent.add(orgOf(out.tokens.id_token) === data.organization);
    return out;
  }
  if (!data.tenants) return login(data.client, emailForIteration(data.pool));
  const i = exec.scenario.iterationInTest;
  const { client } = data.tenants[i % data.tenants.length];
  login(client, emailForIteration(data.pool, Math.floor(i / data.tenants.length)));
}

/** The `org_id` an ID token carries (its signature was checked by the login's token step). */
function orgOf(idToken) {
  try {
    return JSON.parse(encoding.b64decode(String(idToken).split(".")[1], "rawurl", "s")).org_id;
  } catch {
    return undefined;
  }
}

export function teardown(data) {
  if (bool("KEEP_CLIENT", false)) return;
  if (data.existing) for (const { tenant, client } of data.tenants) deleteClient(client.client_id, tenant.id);
  else if (data.tenants) for (const { tenant } of data.tenants) deleteTenant(tenant.id);
  else deleteClient(data.client.client_id);
}
