import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { calculateJwkThumbprint, decodeJwt, exportJWK, generateKeyPair } from "jose";
import * as oauth from "oauth4webapi";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/lib/local.mjs";
import { createE2ETenant, type E2EStack, registerE2EClient, signInWithEmailCode, startE2EStack } from "./support.js";

/**
 * Issue 41, interop: two RP libraries no one here wrote complete a DPoP-bound login with a pushed
 * authorization request, a refresh and userinfo, at the origin and at a tenant:
 * - oauth4webapi 3 with its own `pushedAuthorizationRequest`, `DPoP` and `PrivateKeyJwt` (and as a
 *   public client, whose refresh token is bound to its DPoP key);
 * - Authlib (Python), whose OAuth2Session redeems and refreshes with its private_key_jwt; it has no PAR
 *   helper nor DPoP client, so its script pushes with requests and signs proofs with joserfc
 *   (test/e2e/authlib/dpop_login.py).
 */

let stack: E2EStack;

beforeAll(async () => {
  stack = await startE2EStack();
});

afterAll(async () => {
  await stack?.dispose();
});

const insecure = { [oauth.allowInsecureRequests]: true } as const;

async function clientKey(alg: "ES256" | "PS256") {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = `e2e-${alg}-${Math.random().toString(36).slice(2, 8)}`;
  return {
    privateKey,
    kid,
    publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: "sig" },
    privateJwk: { ...(await exportJWK(privateKey)), kid, alg, use: "sig" },
  };
}

/** Where the login happens: the origin, or a tenant of the stack. */
async function place(at: "origin" | "tenant") {
  if (at === "origin") return { issuer: stack.url, tenant: undefined };
  const t = await createE2ETenant(stack, "fapi");
  return { issuer: t.issuer, tenant: t.id };
}

/** RFC 9449 §6.1: the thumbprint a bound access token names in `cnf.jkt`. */
const jktOf = (token: string) => (decodeJwt(token).cnf as { jkt?: string } | undefined)?.jkt;

/**
 * oauth4webapi's pushed authorization request with a DPoP proof, the person's sign-in by its
 * request_uri, and the code redeemed with the same key: the token endpoint's processed answer.
 */
async function pushedLogin(
  as: oauth.AuthorizationServer,
  client: oauth.Client,
  auth: oauth.ClientAuth,
  DPoP: oauth.DPoPHandle,
  o: { redirectUri: string; email: string; issuer: string; nonce?: string },
) {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const pushed = await oauth.processPushedAuthorizationResponse(
    as,
    client,
    await oauth.pushedAuthorizationRequest(
      as,
      client,
      auth,
      {
        redirect_uri: o.redirectUri,
        response_type: "code",
        scope: "openid email offline_access",
        state,
        ...(o.nonce ? { nonce: o.nonce } : {}),
        code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
        code_challenge_method: "S256",
      },
      { DPoP, ...insecure },
    ),
  );
  expect(pushed.request_uri).toMatch(/^urn:ietf:params:oauth:request_uri:/);
  const authorizationUrl = new URL(as.authorization_endpoint as string);
  authorizationUrl.searchParams.set("client_id", client.client_id);
  authorizationUrl.searchParams.set("request_uri", pushed.request_uri);
  const callback = await signInWithEmailCode(stack, authorizationUrl, o.email, o.issuer);
  const params = oauth.validateAuthResponse(as, client, callback, state);
  const tokens = await oauth.processAuthorizationCodeResponse(
    as,
    client,
    await oauth.authorizationCodeGrantRequest(as, client, auth, params, o.redirectUri, verifier, {
      DPoP,
      ...insecure,
    }),
    o.nonce ? { expectedNonce: o.nonce, requireIdToken: true } : undefined,
  );
  return { tokens, authorizationUrl };
}

describe("oauth4webapi: PAR, DPoP and private_key_jwt", () => {
  for (const at of ["origin", "tenant"] as const)
    it(`a confidential client at the ${at}: pushed request, DPoP-bound tokens, userinfo, refresh, introspection`, async () => {
      const { issuer, tenant } = await place(at);
      const redirectUri = `${stack.url}/e2e/fapi-callback`;
      const key = await clientKey("ES256");
      const registered = await registerE2EClient(
        stack,
        {
          client_name: `oauth4webapi FAPI ${at}`,
          redirect_uris: [redirectUri],
          token_endpoint_auth_method: "private_key_jwt",
          jwks: { keys: [key.publicJwk] },
          grant_types: ["authorization_code", "refresh_token"],
          scope: "openid email offline_access",
          id_token_signed_response_alg: "ES256",
          require_pushed_authorization_requests: true,
          dpop_bound_access_tokens: true,
        },
        tenant,
      );
      const as = await oauth.processDiscoveryResponse(
        new URL(issuer),
        await oauth.discoveryRequest(new URL(issuer), insecure),
      );
      expect(as.pushed_authorization_request_endpoint).toBe(`${issuer}/par`);
      expect(as.dpop_signing_alg_values_supported).toContain("ES256");
      const client: oauth.Client = { client_id: registered.client_id, id_token_signed_response_alg: "ES256" };
      const auth = oauth.PrivateKeyJwt({ key: key.privateKey, kid: key.kid });
      const dpopKeys = await oauth.generateKeyPair("ES256");
      const DPoP = oauth.DPoP(client, dpopKeys);

      const email = `e2e.fapi.${at}.${Date.now().toString(36)}@example.com`;
      const { tokens, authorizationUrl } = await pushedLogin(as, client, auth, DPoP, {
        redirectUri,
        email,
        issuer,
        nonce: oauth.generateRandomNonce(),
      });
      expect(tokens.token_type).toBe("dpop");
      const jkt = await calculateJwkThumbprint(await exportJWK(dpopKeys.publicKey));
      expect(jktOf(tokens.access_token)).toBe(jkt);
      const sub = oauth.getValidatedIdTokenClaims(tokens)?.sub as string;

      const info = await oauth.processUserInfoResponse(
        as,
        client,
        sub,
        await oauth.userInfoRequest(as, client, tokens.access_token, { DPoP, ...insecure }),
      );
      expect(info).toMatchObject({ sub, email });
      // RFC 9449 §7.2: a bound token presented as a Bearer token is refused.
      const asBearer = await fetch(as.userinfo_endpoint as string, {
        headers: { Authorization: `Bearer ${tokens.access_token}` },
      });
      expect(asBearer.status).toBe(401);

      // A confidential client's refresh needs no particular key (RFC 9449 §5); the new token is bound.
      const refreshed = await oauth.processRefreshTokenResponse(
        as,
        client,
        await oauth.refreshTokenGrantRequest(as, client, auth, tokens.refresh_token as string, { DPoP, ...insecure }),
      );
      expect(refreshed.token_type).toBe("dpop");
      expect(jktOf(refreshed.access_token)).toBe(jkt);
      const introspected = await oauth.processIntrospectionResponse(
        as,
        client,
        await oauth.introspectionRequest(as, client, auth, refreshed.access_token, insecure),
      );
      expect(introspected).toMatchObject({ active: true, token_type: "DPoP", cnf: { jkt } });

      // The request_uri was spent by the login.
      const again = await fetch(authorizationUrl, { redirect: "manual", headers: { Accept: "application/json" } });
      expect(again.status).toBe(302);
      expect(new URL(again.headers.get("location") as string).searchParams.get("error")).toBe("invalid_request_uri");
    });

  it("a public client: its refresh token is bound to its DPoP key (RFC 9449 §5)", async () => {
    const redirectUri = `${stack.url}/e2e/fapi-public`;
    const registered = await registerE2EClient(stack, {
      client_name: "oauth4webapi FAPI public",
      redirect_uris: [redirectUri],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      scope: "openid email offline_access",
    });
    const issuer = new URL(stack.url);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
    const client: oauth.Client = { client_id: registered.client_id };
    const auth = oauth.None();
    const dpopKeys = await oauth.generateKeyPair("ES256");
    const DPoP = oauth.DPoP(client, dpopKeys);
    const { tokens } = await pushedLogin(as, client, auth, DPoP, {
      redirectUri,
      email: `e2e.fapi.public.${Date.now().toString(36)}@example.com`,
      issuer: stack.url,
    });
    expect(tokens.token_type).toBe("dpop");
    const otherKey = oauth.DPoP(client, await oauth.generateKeyPair("ES256"));
    const stolen = await oauth.refreshTokenGrantRequest(as, client, auth, tokens.refresh_token as string, {
      DPoP: otherKey,
      ...insecure,
    });
    expect(stolen.status).toBe(400);
    expect(((await stolen.json()) as { error: string }).error).toBe("invalid_grant");
    const refreshed = await oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, auth, tokens.refresh_token as string, { DPoP, ...insecure }),
    );
    expect(jktOf(refreshed.access_token)).toBe(await calculateJwkThumbprint(await exportJWK(dpopKeys.publicKey)));
  });
});

/** Authlib in a virtual environment under .keyway/ (pinned, installed from PyPI once). */
function authlibPython(): string {
  const venv = join(ROOT, ".keyway", "venv-authlib");
  const python = join(venv, "bin", "python");
  if (!existsSync(join(venv, ".ready"))) {
    execFileSync("python3", ["-m", "venv", venv], { stdio: "inherit", timeout: 60_000 });
    execFileSync(
      join(venv, "bin", "pip"),
      ["install", "--quiet", "--disable-pip-version-check", "authlib==1.9.10", "joserfc==1.8.0", "requests==2.34.2"],
      { stdio: "inherit", timeout: 240_000 },
    );
    execFileSync("touch", [join(venv, ".ready")]);
  }
  return python;
}

/** Runs the Authlib script: it prints the authorization URL, is given the callback, prints its result. */
async function authlibLogin(config: Record<string, unknown>, signIn: (url: URL) => Promise<URL>) {
  const child: ChildProcessWithoutNullStreams = spawn(
    authlibPython(),
    [join(ROOT, "test", "e2e", "authlib", "dpop_login.py"), JSON.stringify(config)],
    { stdio: ["pipe", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const line = await lines.next();
    if (line.done) throw new Error(`Authlib's script ended: ${stderr}`);
    return JSON.parse(line.value) as Record<string, unknown>;
  };
  try {
    const { authorization_url } = (await next()) as { authorization_url: string };
    const callback = await signIn(new URL(authorization_url));
    child.stdin.write(`${callback}\n`);
    return (await next()).result as Record<string, unknown>;
  } finally {
    child.kill();
  }
}

describe("Authlib: PAR, DPoP and private_key_jwt", () => {
  for (const at of ["origin", "tenant"] as const)
    it(`completes a DPoP-bound login, userinfo and refresh at the ${at}`, { timeout: 300_000 }, async () => {
      const { issuer, tenant } = await place(at);
      const redirectUri = `${stack.url}/e2e/authlib-callback`;
      const key = await clientKey("ES256");
      const registered = await registerE2EClient(
        stack,
        {
          client_name: `Authlib FAPI ${at}`,
          redirect_uris: [redirectUri],
          token_endpoint_auth_method: "private_key_jwt",
          jwks: { keys: [key.publicJwk] },
          grant_types: ["authorization_code", "refresh_token"],
          scope: "openid email offline_access",
          require_pushed_authorization_requests: true,
          dpop_bound_access_tokens: true,
        },
        tenant,
      );
      const email = `e2e.authlib.${at}.${Date.now().toString(36)}@example.com`;
      const result = await authlibLogin(
        { issuer, client_id: registered.client_id, client_jwk: key.privateJwk, redirect_uri: redirectUri },
        (url) => signInWithEmailCode(stack, url, email, issuer),
      );
      expect(result.token_type).toBe("DPoP");
      expect(result.refreshed_token_type).toBe("DPoP");
      expect(jktOf(result.access_token as string)).toBe(result.dpop_jkt);
      expect(result.userinfo_status).toBe(200);
      expect(result.userinfo).toMatchObject({ email });
      expect(result.bearer_status).toBe(401);
      expect(result.refreshed_rotated).toBe(true);
      expect(result.refreshed_userinfo).toMatchObject({ email });
      expect(decodeJwt(result.id_token as string).iss).toBe(issuer);
    });
});
