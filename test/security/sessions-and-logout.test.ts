import { describe, expect, it } from "vitest";
import {
  authorizeQuery,
  Browser,
  call,
  fullLogin,
  ISSUER,
  latestCode,
  mailbox,
  pkce,
  registerClient,
  setCookieOf,
  type TestClient,
  uniqueEmail,
  withVars,
} from "../support/harness";

const APP = "https://rp.example.com";

// Checklist E1 on an https issuer (the http cookies are checked in test/login/email-code.test.ts), and
// E4 for form posts and opaque origins (JSON posts: test/login/email-code.test.ts).

describe("E1: session cookie attributes on an https issuer", () => {
  it("sets __Host-kw_session with Secure, HttpOnly, SameSite=Lax, Path=/ and no Domain, and clears it the same way", async () => {
    const issuer = "https://id.example.com";
    const e = withVars({ ISSUER: issuer });
    const client = await registerClient({}, e);
    const browser = new Browser({ env: e });
    const tx = await browser.startLogin(client, (await pkce()).challenge);
    const email = uniqueEmail("e1");
    expect((await browser.postJson("/email-code/generate", { tx, email }, { Origin: issuer })).status).toBe(200);
    const code = await latestCode(email, e);
    const res = await browser.postJson("/email-code/verify", { tx, email, code }, { Origin: issuer });
    expect(res.status).toBe(200);

    expect(setCookieOf(res, "kw_session")).toBeNull();
    const cookie = setCookieOf(res, "__Host-kw_session");
    expect(cookie?.value).toMatch(/^ses_/);
    expect(cookie?.attrs).toEqual(
      expect.arrayContaining(["Path=/", "HttpOnly", "SameSite=Lax", "Secure", "Max-Age=86400"]),
    );
    expect(cookie?.attrs.some((a) => /^domain=/i.test(a))).toBe(false);

    // The session works under its __Host- name, and logout clears that name with the same attributes.
    const { redirect_to } = (await res.json()) as { redirect_to: string };
    expect(redirect_to.startsWith(`${issuer}/authorize?tx=`)).toBe(true);
    const fin = await browser.fetch(redirect_to);
    expect(fin.status).toBe(302);
    expect(setCookieOf(fin, "__Host-kw_tx")?.attrs).toEqual(expect.arrayContaining(["Max-Age=0", "Secure"]));
    const out = await browser.fetch("/logout");
    const cleared = setCookieOf(out, "__Host-kw_session");
    expect(cleared?.value).toBe("");
    expect(cleared?.attrs).toEqual(expect.arrayContaining(["Path=/", "Secure", "Max-Age=0"]));
    expect(cleared?.attrs.some((a) => /^domain=/i.test(a))).toBe(false);
  });
});

describe("HSTS on an https issuer (issue 38 item 9)", () => {
  it("every Worker sends Strict-Transport-Security over https, errors included, and none over http", async () => {
    const issuer = "https://id.example.com";
    const e = withVars({ ISSUER: issuer });
    // op-auth, op-token and op-mgmt, a success and an error each.
    for (const path of ["/.well-known/openid-configuration", "/jwks.json", "/admin/v1/clients", "/no-such-path"]) {
      const res = await call(`${issuer}${path}`, {}, e);
      expect(res.headers.get("Strict-Transport-Security"), path).toBe("max-age=63072000");
    }
    for (const path of ["/.well-known/openid-configuration", "/jwks.json"])
      expect((await call(`${ISSUER}${path}`)).headers.get("Strict-Transport-Security"), path).toBeNull();
  });
});

describe("E4: the login page's POSTs from another origin", () => {
  it("refuses form posts with a foreign or opaque Origin with 403, and takes the issuer's own", async () => {
    const client = await registerClient();
    const browser = new Browser();
    const tx = await browser.startLogin(client, (await pkce()).challenge);
    const email = uniqueEmail("e4");
    for (const origin of [
      "https://evil.example.com",
      "null",
      "http://127.0.0.1:8788",
      "http://127.0.0.1:8787.evil.com",
    ]) {
      for (const path of ["/email-code/generate", "/email-code/verify"]) {
        const res = await browser.postForm(path, { tx, email, code: "123456" }, { Origin: origin });
        expect(res.status, `${path} from ${origin}`).toBe(403);
      }
    }
    expect(await mailbox(email)).toHaveLength(0);
    // A same-origin post goes through (the login page's own form).
    expect(
      (await browser.postForm("/email-code/generate", { tx, email }, { Origin: "http://127.0.0.1:8787" })).status,
    ).toBe(200);
  });
});

describe("logout: an ID token hint, or the person's own confirmation", () => {
  /** Whether the browser's session still answers prompt=none with a code. */
  async function sessionLive(browser: Browser, client: TestClient): Promise<boolean> {
    const { challenge } = await pkce();
    const res = await browser.fetch(`/authorize?${authorizeQuery(client, challenge, { prompt: "none" })}`);
    return new URL(res.headers.get("location") as string).searchParams.has("code");
  }

  it("refuses an access token as id_token_hint, and ends nothing", async () => {
    const client = await registerClient();
    const { browser, tokens } = await fullLogin(client);
    const res = await browser.fetch(`/logout?${new URLSearchParams({ id_token_hint: tokens.access_token })}`);
    expect(res.status).toBe(400);
    expect(await res.text()).toContain("id_token_hint");
    expect(await sessionLive(browser, client)).toBe(true);
    // The login's ID token is taken, from anywhere.
    const ok = await browser.fetch(`/logout?${new URLSearchParams({ id_token_hint: tokens.id_token })}`, {
      headers: { "Sec-Fetch-Site": "cross-site" },
    });
    expect(ok.status).toBe(200);
    expect(await sessionLive(browser, client)).toBe(false);
  });

  it("a cross-site logout with someone else's ID token as hint asks the person first (issue 27 item 6)", async () => {
    const client = await registerClient();
    const victim = await fullLogin(client);
    // The attacker's own login at the same client: a valid ID token, of another session and user.
    const attacker = await fullLogin(client);
    const res = await victim.browser.fetch(
      `/logout?${new URLSearchParams({ id_token_hint: attacker.tokens.id_token })}`,
      { headers: { "Sec-Fetch-Site": "cross-site" } },
    );
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('<form method="post" action="/logout">');
    expect(await sessionLive(victim.browser, client)).toBe(true);
    // The victim's own ID token still signs her out from anywhere.
    const own = await victim.browser.fetch(
      `/logout?${new URLSearchParams({ id_token_hint: victim.tokens.id_token })}`,
      { headers: { "Sec-Fetch-Site": "cross-site" } },
    );
    expect(own.status).toBe(200);
    expect(await sessionLive(victim.browser, client)).toBe(false);
  });

  it("asks the person before a cross-site request without a hint ends the session; their post ends it", async () => {
    const client = await registerClient({ post_logout_redirect_uris: ["https://rp.example.com/bye"] });
    const { browser } = await fullLogin(client);
    const params = { client_id: client.client_id, post_logout_redirect_uri: "https://rp.example.com/bye", state: "s1" };
    const elsewhere: Record<string, string>[] = [
      { "Sec-Fetch-Site": "cross-site" },
      { "Sec-Fetch-Site": "same-site" },
      { Origin: APP },
    ];
    for (const headers of elsewhere) {
      const ask = await browser.fetch(`/logout?${new URLSearchParams(params)}`, { headers });
      expect(ask.status).toBe(200);
      expect(setCookieOf(ask, "kw_session")).toBeNull();
      const html = await ask.text();
      expect(html).toContain('<form method="post" action="/logout">');
      expect(html).toContain(`name="state" value="s1"`);
      expect(await sessionLive(browser, client)).toBe(true);
    }
    // The same request posted from another site is asked about again.
    const forged = await browser.postForm("/logout", params, { "Sec-Fetch-Site": "cross-site" });
    expect(forged.status).toBe(200);
    expect(await sessionLive(browser, client)).toBe(true);
    // The confirmation, posted from the issuer's own page.
    const done = await browser.postForm("/logout", params, { "Sec-Fetch-Site": "same-origin", Origin: ISSUER });
    expect(done.status).toBe(302);
    expect(done.headers.get("location")).toBe("https://rp.example.com/bye?state=s1");
    expect(await sessionLive(browser, client)).toBe(false);
  });
});
