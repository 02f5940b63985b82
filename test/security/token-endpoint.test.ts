import { describe, expect, it } from "vitest";
import {
  Browser,
  basicAuth,
  call,
  form,
  fullLogin,
  ISSUER,
  pkce,
  registerClient,
  type TestClient,
  uniqueEmail,
} from "../support/harness";

// Checklist C10 (no-store on every answer of the token-side endpoints, preflights and errors included)
// and C11 (CORS only for registered origins, never with credentials). C1-C9 are proven in
// test/token/authorization-code.test.ts and test/stores/auth-code-store.test.ts.

const APP = "https://app-c11.example.com";
const EVIL = "https://evil-c11.example.com";

const preflight = (path: string, origin: string | null, method = "POST") =>
  call(path, {
    method: "OPTIONS",
    headers: {
      ...(origin ? { Origin: origin } : {}),
      "Access-Control-Request-Method": method,
      "Access-Control-Request-Headers": "authorization, content-type",
    },
  });

/** Every response these tests see passes through here: none may allow credentials. */
const keep = (res: Response) => {
  expect(res.headers.get("access-control-allow-credentials"), `${res.status} ${res.url}`).toBeNull();
  return res;
};

async function tokenCall(client: TestClient, origin: string | null, params: Record<string, string>, path = "/token") {
  return keep(
    await call(path, {
      method: "POST",
      headers: {
        "Content-Type": "application/x-www-form-urlencoded",
        Authorization: basicAuth(client),
        ...(origin ? { Origin: origin } : {}),
      },
      body: new URLSearchParams(params),
    }),
  );
}

describe("C11: CORS on the token side only for a client's registered origins, never with credentials (every response checked)", () => {
  it("answers a preflight from a registered origin, refuses any other, on token, userinfo, revoke and introspect", async () => {
    await registerClient({ allowed_cors_origins: [APP] });
    for (const path of ["/token", "/userinfo", "/revoke", "/introspect"]) {
      const ok = keep(await preflight(path, APP));
      expect(ok.status, path).toBe(204);
      expect(ok.headers.get("access-control-allow-origin")).toBe(APP);
      expect(ok.headers.get("access-control-allow-methods")).toContain("POST");
      expect(ok.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("authorization");
      expect(ok.headers.get("vary")).toContain("Origin");

      for (const origin of [EVIL, `${APP}.evil.com`, APP.replace("https:", "http:"), `${APP}:8443`, "null", null]) {
        const refused = keep(await preflight(path, origin));
        expect(refused.status, `${path} from ${origin}`).toBe(403);
        expect(refused.headers.get("access-control-allow-origin")).toBeNull();
        expect(refused.headers.get("access-control-allow-methods")).toBeNull();
      }
    }
  });

  it("lets only the requesting client's registered origin read an actual response", async () => {
    const a = await registerClient({ allowed_cors_origins: [APP] });
    const b = await registerClient(); // registered no origin
    const { tokens } = await fullLogin(a);

    // Client A's own origin may read A's answers, errors included once A is known.
    const refreshed = await tokenCall(a, APP, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token as string,
    });
    expect(refreshed.status).toBe(200);
    expect(refreshed.headers.get("access-control-allow-origin")).toBe(APP);
    expect(refreshed.headers.get("vary")).toContain("Origin");
    const bad = await tokenCall(a, APP, {
      grant_type: "authorization_code",
      code: "ac_0_0_nope",
      redirect_uri: "x",
      code_verifier: "y".repeat(43),
    });
    expect(bad.status).toBe(400);
    expect(bad.headers.get("access-control-allow-origin")).toBe(APP);
    const next = (await refreshed.json()) as { access_token: string; refresh_token: string };
    const info = keep(
      await call("/userinfo", { headers: { Authorization: `Bearer ${next.access_token}`, Origin: APP } }),
    );
    expect(info.status).toBe(200);
    expect(info.headers.get("access-control-allow-origin")).toBe(APP);
    const intro = await tokenCall(a, APP, { token: next.access_token }, "/introspect");
    expect(intro.headers.get("access-control-allow-origin")).toBe(APP);

    // Another origin gets no CORS header on the same calls, so its script cannot read them.
    const fromEvil = await tokenCall(a, EVIL, { token: next.access_token }, "/introspect");
    expect(fromEvil.status).toBe(200);
    expect(fromEvil.headers.get("access-control-allow-origin")).toBeNull();
    const infoEvil = keep(
      await call("/userinfo", { headers: { Authorization: `Bearer ${next.access_token}`, Origin: EVIL } }),
    );
    expect(infoEvil.headers.get("access-control-allow-origin")).toBeNull();

    // Client B did not register A's origin: A's origin may not read B's answers.
    const fromB = await tokenCall(b, APP, { token: "garbage" }, "/revoke");
    expect(fromB.status).toBe(200);
    expect(fromB.headers.get("access-control-allow-origin")).toBeNull();

    // Failed client authentication names no client: no CORS header.
    const anon = keep(
      await call("/token", {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded", Origin: APP },
        body: new URLSearchParams({
          grant_type: "refresh_token",
          refresh_token: next.refresh_token,
          client_id: "kwc_nope",
        }),
      }),
    );
    expect(anon.status).toBe(401);
    expect(anon.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("opens discovery and JWKS to every origin, and gives the authorization endpoint and login page no CORS", async () => {
    const client = await registerClient({ allowed_cors_origins: [APP] });
    for (const path of ["/.well-known/openid-configuration", "/jwks.json"]) {
      const res = keep(await call(path, { headers: { Origin: EVIL } }));
      expect(res.status).toBe(200);
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
    }
    const jwksPreflight = keep(await preflight("/jwks.json", EVIL, "GET"));
    expect(jwksPreflight.headers.get("access-control-allow-origin")).toBe("*");

    const { challenge } = await pkce();
    const browser = new Browser();
    const q = new URLSearchParams({
      response_type: "code",
      client_id: client.client_id,
      redirect_uri: client.redirect_uris[0] as string,
      scope: "openid",
      code_challenge: challenge,
      code_challenge_method: "S256",
    });
    const page = keep(await browser.fetch(`/authorize?${q}`, { headers: { Origin: APP, Accept: "application/json" } }));
    expect(page.status).toBe(200);
    const { tx } = (await page.json()) as { tx: string };
    const login = [
      page,
      keep(
        await browser.fetch("/authorize", {
          method: "OPTIONS",
          headers: { Origin: APP, "Access-Control-Request-Method": "POST" },
        }),
      ),
      keep(
        await browser.fetch("/email-code/generate", {
          method: "OPTIONS",
          headers: { Origin: APP, "Access-Control-Request-Method": "POST" },
        }),
      ),
      keep(await browser.postJson("/email-code/generate", { tx, email: uniqueEmail() }, { Origin: ISSUER })),
      keep(await browser.fetch(`/logout?client_id=${client.client_id}`, { headers: { Origin: APP } })),
    ];
    for (const res of login) {
      expect(res.status).toBeLessThan(500);
      expect(res.headers.get("access-control-allow-origin"), res.url).toBeNull();
    }
    expect(login[1]?.status).not.toBe(204);
    expect(login[2]?.status).not.toBe(204);
  });
});

describe("C10: every answer of token, userinfo, revoke and introspect carries Cache-Control: no-store", () => {
  it("on successes, errors, 405s and preflights", async () => {
    const client = await registerClient({ allowed_cors_origins: [APP] });
    const { tokens } = await fullLogin(client);
    const responses = [
      await form(client, { grant_type: "refresh_token", refresh_token: tokens.refresh_token as string }),
      await form(client, { grant_type: "refresh_token", refresh_token: "nope" }),
      await form(client, { grant_type: "password" }),
      await call("/token", {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: "",
      }),
      await call("/token", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" }),
      await call("/token"),
      await call("/token", { method: "PUT" }),
      await preflight("/token", APP),
      await preflight("/token", EVIL),
      await call("/userinfo", { headers: { Authorization: `Bearer ${tokens.access_token}` } }),
      await call("/userinfo"),
      await call("/userinfo", { headers: { Authorization: "Bearer nope" } }),
      await preflight("/userinfo", APP, "GET"),
      await form(client, { token: tokens.access_token }, "/introspect"),
      await form(client, {}, "/introspect"),
      await call("/introspect"),
      await preflight("/introspect", APP),
      await form(client, { token: "garbage" }, "/revoke"),
      await call("/revoke", { method: "POST" }),
      await call("/revoke"),
      await preflight("/revoke", EVIL),
    ];
    for (const res of responses) {
      keep(res);
      expect(res.headers.get("cache-control"), `${res.status} ${res.url}`).toBe("no-store");
    }
  });
});

describe("failed client authentication is bounded (issue 27 item 11)", () => {
  it("answers 429 after client_auth_failures_per_minute wrong secrets from one address, and re-reads D1 at most every 5 s", async () => {
    const { admin, policy, withVars } = await import("../support/harness");
    const e = withVars({ POLICY: policy({ client_cache_seconds: 30, client_auth_failures_per_minute: 5 }) });
    const client = await registerClient({}, e);
    const d1 = async () =>
      ((await (await admin("/stats", {}, e)).json()) as { totals: { d1_queries: number } }).totals.d1_queries;
    const ip = `10.91.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;
    const attempt = (secret: string, from = ip) =>
      call(
        "/token",
        {
          method: "POST",
          headers: {
            "Content-Type": "application/x-www-form-urlencoded",
            "CF-Connecting-IP": from,
            Authorization: basicAuth({ ...client, client_secret: secret }),
          },
          body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: "x" }),
        },
        e,
      );
    // The client is read once (and cached); then wrong secrets.
    await attempt("kws_wrong-0");
    const before = await d1();
    const statuses: number[] = [];
    for (let i = 1; i <= 8; i++) statuses.push((await attempt(`kws_wrong-${i}`)).status);
    expect(statuses.slice(0, 4)).toEqual([401, 401, 401, 401]);
    expect(statuses.slice(4)).toEqual([429, 429, 429, 429]);
    const refused = await attempt("kws_wrong-9");
    expect(refused.headers.get("retry-after")).toBe("60");
    // Eight failures, at most one re-read of the client (the stats call itself reads nothing of D1).
    expect((await d1()) - before).toBeLessThanOrEqual(1);
    // The right secret from another address is not held back.
    const right = await attempt(client.client_secret as string, "10.92.0.1");
    expect(right.status).toBe(400);
    expect(((await right.json()) as { error: string }).error).toBe("invalid_grant");
  });
});
