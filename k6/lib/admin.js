import http from "k6/http";
import { ADMIN_TOKEN, BASE_URL, ID_TOKEN_ALG, REDIRECT_URI, REQUEST_TIMEOUT } from "./config.js";
import { describe, jsonBody } from "./http-util.js";

function adminParams() {
  return {
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, "Content-Type": "application/json" },
    timeout: REQUEST_TIMEOUT,
    tags: { step: "Admin" },
  };
}

export function requireAdminToken() {
  if (!ADMIN_TOKEN) throw new Error("ADMIN_TOKEN is required (k6 run -e ADMIN_TOKEN=...; locally it is in .dev.vars)");
}

/** Registers a client through the admin API (`body` as POST /admin/v1/clients takes it); throws unless 201. */
export function registerClient(body, tenant) {
  requireAdminToken();
  const res = http.post(
    `${BASE_URL}/admin/v1${tenant ? `/tenants/${tenant.id}` : ""}/clients`,
    JSON.stringify(body),
    Object.assign(adminParams(), { tags: { step: "Admin", name: "POST /admin/v1/clients" } }),
  );
  const out = jsonBody(res);
  if (res.status !== 201 || !out || !out.client_id)
    throw new Error(`could not register ${body.client_name}: ${describe(res)}`);
  return out;
}

/**
 * Registers the load test's confidential client (client_secret_basic), its ID tokens signed with ID_TOKEN_ALG.
 * The flow never follows the redirect URI.
 */
export function createClient(name, scope, tenant, extra = {}) {
  const body = registerClient(
    Object.assign(
      {
        client_name: name,
        redirect_uris: [REDIRECT_URI],
        token_endpoint_auth_method: "client_secret_basic",
        grant_types: ["authorization_code", "refresh_token"],
        scope,
        id_token_signed_response_alg: ID_TOKEN_ALG,
      },
      extra,
    ),
    tenant,
  );
  const client = { client_id: body.client_id, client_secret: body.client_secret, redirect_uri: REDIRECT_URI, scope };
  // A tenant's client logs in at the tenant's endpoints, and its tokens name the tenant's issuer.
  if (tenant) Object.assign(client, { tenant: tenant.id, base: `${BASE_URL}/t/${tenant.id}`, issuer: tenant.issuer });
  return client;
}

/** Creates a tenant (issue 23); its issuer is `<origin>/t/<id>` (CONTRACT §8). Throws unless 201. */
export function createTenant(id, name) {
  requireAdminToken();
  const res = http.post(
    `${BASE_URL}/admin/v1/tenants`,
    JSON.stringify({ id, name }),
    Object.assign(adminParams(), { tags: { step: "Admin", name: "POST /admin/v1/tenants" } }),
  );
  const out = jsonBody(res);
  if (res.status !== 201 || !out) throw new Error(`could not create tenant ${id}: ${describe(res)}`);
  return { id: out.id, issuer: out.issuer };
}

/** An existing tenant: its id and issuer. Throws unless 200. */
export function readTenant(id) {
  requireAdminToken();
  const res = http.get(
    `${BASE_URL}/admin/v1/tenants/${encodeURIComponent(id)}`,
    Object.assign(adminParams(), { tags: { step: "Admin", name: "GET /admin/v1/tenants/{id}" } }),
  );
  const out = jsonBody(res);
  if (res.status !== 200 || !out) throw new Error(`no tenant ${id}: ${describe(res)}`);
  return { id: out.id, issuer: out.issuer };
}

export function deleteTenant(id) {
  const res = http.del(
    `${BASE_URL}/admin/v1/tenants/${encodeURIComponent(id)}`,
    null,
    Object.assign(adminParams(), { tags: { step: "Admin", name: "DELETE /admin/v1/tenants/{id}" }, timeout: "60s" }),
  );
  if (res.status !== 204) console.warn(`could not delete the load-test tenant ${id}: ${describe(res)}`);
}

export function deleteClient(clientId, tenant) {
  if (!clientId) return;
  const res = http.del(
    `${BASE_URL}/admin/v1${tenant ? `/tenants/${tenant}` : ""}/clients/${encodeURIComponent(clientId)}`,
    null,
    Object.assign(adminParams(), { tags: { step: "Admin", name: "DELETE /admin/v1/clients/{id}" } }),
  );
  if (res.status !== 204) console.warn(`could not delete the load-test client ${clientId}: ${describe(res)}`);
}

/** Imports addresses, at most 1,000 per call (CONTRACT §5). */
export function importUsers(emails, tenant) {
  let created = 0;
  let existing = 0;
  for (let i = 0; i < emails.length; i += 1000) {
    const chunk = emails.slice(i, i + 1000).map((email) => ({ email }));
    const res = http.post(
      `${BASE_URL}/admin/v1${tenant ? `/tenants/${tenant}` : ""}/users/import`,
      JSON.stringify({ users: chunk }),
      Object.assign(adminParams(), { tags: { step: "Admin", name: "POST /admin/v1/users/import" }, timeout: "60s" }),
    );
    const body = jsonBody(res);
    if (res.status !== 200 || !body) throw new Error(`user import failed at ${i}: ${describe(res)}`);
    created += body.created || 0;
    existing += body.existing || 0;
  }
  return { created, existing };
}

/** POSTs NDJSON records to an import job (issue 24); throws unless every line loaded. */
function importNdjson(kind, records) {
  for (let i = 0; i < records.length; i += 5000) {
    const body = `${records
      .slice(i, i + 5000)
      .map((r) => JSON.stringify(r))
      .join("\n")}\n`;
    const res = http.post(`${BASE_URL}/admin/v1/imports/${kind}`, body, {
      headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, "Content-Type": "application/x-ndjson" },
      timeout: "300s",
      tags: { step: "Admin", name: `POST /admin/v1/imports/${kind}` },
    });
    const job = jsonBody(res);
    if (res.status !== 200 || !job || job.failed > 0)
      throw new Error(`${kind} import failed at ${i}: ${describe(res)}`);
  }
}

/** The template ENTITY_CLAIMS clients register: the organization's plan and the user's devices. */
export const ENTITY_CLAIMS_TEMPLATE = {
  claims: [
    { claim: "plan", source: "organization.attributes.plan" },
    { claim: "devices", source: "grants.device.ids" },
    { claim: "device_permissions", source: "grants.device.permissions" },
  ],
};

/**
 * ENTITY_CLAIMS=1 (issue 24): an organization with a plan, and for each of the pool's users a device
 * entity it owns and a membership in the organization, through the import jobs. Returns the
 * organization's id, which every login asks for.
 */
export function setUpEntityClaims(pool, emails) {
  requireAdminToken();
  const params = adminParams();
  const type = http.post(
    `${BASE_URL}/admin/v1/entity-types`,
    JSON.stringify({ name: "device", roles: { owner: { permissions: ["device:read", "device:write"] } } }),
    params,
  );
  if (type.status !== 201 && type.status !== 409)
    throw new Error(`could not create the device type: ${describe(type)}`);
  const org = http.post(
    `${BASE_URL}/admin/v1/organizations`,
    JSON.stringify({ name: `k6 organization ${pool.runId}`, attributes: { plan: "enterprise" } }),
    params,
  );
  const orgBody = jsonBody(org);
  if (org.status !== 201 || !orgBody) throw new Error(`could not create the organization: ${describe(org)}`);
  const started = Date.now();
  importNdjson(
    "entities",
    emails.map((_, i) => ({
      type: "device",
      name: `k6 device ${i}`,
      external_id: `k6dev-${pool.runId}-${i}`,
      attributes: { slot: i },
    })),
  );
  importNdjson(
    "grants",
    emails.flatMap((email, i) => [
      { email, target_id: orgBody.id, roles: ["member"] },
      { email, target_external_id: `k6dev-${pool.runId}-${i}`, roles: ["owner"] },
    ]),
  );
  console.log(`entity claims: ${emails.length} devices and ${emails.length * 2} grants in ${Date.now() - started} ms`);
  return orgBody.id;
}
