import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  authorizeQuery,
  Browser,
  call,
  codeFromSession,
  fullLogin,
  ISSUER,
  pinClock,
  pkce,
  redeem,
  registerClient,
  type TestClient,
  type Tokens,
  verifyJwt,
} from "../support/harness";

/**
 * `id_token_hint`, `prompt`, `max_age` and `acr_values` at /authorize as OIDC Core §3.1.2.1 says and
 * the OpenID Foundation's plans test them (oidcc-id-token-hint, oidcc-prompt-login,
 * oidcc-prompt-none-*, oidcc-max-age-*, oidcc-ensure-request-with-acr-values-succeeds; issue 40).
 */

afterEach(() => {
  vi.useRealTimers();
});

function expectRedirectError(res: Response, client: TestClient, error: string) {
  expect(res.status, `${res.headers.get("location")}`).toBe(302);
  const loc = new URL(res.headers.get("location") as string);
  expect(`${loc.origin}${loc.pathname}`).toBe(client.redirect_uris[0]);
  expect(loc.searchParams.get("error"), loc.searchParams.get("error_description") ?? "").toBe(error);
  expect(loc.searchParams.get("state")).toBe("st-123");
  expect(loc.searchParams.get("iss")).toBe(ISSUER);
  expect(loc.searchParams.get("code")).toBeNull();
}

/** The authorization request again in `browser`; JSON when it starts a login. */
async function authorizeAgain(browser: Browser, client: TestClient, extra: Record<string, string>) {
  const { challenge } = await pkce();
  return browser.fetch(`/authorize?${authorizeQuery(client, challenge, extra)}`, {
    headers: { Accept: "application/json" },
  });
}

async function expectLoginStarted(res: Response) {
  expect(res.status, `${res.headers.get("location")}`).toBe(200);
  expect(((await res.json()) as { tx: string }).tx).toMatch(/^tx_/);
}

const idClaims = async (tokens: Tokens) => (await verifyJwt(tokens.id_token)).payload;

describe("id_token_hint (OIDC Core §3.1.2.1)", () => {
  it("with prompt=none and the session's user, answers with a code; sub and auth_time match (oidcc-id-token-hint)", async () => {
    const client = await registerClient();
    const first = await fullLogin(client);
    const { code, verifier } = await codeFromSession(first.browser, client, { id_token_hint: first.tokens.id_token });
    const res = await redeem(client, code, verifier);
    expect(res.status).toBe(200);
    const second = await idClaims((await res.json()) as Tokens);
    const before = await idClaims(first.tokens);
    expect(second.sub).toBe(before.sub);
    expect(second.auth_time).toBe(before.auth_time);
  });

  it("takes an expired ID token as the hint (the spec allows it), while the session lasts", async () => {
    const client = await registerClient();
    const move = pinClock();
    const first = await fullLogin(client);
    move(700_000); // past the ID token's 10 minutes
    const { code } = await codeFromSession(first.browser, client, { id_token_hint: first.tokens.id_token });
    expect(code).toMatch(/^ac_/);
  });

  it("with prompt=none, another user's session or none at all is login_required", async () => {
    const client = await registerClient();
    const ada = await fullLogin(client);
    const bob = await fullLogin(client);
    expectRedirectError(
      await authorizeAgain(ada.browser, client, { prompt: "none", id_token_hint: bob.tokens.id_token }),
      client,
      "login_required",
    );
    expectRedirectError(
      await authorizeAgain(new Browser(), client, { prompt: "none", id_token_hint: bob.tokens.id_token }),
      client,
      "login_required",
    );
  });

  it("without prompt=none, another user's session starts a new login; the hint's user is answered", async () => {
    const client = await registerClient();
    const ada = await fullLogin(client);
    const bob = await fullLogin(client);
    await expectLoginStarted(await authorizeAgain(ada.browser, client, { id_token_hint: bob.tokens.id_token }));
    const same = await authorizeAgain(ada.browser, client, { id_token_hint: ada.tokens.id_token });
    expect(same.status).toBe(302);
    expect(new URL(same.headers.get("location") as string).searchParams.get("code")).toMatch(/^ac_/);
    // The login page for a browser with another user's session is the HTML one for a person.
    const { challenge } = await pkce();
    const page = await ada.browser.fetch(
      `/authorize?${authorizeQuery(client, challenge, { id_token_hint: bob.tokens.id_token })}`,
    );
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<input[^>]*name="email"/);
  });

  it("refuses, as invalid_request at the client, a hint that is no ID token Keyway signed for this client", async () => {
    const client = await registerClient();
    const other = await registerClient();
    const ada = await fullLogin(client);
    // The same user's ID token, issued to another client.
    const fromSession = await codeFromSession(ada.browser, other);
    const forOther = (await (await redeem(other, fromSession.code, fromSession.verifier)).json()) as Tokens;
    const [head, body, sig] = ada.tokens.id_token.split(".") as [string, string, string];
    const tampered = `${head}.${body}.${sig.slice(0, -4)}${sig.slice(-4) === "AAAA" ? "BBBB" : "AAAA"}`;
    const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true });
    const forged = await new SignJWT({ sub: (await idClaims(ada.tokens)).sub, aud: client.client_id })
      .setProtectedHeader({ alg: "ES256", kid: (await exportJWK(publicKey)).x as string })
      .setIssuer(ISSUER)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(privateKey);
    for (const hint of ["not-a-jwt", tampered, forged, ada.tokens.access_token, forOther.id_token]) {
      for (const prompt of [{ prompt: "none" }, {}] as Record<string, string>[])
        expectRedirectError(
          await authorizeAgain(ada.browser, client, { ...prompt, id_token_hint: hint }),
          client,
          "invalid_request",
        );
    }
  });
});

describe("prompt and max_age (OIDC Core §3.1.2.1)", () => {
  it("accepts prompt=consent without a new login (there is no consent step); select_account shows the login page", async () => {
    const client = await registerClient();
    const ada = await fullLogin(client);
    const consent = await authorizeAgain(ada.browser, client, { prompt: "consent" });
    expect(consent.status).toBe(302);
    expect(new URL(consent.headers.get("location") as string).searchParams.get("code")).toMatch(/^ac_/);
    await expectLoginStarted(await authorizeAgain(new Browser(), client, { prompt: "consent" }));
    await expectLoginStarted(await authorizeAgain(ada.browser, client, { prompt: "select_account" }));
    await expectLoginStarted(await authorizeAgain(ada.browser, client, { prompt: "login consent" }));
    expectRedirectError(
      await authorizeAgain(ada.browser, client, { prompt: "none consent" }),
      client,
      "invalid_request",
    );
  });

  it("max_age=0 always forces a new login, even within the second the session began; the ID token carries auth_time", async () => {
    const client = await registerClient();
    // On a whole second, so the session is exactly 0 s old when asked again.
    const start = Math.ceil(Date.now() / 1000) * 1000 + 1000;
    const move = pinClock(start);
    const first = await fullLogin(client);
    await expectLoginStarted(await authorizeAgain(first.browser, client, { max_age: "0" }));
    expectRedirectError(
      await authorizeAgain(first.browser, client, { max_age: "0", prompt: "none" }),
      client,
      "login_required",
    );
    move(120_000); // past the address's resend interval
    const second = await fullLogin(client, first.email, { browser: first.browser, extra: { max_age: "0" } });
    const claims = await idClaims(second.tokens);
    expect(claims.auth_time).toBe(start / 1000 + 120);
    expect((await idClaims(first.tokens)).auth_time).toBe(start / 1000);
  });
});

describe("acr_values (OIDC Core §3.1.2.1, voluntary)", () => {
  it("is accepted and not acted on: no acr in the ID token, no acr_values_supported in discovery", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client, undefined, {
      extra: { acr_values: "urn:mace:incommon:iap:silver urn:mace:incommon:iap:bronze" },
    });
    expect((await idClaims(tokens)).acr).toBeUndefined();
    const doc = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, unknown>;
    expect(doc.acr_values_supported).toBeUndefined();
  });
});
