import * as oidc from "openid-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CookieJar,
  createE2ETenant,
  type E2EStack,
  registerE2EClient,
  signInWithEmailCode,
  startE2EStack,
} from "./support.js";

/** End to end over real HTTP, driven by a certified RP library (openid-client 6). */

let stack: E2EStack;

beforeAll(async () => {
  stack = await startE2EStack();
});

afterAll(async () => {
  await stack?.dispose();
});

/**
 * openid-client's configuration for a registered client, from its issuer's discovery document
 * (OIDC Discovery §4). openid-client refuses http:// endpoints unless told this is a local, insecure setup.
 */
function discover(issuer: string, clientId: string, auth: oidc.ClientAuth): Promise<oidc.Configuration> {
  return oidc.discovery(new URL(issuer), clientId, undefined, auth, { execute: [oidc.allowInsecureRequests] });
}

/**
 * A login as openid-client makes it: the authorization URL it builds (PKCE, nonce, state, and any
 * `extra` parameter), a sign-in by emailed code, then the code grant, which checks state, iss (RFC
 * 9207), PKCE, and the ID token's signature, aud and nonce.
 */
async function codeLogin(
  config: oidc.Configuration,
  o: { redirectUri: string; scope: string; email: string; issuer?: string; extra?: Record<string, string> },
) {
  const codeVerifier = oidc.randomPKCECodeVerifier();
  const nonce = oidc.randomNonce();
  const state = oidc.randomState();
  const authorizationUrl = oidc.buildAuthorizationUrl(config, {
    redirect_uri: o.redirectUri,
    scope: o.scope,
    code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
    code_challenge_method: "S256",
    nonce,
    state,
    ...o.extra,
  });
  const callbackUrl = await signInWithEmailCode(stack, authorizationUrl, o.email, o.issuer);
  const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
    pkceCodeVerifier: codeVerifier,
    expectedNonce: nonce,
    expectedState: state,
    idTokenExpected: true,
  });
  return { tokens, nonce, callbackUrl };
}

describe("openid-client against the npm start runtime", () => {
  it("discovers, logs in with an emailed code, redeems, reads userinfo and refreshes", async () => {
    // The RP never serves this URI: the test takes the callback URL from the Location header.
    const redirectUri = `${stack.url}/e2e/callback`;
    const registered = await registerE2EClient(stack, {
      client_name: "openid-client e2e",
      redirect_uris: [redirectUri],
      token_endpoint_auth_method: "client_secret_basic",
      scope: "openid email offline_access",
    });

    const config = await discover(
      stack.url,
      registered.client_id,
      oidc.ClientSecretBasic(registered.client_secret as string),
    );
    expect(config.serverMetadata().issuer).toBe(stack.url);

    const email = `e2e.${Date.now().toString(36)}@example.com`;
    const { tokens, nonce, callbackUrl } = await codeLogin(config, {
      redirectUri,
      scope: "openid email offline_access",
      email,
    });
    expect(`${callbackUrl.origin}${callbackUrl.pathname}`).toBe(redirectUri);
    const claims = tokens.claims();
    expect(claims).toMatchObject({
      iss: stack.url,
      aud: registered.client_id,
      nonce,
      email,
      email_verified: true,
      amr: ["otp"],
    });
    expect(tokens.token_type.toLowerCase()).toBe("bearer");
    expect(tokens.refresh_token).toBeTruthy();

    const userinfo = await oidc.fetchUserInfo(config, tokens.access_token, claims?.sub ?? "");
    expect(userinfo).toMatchObject({ sub: claims?.sub, email, email_verified: true });

    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token as string);
    expect(refreshed.access_token).toBeTruthy();
    expect(refreshed.refresh_token).toBeTruthy();
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    const again = await oidc.fetchUserInfo(config, refreshed.access_token, claims?.sub ?? "");
    expect(again.sub).toBe(claims?.sub);
  });

  it("gets a client's own token with client_credentials, and introspects and revokes it", async () => {
    const registered = await registerE2EClient(stack, {
      client_name: "openid-client machine e2e",
      token_endpoint_auth_method: "client_secret_basic",
      grant_types: ["client_credentials"],
      scope: "reports:read reports:write",
    });
    const config = await discover(
      stack.url,
      registered.client_id,
      oidc.ClientSecretBasic(registered.client_secret as string),
    );
    expect(config.serverMetadata().grant_types_supported).toContain("client_credentials");
    const tokens = await oidc.clientCredentialsGrant(config, { scope: "reports:read" });
    expect(tokens.token_type.toLowerCase()).toBe("bearer");
    expect(tokens.scope).toBe("reports:read");
    expect(tokens.id_token).toBeUndefined();
    expect(tokens.refresh_token).toBeUndefined();
    const introspection = await oidc.tokenIntrospection(config, tokens.access_token);
    expect(introspection).toMatchObject({ active: true, client_id: registered.client_id, sub: registered.client_id });
    await oidc.tokenRevocation(config, tokens.access_token);
    expect((await oidc.tokenIntrospection(config, tokens.access_token)).active).toBe(false);
  });

  it("signs a device in with the device authorization grant: the device polls while a person allows it", async () => {
    const registered = await registerE2EClient(stack, {
      client_name: "openid-client device e2e",
      token_endpoint_auth_method: "none",
      grant_types: ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"],
      scope: "openid email offline_access",
    });
    const config = await discover(stack.url, registered.client_id, oidc.None());
    const device = await oidc.initiateDeviceAuthorization(config, { scope: "openid email offline_access" });
    expect(device.user_code).toMatch(/^[A-Z]{4}-[A-Z]{4}$/);

    // The person, in a browser: the verification page, a sign-in by emailed code, then Allow.
    const browser = new CookieJar();
    const email = `e2e.device.${Date.now().toString(36)}@example.com`;
    const page = await browser.fetch(device.verification_uri_complete as string);
    const tx = /name="tx" value="([^"]+)"/.exec(await page.text())?.[1] as string;
    expect((await browser.postJson(`${stack.url}/email-code/generate`, { tx, email })).status).toBe(200);
    const mailbox = await fetch(`${stack.url}/__dev/mailbox/${encodeURIComponent(email)}`);
    const code = ((await mailbox.json()) as { messages: { code: string }[] }).messages[0]?.code;
    const verify = await browser.postJson(`${stack.url}/email-code/verify`, { tx, email, code });
    const { redirect_to } = (await verify.json()) as { redirect_to: string };
    const back = await browser.fetch(redirect_to);
    const consent = await browser.fetch(new URL(back.headers.get("location") as string, stack.url));
    expect(await consent.text()).toContain("openid-client device e2e");
    const allow = await browser.fetch(`${stack.url}/device/decision`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Origin: stack.url },
      body: new URLSearchParams({ user_code: device.user_code, decision: "approve" }),
    });
    expect(allow.status).toBe(200);

    // The device's library polls at the interval it was given until the tokens come.
    const tokens = await oidc.pollDeviceAuthorizationGrant(config, device);
    expect(tokens.claims()).toMatchObject({ aud: registered.client_id, email });
    expect(tokens.refresh_token).toBeTruthy();
  });

  it("reads org_id and org_roles from a login for an organization, and the template's claims (issue 24)", async () => {
    const admin = (path: string, body: unknown) =>
      fetch(`${stack.url}/admin/v1${path}`, {
        method: "POST",
        headers: { Authorization: `Bearer ${stack.adminToken}`, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    const email = `e2e.org.${Date.now().toString(36)}@example.com`;
    const user = (await (await admin("/users", { email })).json()) as { id: string };
    const orgRes = await admin("/organizations", { name: "E2E Org", attributes: { plan: "pro" } });
    expect(orgRes.status).toBe(201);
    const org = (await orgRes.json()) as { id: string };
    expect(
      (await admin(`/organizations/${org.id}/members`, { user_id: user.id, roles: ["admin", "billing"] })).status,
    ).toBe(201);
    const redirectUri = `${stack.url}/e2e/callback`;
    const registered = await registerE2EClient(stack, {
      client_name: "openid-client organizations e2e",
      redirect_uris: [redirectUri],
      token_endpoint_auth_method: "client_secret_basic",
      scope: "openid email",
      token_claims: { claims: [{ claim: "plan", source: "organization.attributes.plan" }] },
    });
    const config = await discover(
      stack.url,
      registered.client_id,
      oidc.ClientSecretBasic(registered.client_secret as string),
    );
    const { tokens } = await codeLogin(config, {
      redirectUri,
      scope: "openid email",
      email,
      extra: { organization: org.id },
    });
    expect(tokens.claims()).toMatchObject({
      sub: user.id,
      org_id: org.id,
      org_roles: ["admin", "billing"],
      plan: "pro",
    });
  });

  it("logs in to two tenants, each through its own discovery, issuer and keys (issue 23)", async () => {
    const email = `e2e.tenants.${Date.now().toString(36)}@example.com`;
    const subs: string[] = [];
    const issuers: string[] = [];
    for (const tag of ["acme", "globex"]) {
      const tenant = await createE2ETenant(stack, tag);
      const redirectUri = `${stack.url}/e2e/${tag}/callback`;
      const registered = await registerE2EClient(
        stack,
        {
          client_name: `openid-client ${tag}`,
          redirect_uris: [redirectUri],
          token_endpoint_auth_method: "client_secret_basic",
          scope: "openid email offline_access",
        },
        tenant.id,
      );
      // Discovery from the tenant's issuer URL (OIDC Discovery §4: issuer + /.well-known/...).
      const config = await discover(
        tenant.issuer,
        registered.client_id,
        oidc.ClientSecretBasic(registered.client_secret as string),
      );
      expect(config.serverMetadata().issuer).toBe(tenant.issuer);
      // The library checks iss (RFC 9207) against the tenant's issuer and the ID token against its JWKS.
      const { tokens } = await codeLogin(config, {
        redirectUri,
        scope: "openid email offline_access",
        email,
        issuer: tenant.issuer,
      });
      const claims = tokens.claims();
      expect(claims).toMatchObject({ iss: tenant.issuer, aud: registered.client_id, email });
      const userinfo = await oidc.fetchUserInfo(config, tokens.access_token, claims?.sub ?? "");
      expect(userinfo.email).toBe(email);
      const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token as string);
      expect(refreshed.access_token).toBeTruthy();
      subs.push(claims?.sub as string);
      issuers.push(tenant.issuer);
    }
    // One address, two tenants: two users.
    expect(new Set(subs).size).toBe(2);
    expect(new Set(issuers).size).toBe(2);
  });
});
