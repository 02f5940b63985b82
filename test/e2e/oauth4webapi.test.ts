import * as oauth from "oauth4webapi";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createE2ETenant, type E2EStack, registerE2EClient, signInWithEmailCode, startE2EStack } from "./support.js";

/**
 * End to end over real HTTP with a second RP library that no one here wrote (oauth4webapi 3, the
 * strict one under openid-client), as a client_secret_post client: what issue 16 found with other
 * libraries (at_hash, userinfo by form body, introspection of a refresh token) stays fixed.
 */

let stack: E2EStack;

beforeAll(async () => {
  stack = await startE2EStack();
});

afterAll(async () => {
  await stack?.dispose();
});

// oauth4webapi refuses http:// endpoints unless told this is a local, insecure setup.
const insecure = { [oauth.allowInsecureRequests]: true } as const;

/** OIDC Core §3.1.3.6, as go-oidc's IDToken.VerifyAccessToken checks it. */
async function atHash(accessToken: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(accessToken)));
  return Buffer.from(digest.subarray(0, 16)).toString("base64url");
}

describe("oauth4webapi against the npm start runtime", () => {
  it("logs in, redeems, checks at_hash, reads userinfo by header and by form, refreshes, introspects and revokes", async () => {
    const redirectUri = `${stack.url}/e2e/callback`;
    const registered = await registerE2EClient(stack, {
      client_name: "oauth4webapi e2e",
      redirect_uris: [redirectUri],
      token_endpoint_auth_method: "client_secret_post",
      scope: "openid email offline_access",
    });
    const issuer = new URL(stack.url);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
    const client: oauth.Client = { client_id: registered.client_id };
    const auth = oauth.ClientSecretPost(registered.client_secret as string);

    const codeVerifier = oauth.generateRandomCodeVerifier();
    const nonce = oauth.generateRandomNonce();
    const state = oauth.generateRandomState();
    const authorizationUrl = new URL(as.authorization_endpoint as string);
    for (const [k, v] of Object.entries({
      client_id: client.client_id,
      redirect_uri: redirectUri,
      response_type: "code",
      scope: "openid email offline_access",
      code_challenge: await oauth.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: "S256",
      nonce,
      state,
    }))
      authorizationUrl.searchParams.set(k, v);

    const email = `e2e.o4w.${Date.now().toString(36)}@example.com`;
    const callbackUrl = await signInWithEmailCode(stack, authorizationUrl, email);
    // Checks state and RFC 9207's iss, which discovery says Keyway sends.
    const params = oauth.validateAuthResponse(as, client, callbackUrl, state);
    const tokenResponse = await oauth.authorizationCodeGrantRequest(
      as,
      client,
      auth,
      params,
      redirectUri,
      codeVerifier,
      insecure,
    );
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, tokenResponse, {
      expectedNonce: nonce,
      requireIdToken: true,
    });
    const claims = oauth.getValidatedIdTokenClaims(tokens);
    expect(claims).toMatchObject({ iss: stack.url, aud: client.client_id, nonce, email });
    expect(claims?.at_hash).toBe(await atHash(tokens.access_token));

    const byHeader = await oauth.processUserInfoResponse(
      as,
      client,
      claims?.sub as string,
      await oauth.userInfoRequest(as, client, tokens.access_token, insecure),
    );
    expect(byHeader).toMatchObject({ sub: claims?.sub, email, email_verified: true });
    // RFC 6750 §2.2, pyoidc's default: the token as a form field of a POST.
    const byForm = await fetch(as.userinfo_endpoint as string, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ access_token: tokens.access_token }),
    });
    expect(byForm.status).toBe(200);
    expect(await byForm.json()).toEqual(byHeader);

    const refreshed = await oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, auth, tokens.refresh_token as string, insecure),
    );
    expect(refreshed.refresh_token).toBeTruthy();
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    const refreshedClaims = oauth.getValidatedIdTokenClaims(refreshed);
    expect(refreshedClaims?.at_hash).toBe(await atHash(refreshed.access_token));

    const introspect = async (token: string) =>
      oauth.processIntrospectionResponse(
        as,
        client,
        await oauth.introspectionRequest(as, client, auth, token, insecure),
      );
    expect(await introspect(refreshed.access_token)).toMatchObject({
      active: true,
      token_type: "Bearer",
      client_id: client.client_id,
      sub: claims?.sub,
    });
    const rt = await introspect(refreshed.refresh_token as string);
    expect(rt).toMatchObject({ active: true, client_id: client.client_id, sub: claims?.sub });
    expect(rt).not.toHaveProperty("token_type");

    await oauth.processRevocationResponse(
      await oauth.revocationRequest(as, client, auth, refreshed.refresh_token as string, insecure),
    );
    expect(await introspect(refreshed.refresh_token as string)).toEqual({ active: false });
    // Revoking the refresh token ends its grant's access tokens too (Keyway's choice, RFC 7009 §2.1 allows it).
    expect(await introspect(refreshed.access_token)).toEqual({ active: false });
  });

  it("logs in to two tenants through their own discovery; one tenant's token is refused by the other (issue 23)", async () => {
    const email = `e2e.o4w.tenants.${Date.now().toString(36)}@example.com`;
    const sessions: { as: oauth.AuthorizationServer; client: oauth.Client; accessToken: string; sub: string }[] = [];
    for (const tag of ["initech", "umbrella"]) {
      const tenant = await createE2ETenant(stack, tag);
      const redirectUri = `${stack.url}/e2e/${tag}/callback`;
      const registered = await registerE2EClient(
        stack,
        {
          client_name: `oauth4webapi ${tag}`,
          redirect_uris: [redirectUri],
          token_endpoint_auth_method: "client_secret_post",
          scope: "openid email",
        },
        tenant.id,
      );
      const issuer = new URL(tenant.issuer);
      const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
      expect(as.issuer).toBe(tenant.issuer);
      const client: oauth.Client = { client_id: registered.client_id };
      const auth = oauth.ClientSecretPost(registered.client_secret as string);
      const codeVerifier = oauth.generateRandomCodeVerifier();
      const nonce = oauth.generateRandomNonce();
      const authorizationUrl = new URL(as.authorization_endpoint as string);
      for (const [k, v] of Object.entries({
        client_id: client.client_id,
        redirect_uri: redirectUri,
        response_type: "code",
        scope: "openid email",
        code_challenge: await oauth.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: "S256",
        nonce,
      }))
        authorizationUrl.searchParams.set(k, v);
      const callbackUrl = await signInWithEmailCode(stack, authorizationUrl, email, tenant.issuer);
      const params = oauth.validateAuthResponse(as, client, callbackUrl, oauth.expectNoState);
      const tokens = await oauth.processAuthorizationCodeResponse(
        as,
        client,
        await oauth.authorizationCodeGrantRequest(as, client, auth, params, redirectUri, codeVerifier, insecure),
        { expectedNonce: nonce, requireIdToken: true },
      );
      const claims = oauth.getValidatedIdTokenClaims(tokens);
      expect(claims?.iss).toBe(tenant.issuer);
      sessions.push({ as, client, accessToken: tokens.access_token, sub: claims?.sub as string });
    }
    const [first, second] = sessions as [(typeof sessions)[0], (typeof sessions)[0]];
    expect(first.sub).not.toBe(second.sub);
    // The first tenant's access token at the second's userinfo: 401 invalid_token.
    const crossed = await fetch(second.as.userinfo_endpoint as string, {
      headers: { Authorization: `Bearer ${first.accessToken}` },
    });
    expect(crossed.status).toBe(401);
    expect(crossed.headers.get("www-authenticate")).toContain("invalid_token");
  });
});
