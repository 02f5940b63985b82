import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as oidc from "openid-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateSecrets } from "../../scripts/lib/local.mjs";
import { freePort, type Stack, startStack } from "../../scripts/stack.mjs";

/**
 * End to end over real HTTP: the built Workers in one workerd (the `npm start` runtime) on a free
 * port, with fresh secrets and a temporary state folder, driven by a certified RP library.
 */

let stack: Stack;
let tmp: string;
let adminToken: string;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), "keyway-e2e-"));
  const vars = generateSecrets();
  adminToken = vars.ADMIN_TOKEN as string;
  stack = await startStack({
    port: await freePort(),
    persistTo: join(tmp, "state"),
    outDir: join(tmp, "dist"),
    vars,
  });
});

afterAll(async () => {
  await stack?.dispose();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** What a browser keeps between the steps: cookies by name (one host, so no domain matching needed). */
class CookieJar {
  private readonly cookies = new Map<string, string>();

  async fetch(url: string | URL, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.cookies.size) headers.set("Cookie", [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "));
    const res = await fetch(url, { ...init, headers, redirect: "manual" });
    for (const line of res.headers.getSetCookie()) {
      const [pair = "", ...attrs] = line.split(";");
      const eq = pair.indexOf("=");
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (value === "" || attrs.some((a) => /^\s*max-age=0\s*$/i.test(a))) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return res;
  }

  postJson(url: string, body: unknown): Promise<Response> {
    return this.fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
    });
  }
}

async function createClient(redirectUri: string): Promise<{ client_id: string; client_secret: string }> {
  const res = await fetch(`${stack.url}/admin/v1/clients`, {
    method: "POST",
    headers: { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify({
      client_name: "openid-client e2e",
      redirect_uris: [redirectUri],
      token_endpoint_auth_method: "client_secret_basic",
      scope: "openid email offline_access",
    }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { client_id: string; client_secret: string };
}

describe("openid-client against the npm start runtime", () => {
  it("discovers, logs in with an emailed code, redeems, reads userinfo and refreshes", async () => {
    // The RP never serves this URI: the test takes the callback URL from the Location header.
    const redirectUri = `${stack.url}/e2e/callback`;
    const registered = await createClient(redirectUri);

    // openid-client refuses http:// endpoints unless told this is a local, insecure setup.
    const config = await oidc.discovery(
      new URL(stack.url),
      registered.client_id,
      undefined,
      oidc.ClientSecretBasic(registered.client_secret),
      { execute: [oidc.allowInsecureRequests] },
    );
    expect(config.serverMetadata().issuer).toBe(stack.url);

    const codeVerifier = oidc.randomPKCECodeVerifier();
    const nonce = oidc.randomNonce();
    const state = oidc.randomState();
    const authorizationUrl = oidc.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: "openid email offline_access",
      code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: "S256",
      nonce,
      state,
    });

    const browser = new CookieJar();
    const email = `e2e.${Date.now().toString(36)}@example.com`;

    // 1. AuthorizeInit
    const init = await browser.fetch(authorizationUrl, { headers: { Accept: "application/json" } });
    expect(init.status, await init.clone().text()).toBe(200);
    const { tx } = (await init.json()) as { tx: string };

    // 2. EmailCodeGenerate, then the code from the dev mailbox
    const generate = await browser.postJson(`${stack.url}/email-code/generate`, { tx, email });
    expect(generate.status, await generate.clone().text()).toBe(200);
    const mailbox = await fetch(`${stack.url}/__dev/mailbox/${encodeURIComponent(email)}`);
    expect(mailbox.status).toBe(200);
    const { messages } = (await mailbox.json()) as { messages: { code: string }[] };
    const code = messages[0]?.code;
    expect(code).toMatch(/^\d{6}$/);

    // 3. EmailCodeVerify
    const verify = await browser.postJson(`${stack.url}/email-code/verify`, { tx, email, code });
    expect(verify.status, await verify.clone().text()).toBe(200);
    const { redirect_to } = (await verify.json()) as { redirect_to: string };

    // 4. AuthorizeCode: follow redirect_to by hand and keep the redirect to the client
    const finish = await browser.fetch(redirect_to);
    expect(finish.status, await finish.clone().text()).toBe(302);
    const callbackUrl = new URL(finish.headers.get("location") ?? "");
    expect(`${callbackUrl.origin}${callbackUrl.pathname}`).toBe(redirectUri);

    // 5. Token: checks state, iss (RFC 9207), PKCE, and the ID token's signature, aud and nonce
    const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
      pkceCodeVerifier: codeVerifier,
      expectedNonce: nonce,
      expectedState: state,
      idTokenExpected: true,
    });
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
});
