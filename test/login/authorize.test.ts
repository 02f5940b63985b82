import { afterEach, describe, expect, it, vi } from "vitest";
import {
  authorizeQuery,
  Browser,
  call,
  codeFromSession,
  codeSpend,
  fullLogin,
  ISSUER,
  loginForCode,
  openSealed,
  pkce,
  redeem,
  registerClient,
  sealedIdPart,
  setCookieOf,
  sha256,
  sql,
  stubForId,
  type TestClient,
  verifyJwt,
  withVars,
} from "../support/harness";

afterEach(() => {
  vi.useRealTimers();
});

async function expectErrorPage(res: Response) {
  expect(res.status).toBe(400);
  expect(res.headers.get("location")).toBeNull();
  expect(res.headers.get("content-type")).toMatch(/^text\/html/);
  expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
  expect(await res.text()).toContain("<h1>");
}

function expectRedirectError(res: Response, client: TestClient, error: string, state: string | null = "st-123") {
  expect(res.status).toBe(302);
  const loc = new URL(res.headers.get("location") as string);
  expect(`${loc.origin}${loc.pathname}`).toBe(client.redirect_uris[0]);
  expect(loc.searchParams.get("error")).toBe(error);
  expect(loc.searchParams.get("state")).toBe(state);
  expect(loc.searchParams.get("iss")).toBe(ISSUER);
  expect(loc.searchParams.get("code")).toBeNull();
  return loc;
}

describe("AuthorizeInit (CONTRACT §2.1)", () => {
  it("answers an API client with a tx that carries the validated request sealed, and a tx cookie; stores nothing", async () => {
    const client = await registerClient();
    const browser = new Browser();
    const { challenge } = await pkce();
    const res = await browser.fetch(`/authorize?${authorizeQuery(client, challenge)}`, {
      headers: { Accept: "application/json" },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = (await res.json()) as { tx: string; expires_in: number };
    expect(Object.keys(body).sort()).toEqual(["expires_in", "tx"]);
    expect(body.expires_in).toBe(900);
    // `<tx id>.<iv>.<sealed request>`: the id routes, the rest only Keyway can open.
    expect(body.tx).toMatch(
      /^tx_[a-z][a-z0-9]+_[0-9a-z]+_[0-9a-z]+_[A-Za-z0-9_-]{44}\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+$/,
    );
    expect(body.tx).not.toContain("st-123");

    const cookie = setCookieOf(res, "kw_tx");
    expect(cookie?.value).toBe(sealedIdPart(body.tx));
    expect(cookie?.attrs).toEqual(expect.arrayContaining(["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=900"]));
    expect(cookie?.attrs.some((a) => /^domain=/i.test(a))).toBe(false);
    expect(cookie?.attrs.includes("Secure")).toBe(false); // http issuer

    // Nothing is stored for a login that has only begun.
    expect(await sql(stubForId("session", body.tx), "SELECT * FROM sessions")).toEqual([]);
    const sealed = await openSealed<{ request: unknown; exp: number }>("tx", body.tx);
    expect(sealed?.exp).toBeGreaterThan(Date.now() + 899_000);
    expect(sealed?.request).toEqual({
      client_id: client.client_id,
      redirect_uri: client.redirect_uris[0],
      scope: "openid email offline_access",
      state: "st-123",
      nonce: "n-456",
      code_challenge: challenge,
    });
  });

  it("serves a browser the HTML login page with the tx in a hidden field and a strict CSP (E5)", async () => {
    const client = await registerClient();
    const browser = new Browser();
    const { challenge } = await pkce();
    const res = await browser.fetch(`/authorize?${authorizeQuery(client, challenge)}`, {
      headers: { Accept: "text/html,application/xhtml+xml" },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    // Strict: never a referrer to another site. Not "no-referrer", which makes Chromium post `Origin: null`.
    expect(res.headers.get("referrer-policy")).toBe("same-origin");
    const html = await res.text();
    const txId = browser.cookies.get("kw_tx") as string;
    expect(txId).toBeTruthy();
    expect(html).toContain('action="/email-code/generate"');
    expect(html).toMatch(/<input[^>]*name="email"/);
    expect(html).toContain(`<input type="hidden" name="tx" value="${txId}.`);
  });

  it("pre-fills the email from login_hint, escaped; a hint that is no address is ignored (OIDC Core §3.1.2.1)", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const page = async (hint: string) => {
      const res = await new Browser().fetch(`/authorize?${authorizeQuery(client, challenge, { login_hint: hint })}`, {
        headers: { Accept: "text/html" },
      });
      expect(res.status).toBe(200);
      return /<input id="email"[^>]*>/.exec(await res.text())?.[0] ?? "";
    };
    expect(await page("ada@example.com")).toContain('value="ada@example.com"');
    const quoted = await page('"x"@example.com');
    expect(quoted).toContain('value="&#34;x&#34;@example.com"');
    expect(quoted).not.toContain('"x"');
    expect(await page("usr_opaque-subject")).not.toContain("value=");
    // The hint is not carried in the sealed tx: it only pre-fills the page.
    const api = await new Browser().fetch(
      `/authorize?${authorizeQuery(client, challenge, { login_hint: "ada@example.com" })}`,
      { headers: { Accept: "application/json" } },
    );
    const { tx } = (await api.json()) as { tx: string };
    const sealed = await openSealed("tx", tx);
    expect(sealed).toMatchObject({ request: { client_id: client.client_id } });
    expect(JSON.stringify(sealed)).not.toContain("ada@example.com");
  });

  it("uses __Host- cookies with Secure on an https issuer", async () => {
    const e = withVars({ ISSUER: "https://id.example.com" });
    const client = await registerClient({}, e);
    const { challenge } = await pkce();
    const res = await new Browser({ env: e }).fetch(`/authorize?${authorizeQuery(client, challenge)}`, {
      headers: { Accept: "application/json" },
    });
    expect(res.status).toBe(200);
    expect(setCookieOf(res, "kw_tx")).toBeNull();
    const cookie = setCookieOf(res, "__Host-kw_tx");
    expect(cookie?.attrs).toEqual(expect.arrayContaining(["HttpOnly", "SameSite=Lax", "Path=/", "Secure"]));
    expect(cookie?.attrs.some((a) => /^domain=/i.test(a))).toBe(false);
  });

  it("takes POST with form parameters like GET (B9)", async () => {
    const client = await registerClient();
    const browser = new Browser();
    const { verifier, challenge } = await pkce();
    const res = await browser.fetch("/authorize", {
      method: "POST",
      headers: { Accept: "application/json", "Content-Type": "application/x-www-form-urlencoded" },
      body: authorizeQuery(client, challenge),
    });
    expect(res.status).toBe(200);
    const { tx } = (await res.json()) as { tx: string };
    expect(browser.cookies.get("kw_tx")).toBe(sealedIdPart(tx));
    // And with a session, POST answers with a code.
    const { browser: loggedIn } = await loginForCode(client);
    const again = await loggedIn.fetch("/authorize", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: authorizeQuery(client, challenge, { prompt: "none" }),
    });
    expect(again.status).toBe(302);
    const code = new URL(again.headers.get("location") as string).searchParams.get("code") as string;
    expect((await redeem(client, code, verifier)).status).toBe(200);
  });
});

describe("authorization errors shown on Keyway's page (B1, B2)", () => {
  it("never redirects for a missing or unknown client_id", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const q = new URLSearchParams(authorizeQuery(client, challenge));
    q.delete("client_id");
    await expectErrorPage(await call(`/authorize?${q}`));
    q.set("client_id", "kwc_doesnotexist");
    await expectErrorPage(await call(`/authorize?${q}`));
  });

  it("never redirects to a redirect_uri that is not registered exactly", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const registered = client.redirect_uris[0] as string;
    const variants = [
      undefined,
      `${registered}/`,
      registered.replace("/callback", "/Callback"),
      registered.replace("https://rp", "https://RP"),
      `${registered}?extra=1`,
      `${registered}#frag`,
      registered.replace("https:", "http:"),
      "https://evil.example.com/callback",
    ];
    for (const redirect_uri of variants) {
      const q = new URLSearchParams(authorizeQuery(client, challenge));
      if (redirect_uri === undefined) q.delete("redirect_uri");
      else q.set("redirect_uri", redirect_uri);
      const res = await call(`/authorize?${q}`, { headers: { Accept: "application/json" } });
      await expectErrorPage(res);
      // Even with prompt=none, nothing goes to the unvalidated URI.
      q.set("prompt", "none");
      await expectErrorPage(await call(`/authorize?${q}`));
    }
  });

  it("accepts any port for a registered loopback IP redirect URI, and nothing else (RFC 8252)", async () => {
    const client = await registerClient({ redirect_uris: ["http://127.0.0.1:1234/cb"] });
    const { challenge } = await pkce();
    const other = "http://127.0.0.1:5555/cb";
    const ok = await call(`/authorize?${authorizeQuery(client, challenge, { redirect_uri: other })}`, {
      headers: { Accept: "application/json" },
    });
    expect(ok.status).toBe(200);
    for (const bad of ["http://127.0.0.1:5555/cb2", "http://localhost:1234/cb", "http://[::1]:1234/cb"])
      await expectErrorPage(await call(`/authorize?${authorizeQuery(client, challenge, { redirect_uri: bad })}`));
    // A port no URL can have is a clear error page, for a good request and for one that would
    // otherwise be answered with an error redirect (it once answered 500).
    for (const port of ["65536", "99999"])
      for (const extra of [{}, { response_type: "token" }] as Record<string, string>[])
        await expectErrorPage(
          await call(
            `/authorize?${authorizeQuery(client, challenge, { redirect_uri: `http://127.0.0.1:${port}/cb`, ...extra })}`,
          ),
        );

    // The login completes at the presented port, and the token request must name that same URI.
    const login = await loginForCode(client, undefined, { extra: { redirect_uri: other } });
    expect(`${login.redirect.origin}${login.redirect.pathname}`).toBe(other);
    expect((await redeem(client, login.code, login.verifier, { redirect_uri: other })).status).toBe(200);
  });
});

describe("authorization errors redirected to the client (B3, B4, B8)", () => {
  it("carries error, state and iss for each invalid parameter", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const cases: [Record<string, string | null>, string][] = [
      [{ response_type: null }, "invalid_request"],
      [{ response_type: "token" }, "unsupported_response_type"],
      [{ response_type: "code id_token" }, "unsupported_response_type"],
      [{ code_challenge: null }, "invalid_request"],
      [{ code_challenge_method: null }, "invalid_request"],
      [{ code_challenge_method: "plain" }, "invalid_request"],
      [{ code_challenge: "too-short" }, "invalid_request"],
      [{ code_challenge: `${"a".repeat(42)}!` }, "invalid_request"],
      // S256 challenges are exactly 43 base64url characters: a hex digest or a padded one is malformed.
      [{ code_challenge: "a".repeat(64) }, "invalid_request"],
      [{ code_challenge: `${"a".repeat(43)}=` }, "invalid_request"],
      [{ code_challenge: `${"a".repeat(42)}~` }, "invalid_request"],
      [{ scope: "email" }, "invalid_scope"],
      [{ prompt: "bogus" }, "invalid_request"],
      [{ prompt: "none login" }, "invalid_request"],
      [{ max_age: "-1" }, "invalid_request"],
      [{ response_mode: "fragment" }, "invalid_request"],
      [{ request: "eyJ.x.y" }, "invalid_request_object"],
    ];
    for (const [change, error] of cases) {
      const q = new URLSearchParams(authorizeQuery(client, challenge));
      for (const [k, v] of Object.entries(change)) v === null ? q.delete(k) : q.set(k, v);
      const res = await call(`/authorize?${q}`, { headers: { Accept: "application/json" } });
      expectRedirectError(res, client, error);
      expect(res.headers.getSetCookie()).toEqual([]); // no login transaction was started
    }
  });

  it("omits state when none was sent, and returns a 2 KB Unicode state byte for byte (B10)", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const q = new URLSearchParams(authorizeQuery(client, challenge, { response_type: "token" }));
    q.delete("state");
    expectRedirectError(await call(`/authorize?${q}`), client, "unsupported_response_type", null);

    const state = "é漢🙂&=?#+ %".repeat(130);
    expect(new TextEncoder().encode(state).length).toBeGreaterThan(2000);
    expectRedirectError(
      await call(`/authorize?${authorizeQuery(client, challenge, { response_type: "token", state })}`),
      client,
      "unsupported_response_type",
      state,
    );
    const login = await loginForCode(client, undefined, { extra: { state } });
    expect(login.redirect.searchParams.get("state")).toBe(state);
  });

  it("ignores an unknown parameter (B7)", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client, undefined, { extra: { foo: "bar", ui_locales: "fr" } });
    expect(tokens.access_token).toBeTruthy();
  });
});

describe("response_mode=form_post (OAuth 2.0 Form Post Response Mode; issue 40)", () => {
  /** The form_post page's fields and target, from its HTML. */
  function postedForm(html: string) {
    const action = /<form method="post" action="([^"]*)"/.exec(html)?.[1];
    const fields = Object.fromEntries(
      [...html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)].map((m) => [
        m[1],
        (m[2] as string).replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n))),
      ]),
    );
    return { action, fields };
  }

  it("posts the code, state and iss to the redirect URI from a page that needs no script, under the page CSP", async () => {
    const client = await registerClient();
    const { verifier, challenge } = await pkce();
    // A session, then the request again in form_post mode, answered by it.
    const login = await loginForCode(client);
    const res = await login.browser.fetch(
      `/authorize?${authorizeQuery(client, challenge, { response_mode: "form_post", prompt: "none", state: `a"<b>&` })}`,
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    const html = await res.text();
    const { action, fields } = postedForm(html);
    expect(action).toBe(client.redirect_uris[0]);
    expect(fields).toMatchObject({ state: `a"<b>&`, iss: ISSUER });
    // Without script, the button submits it; the only script is the nonce'd one that presses it.
    expect(html).toMatch(/<button type="submit">/);
    const nonce = /script-src 'nonce-([^']+)'/.exec(csp)?.[1];
    expect(html).toContain(`<script nonce="${nonce}">`);
    expect((await redeem(client, fields.code as string, verifier)).status).toBe(200);
  });

  it("sends errors the same way, once the client and redirect URI are known; discovery says so", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const res = await call(
      `/authorize?${authorizeQuery(client, challenge, { response_mode: "form_post", scope: "email" })}`,
    );
    expect(res.status).toBe(200);
    expect(postedForm(await res.text()).fields).toMatchObject({ error: "invalid_scope", state: "st-123", iss: ISSUER });
    const none = await call(
      `/authorize?${authorizeQuery(client, challenge, { response_mode: "form_post", prompt: "none" })}`,
    );
    expect(postedForm(await none.text()).fields).toMatchObject({ error: "login_required" });
    // An unsupported mode is an error in the query, the default for code.
    const fragment = await call(`/authorize?${authorizeQuery(client, challenge, { response_mode: "fragment" })}`);
    expect(fragment.status).toBe(302);
    const discovery = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, unknown>;
    expect(discovery.response_modes_supported).toEqual(["query", "form_post"]);
  });
});

describe("AuthorizeCode (CONTRACT §2.4)", () => {
  it("redirects redirect_to with code, state and iss once; a second use is refused", async () => {
    const client = await registerClient();
    const login = await loginForCode(client);
    expect(login.redirect.searchParams.get("state")).toBe("st-123");
    expect(login.redirect.searchParams.get("iss")).toBe(ISSUER);
    expect(login.redirect.searchParams.get("code")).toMatch(/^ac_/);
    expect(`${login.redirect.origin}${login.redirect.pathname}`).toBe(client.redirect_uris[0]);
    // The tx cookie is cleared; the transaction made its one session, and `redirect_to` is used up.
    expect(login.browser.cookies.has("kw_tx")).toBe(false);
    const txHash = await sha256(sealedIdPart(login.tx));
    expect(
      await sql(stubForId("session", login.tx), "SELECT COUNT(*) AS n FROM sessions WHERE tx_hash = ?", txHash),
    ).toEqual([{ n: 1 }]);
    await expectErrorPage(await login.browser.fetch(login.redirectTo));
    // Neither the bare id nor the transaction itself opens as a verified login.
    await expectErrorPage(await login.browser.fetch(`/authorize?tx=${encodeURIComponent(sealedIdPart(login.tx))}`));
    await expectErrorPage(await login.browser.fetch(`/authorize?tx=${encodeURIComponent(login.tx)}`));
    // The code carries its grant sealed; nothing is stored until it is redeemed, in its login's shard.
    expect(login.code).not.toContain("n-456");
    expect(await openSealed<{ grant: unknown }>("code", login.code)).toMatchObject({
      grant: { client_id: client.client_id, redirect_uri: client.redirect_uris[0], nonce: "n-456" },
    });
    expect(await codeSpend(login.code)).toBeNull();
    expect((await redeem(client, login.code, login.verifier)).status).toBe(200);
    expect(await codeSpend(login.code)).toMatchObject({ by: "family", issued: true });
  });

  it("refuses redirect_to in a browser without the session that finished the login", async () => {
    const client = await registerClient();
    const browser = new Browser();
    const { challenge } = await pkce();
    const tx = await browser.startLogin(client, challenge);
    const email = `other.${Date.now()}.${Math.random().toString(36).slice(2)}@example.com`;
    await browser.postJson("/email-code/generate", { tx, email });
    const mail = (await (await call(`/__dev/mailbox/${encodeURIComponent(email)}`)).json()) as {
      messages: { code: string }[];
    };
    const ver = await browser.postJson("/email-code/verify", { tx, email, code: mail.messages[0]?.code });
    const { redirect_to } = (await ver.json()) as { redirect_to: string };
    expect(redirect_to.startsWith(`${ISSUER}/authorize?tx=${encodeURIComponent(sealedIdPart(tx))}.`)).toBe(true);
    await expectErrorPage(await new Browser().fetch(redirect_to));
    // The foreign attempt did not consume it.
    const fin = await browser.fetch(redirect_to);
    expect(fin.status).toBe(302);
    expect(new URL(fin.headers.get("location") as string).searchParams.get("code")).toBeTruthy();
  });

  it("answers prompt=none with a code when a session exists and login_required when not (B5)", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const none = await new Browser().fetch(`/authorize?${authorizeQuery(client, challenge, { prompt: "none" })}`);
    const loc = expectRedirectError(none, client, "login_required");
    expect(none.headers.getSetCookie()).toEqual([]);
    expect(loc.searchParams.get("code")).toBeNull();

    const { browser } = await loginForCode(client);
    const other = await registerClient();
    const { code, verifier, redirect } = await codeFromSession(browser, other);
    expect(redirect.searchParams.get("iss")).toBe(ISSUER);
    expect(redirect.searchParams.get("state")).toBe("st-123");
    expect((await redeem(other, code, verifier)).status).toBe(200);
  });

  it("drops offline_access for a client without the refresh_token grant", async () => {
    const client = await registerClient({ grant_types: ["authorization_code"] });
    const { tokens } = await fullLogin(client);
    expect(tokens.scope.split(" ").sort()).toEqual(["email", "openid"]);
    expect(tokens.refresh_token).toBeUndefined();
  });

  it("starts a new login for prompt=login and for an exceeded max_age; auth_time moves forward (B6)", async () => {
    const client = await registerClient();
    const start = Date.now();
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(start);
    const first = await fullLogin(client);
    const t1 = (await verifyJwt(first.tokens.id_token)).payload.auth_time as number;

    vi.setSystemTime(start + 120_000);
    const { challenge } = await pkce();
    // Within max_age: the session answers.
    const within = await first.browser.fetch(`/authorize?${authorizeQuery(client, challenge, { max_age: "600" })}`);
    expect(within.status).toBe(302);
    // Past max_age, prompt=login or select_account (another account is chosen on the login page): a new login (the login page), not a code.
    for (const extra of [{ max_age: "60" }, { prompt: "login" }, { prompt: "select_account" }] as Record<
      string,
      string
    >[]) {
      const res = await first.browser.fetch(`/authorize?${authorizeQuery(client, challenge, extra)}`, {
        headers: { Accept: "application/json" },
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { tx: string }).tx).toMatch(/^tx_/);
    }
    // prompt=none with an exceeded max_age cannot log in silently.
    const silent = await first.browser.fetch(
      `/authorize?${authorizeQuery(client, challenge, { max_age: "60", prompt: "none" })}`,
    );
    expectRedirectError(silent, client, "login_required");

    const second = await fullLogin(client, first.email, { browser: first.browser, extra: { prompt: "login" } });
    const t2 = (await verifyJwt(second.tokens.id_token)).payload.auth_time as number;
    expect(t2).toBeGreaterThanOrEqual(t1 + 120);
  });
});
