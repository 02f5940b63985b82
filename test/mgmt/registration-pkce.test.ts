import { describe, expect, it } from "vitest";
import {
  admin,
  basicAuth,
  call,
  loginForCode,
  type TestClient,
  type TestEnv,
  uniqueEmail,
  withVars,
} from "../support/harness";
import { clientRow, type DynamicClient, registerAt, registerDynamic } from "../support/registration";
import { baseOf, createTenant } from "../tenants/support";

/**
 * PKCE for dynamically registered clients (issue 40): the tenant policy `registration_require_pkce`
 * (true by default). False: a confidential client registered at `<issuer>/register` without saying
 * `require_pkce` may sign in without PKCE, as the OpenID Foundation's dynamic plan does (its clients
 * send neither PKCE nor Keyway's metadata); a public client always uses PKCE, and the admin API's
 * default stays true.
 */

const tag = () => Math.random().toString(36).slice(2, 8);
const metadata = (extra: Record<string, unknown> = {}) => ({
  redirect_uris: [`https://pk${tag()}.example.com/cb`],
  grant_types: ["authorization_code", "refresh_token"],
  ...extra,
});

/** The deployment's POLICY with open registration and registration_require_pkce false. */
const lenient = () =>
  withVars({
    POLICY: JSON.stringify({ client_cache_seconds: 0, open_registration: true, registration_require_pkce: false }),
  });

async function openRegistration(testEnv: TestEnv, extra: Record<string, unknown> = {}, base = "") {
  const res = await registerAt(metadata(extra), { env: testEnv, base });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as DynamicClient;
}

/** Signs in without PKCE and redeems the code with the client's secret (Basic). */
async function signInWithoutPkce(client: TestClient, testEnv: TestEnv): Promise<Response> {
  const extra = { scope: "openid email", code_challenge: null, code_challenge_method: null };
  const { code } = await loginForCode(client, uniqueEmail("dcr-pkce"), { extra, env: testEnv });
  expect(code, "the authorization request without PKCE was refused").toBeTruthy();
  return call(
    "/token",
    {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Authorization: basicAuth(client) },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code,
        redirect_uri: client.redirect_uris[0] as string,
      }),
    },
    testEnv,
  );
}

describe("registration_require_pkce (issue 40)", () => {
  it("is true by default: a dynamically registered confidential client must use PKCE", async () => {
    const client = await registerDynamic(metadata());
    expect(client.require_pkce).toBe(true);
    expect((await clientRow(client.client_id)).require_pkce).toBe(1);
  });

  it("false: a confidential client that does not say require_pkce signs in without PKCE, as the dynamic plan's do", async () => {
    const e = lenient();
    const client = await openRegistration(e);
    expect(client.require_pkce).toBe(false);
    expect((await clientRow(client.client_id)).require_pkce).toBe(0);
    const tokens = await signInWithoutPkce(client, e);
    expect(tokens.status, await tokens.clone().text()).toBe(200);

    // A key client too; a client that asks for PKCE keeps it; a public client always has it.
    expect((await openRegistration(e, { token_endpoint_auth_method: "client_secret_post" })).require_pkce).toBe(false);
    expect((await openRegistration(e, { require_pkce: true })).require_pkce).toBe(true);
    const publicClient = await openRegistration(e, { token_endpoint_auth_method: "none" });
    expect(publicClient.require_pkce).toBe(true);
    const refused = await registerAt(metadata({ token_endpoint_auth_method: "none", require_pkce: false }), { env: e });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ error: "invalid_client_metadata" });

    // An RFC 7592 replacement without require_pkce takes the same default.
    const replaced = await call(
      new URL(client.registration_client_uri).pathname,
      {
        method: "PUT",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${client.registration_access_token}` },
        body: JSON.stringify({ client_id: client.client_id, redirect_uris: client.redirect_uris }),
      },
      e,
    );
    expect(await replaced.json()).toMatchObject({ require_pkce: false });

    // The admin API's default is unchanged.
    const adminClient = await admin(
      "/clients",
      {
        method: "POST",
        json: {
          client_name: "a",
          redirect_uris: ["https://admin-pkce.example.com/cb"],
          token_endpoint_auth_method: "client_secret_basic",
        },
      },
      e,
    );
    expect(await adminClient.json()).toMatchObject({ require_pkce: true });
  });

  it("a tenant sets it in its policy, for its own registrations only", async () => {
    const tenant = await createTenant();
    const patched = await admin(`/tenants/${tenant.id}`, {
      method: "PATCH",
      json: { policy: { open_registration: true, registration_require_pkce: false } },
    });
    expect(patched.status, await patched.clone().text()).toBe(200);
    const res = await registerAt(metadata(), { base: baseOf(tenant.id) });
    expect(res.status, await res.clone().text()).toBe(201);
    expect(await res.json()).toMatchObject({ require_pkce: false });
    // The default tenant keeps the deployment's (true).
    expect((await registerDynamic(metadata())).require_pkce).toBe(true);
    const bad = await admin(`/tenants/${tenant.id}`, {
      method: "PATCH",
      json: { policy: { registration_require_pkce: "no" } },
    });
    expect(bad.status).toBe(400);
  });
});
