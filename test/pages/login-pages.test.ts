import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  admin,
  authorizeQuery,
  Browser,
  ISSUER,
  latestCode,
  mailbox,
  pinClock,
  pkce,
  registerClient,
  uniqueEmail,
  withVars,
} from "../support/harness";
import { mintRegistrationToken, registerDynamic } from "../support/registration";
import { createTenant, uniqueTenantId } from "../tenants/support";

/**
 * The login pages as a person gets them (issue 26), over HTTP in workerd: the application's name and
 * the brand, the language, the code page's states, "use another address", and the same store calls.
 */

const field = (html: string, name: string) =>
  new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1]?.replaceAll("&#34;", '"') ?? null;

async function openLoginPage(
  browser: Browser,
  client: Awaited<ReturnType<typeof registerClient>>,
  extra = {},
  headers = {},
) {
  const { challenge } = await pkce();
  const res = await browser.fetch(`/authorize?${authorizeQuery(client, challenge, extra)}`, { headers });
  expect(res.status, await res.clone().text()).toBe(200);
  const html = await res.text();
  return { res, html, tx: field(html, "tx") as string };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("branding", () => {
  it("the page names the application and shows the tenant's brand, overridden by the client's; the CSP names the logo's origin", async () => {
    const tenant = await createTenant({
      name: "Acme",
      branding: {
        logo_uri: "https://cdn.acme.test/logo.svg",
        primary_color: "#aa3300",
        support_uri: "https://acme.test/help",
      },
    });
    const plain = await registerClient({ client_name: "Acme Billing" }, undefined, tenant.id);
    const browser = new Browser({ base: `/t/${tenant.id}` });
    const { res, html } = await openLoginPage(browser, plain);
    expect(html).toContain("<h1>Sign in to <bdi>Acme Billing</bdi></h1>");
    expect(html).toContain('<img src="https://cdn.acme.test/logo.svg" alt=""');
    expect(html).toContain("<span>Acme</span>");
    expect(html).toContain("--primary:#aa3300");
    expect(html).toContain('<a href="https://acme.test/help"');
    expect(html).toMatch(/<title>Sign in · Acme<\/title>/);
    const csp = res.headers.get("content-security-policy") as string;
    expect(csp).toContain("img-src 'self' data: https://cdn.acme.test;");
    expect(csp).toContain("frame-ancestors 'none'");
    // No inline style attribute anywhere: the CSP would block it (the old resend button's colour was).
    expect(html).not.toMatch(/\sstyle="/);

    const branded = await registerClient(
      { client_name: "Globex Portal", branding: { product_name: "Globex", primary_color: "#ffff00" } },
      undefined,
      tenant.id,
    );
    const second = await openLoginPage(new Browser({ base: `/t/${tenant.id}` }), branded);
    expect(second.html).toContain("<h1>Sign in to <bdi>Globex Portal</bdi></h1>");
    expect(second.html).toContain("<span>Globex</span>");
    // Yellow cannot carry white text: black on it; links darkened to 4.5:1.
    expect(second.html).toMatch(/--primary:#ffff00;--on-primary:#111111;--accent:#[0-9a-f]{6}/);
    // Still the tenant's logo and support link: the client overrode only what it set.
    expect(second.html).toContain("https://cdn.acme.test/logo.svg");
  });

  it("branding is validated: an http logo, a colour name or an unknown key is a 400", async () => {
    for (const branding of [{ logo_uri: "http://cdn.acme.test/logo.svg" }, { primary_color: "red" }, { font: "x" }]) {
      const res = await admin("/clients", {
        method: "POST",
        json: {
          client_name: "x",
          redirect_uris: ["https://rp.example.com/cb"],
          token_endpoint_auth_method: "none",
          branding,
        },
      });
      expect(res.status, JSON.stringify(branding)).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe("invalid_request");
    }
  });
  it("a branding URL a page or its CSP cannot use is a 400 invalid_request that says why, never a 500 (issue 38)", async () => {
    const bad = [
      "//evil.example/x.png", // protocol-relative
      "https://evil.example;script-src *", // a CSP directive after the host
      "https://evil.example;script-src/x.png", // the URL parser keeps `;` in the host, so in its origin
      "https://evil.example,x/x.png",
      "https://evil.example%3Bscript-src/x.png", // the same, percent-encoded in the host
      "https://evil.example'x/x.png",
      'https://evil.example"x/x.png',
      "https://cdn.acme.test/logo.png' 'unsafe-inline",
      "https://cdn.acme.test/a logo.png",
      " https://cdn.acme.test/logo.png",
      "https://cdn.acme.test/<logo>.png",
      "https://cdn.acme.test\\logo.png",
      "https://cdn.acmé.test/logo.png",
      "https://user:pass@cdn.acme.test/logo.png",
      "javascript:alert(1)",
      "data:image/png;base64,AAAA",
      "http://cdn.acme.test/logo.png", // http only for localhost
      "ftp://cdn.acme.test/logo.png",
      "https:cdn.acme.test/logo.png",
      "https://",
      `https://cdn.acme.test/${"a".repeat(520)}.png`,
    ];
    const tenant = await createTenant();
    for (const logo_uri of bad) {
      for (const [path, json] of [
        ["/tenants", { id: uniqueTenantId(), name: "Acme", branding: { logo_uri } }],
        [`/tenants/${tenant.id}`, { branding: { logo_uri } }],
        [
          "/clients",
          {
            client_name: "x",
            redirect_uris: ["https://rp.example.com/cb"],
            token_endpoint_auth_method: "none",
            branding: { logo_uri },
          },
        ],
        [
          "/clients",
          {
            client_name: "x",
            redirect_uris: ["https://rp.example.com/cb"],
            token_endpoint_auth_method: "none",
            branding: { support_uri: logo_uri },
          },
        ],
      ] as const) {
        const res = await admin(path, { method: path === "/tenants" || path === "/clients" ? "POST" : "PATCH", json });
        const body = (await res.json()) as { error: string; error_description: string };
        expect(res.status, `${path} ${logo_uri}: ${JSON.stringify(body)}`).toBe(400);
        expect(body.error).toBe("invalid_request");
        expect(body.error_description).toMatch(/^branding\.(logo_uri|support_uri): must /);
      }
    }
    for (const support_uri of ["mailto:a@b.example,c@d.example", "mailto:a@b.example?bcc=c@d.example", "mailto:"]) {
      const res = await admin(`/tenants/${tenant.id}`, { method: "PATCH", json: { branding: { support_uri } } });
      expect(res.status, support_uri).toBe(400);
      expect(((await res.json()) as { error_description: string }).error_description).toContain("mailto:");
    }
    // What a brand does use still passes: an IDN in its ASCII form, a port, a path with , and ;, loopback http.
    for (const logo_uri of [
      "https://xn--acm-bma.test:8443/cdn-cgi/image/width=80,quality=75/logo.png",
      "https://cdn.acme.test/a;v=2/logo%20x.svg?size=2#top",
      "http://localhost:8787/logo.svg",
      "https://[2001:db8::1]/logo.png",
    ]) {
      const res = await admin(`/tenants/${tenant.id}`, { method: "PATCH", json: { branding: { logo_uri } } });
      expect(res.status, `${logo_uri}: ${await res.clone().text()}`).toBe(200);
    }
  }, 60_000);
});

describe("settings stored before the issue 38 checks", () => {
  it("a tenant whose stored branding or mail no longer parses loses that section alone, not its policy", async () => {
    const tenant = await createTenant({
      policy: { otp_max_attempts: 3 },
      signup: "invite",
      branding: { primary_color: "#aa3300" },
      mail: { reply_to: "help@acme.test" },
    });
    const stored = {
      policy: { otp_max_attempts: 3 },
      signup: "invite",
      branding: { logo_uri: "https://evil.example;script-src/x.png", primary_color: "#aa3300" },
      mail: { from_name: "Acme \u202egnp.exe" },
    };
    await env.DB.prepare("UPDATE tenants SET settings = ? WHERE id = ?").bind(JSON.stringify(stored), tenant.id).run();
    const res = await admin(`/tenants/${tenant.id}`);
    expect(res.status).toBe(200);
    const read = (await res.json()) as Record<string, unknown>;
    expect(read.policy).toEqual({ otp_max_attempts: 3 });
    expect(read.signup).toBe("invite");
    expect(read.branding).toEqual({});
    expect(read.mail).toEqual({});
  });
});

describe("names and addresses in either direction (issue 38)", () => {
  it("a name with a bidirectional control is a 400 invalid_request, wherever a name is set", async () => {
    const tenant = await createTenant();
    const client = { redirect_uris: ["https://rp.example.com/cb"], token_endpoint_auth_method: "none" };
    for (const control of [
      "\u202a",
      "\u202b",
      "\u202c",
      "\u202d",
      "\u202e",
      "\u2066",
      "\u2067",
      "\u2068",
      "\u2069",
      "\u200e",
      "\u200f",
      "\u061c",
    ]) {
      const name = `Acme ${control}gnp.exe`;
      for (const [method, path, json, field] of [
        ["POST", "/tenants", { id: uniqueTenantId(), name }, "name"],
        ["PATCH", `/tenants/${tenant.id}`, { name }, "name"],
        ["PATCH", `/tenants/${tenant.id}`, { branding: { product_name: name } }, "branding.product_name"],
        ["PATCH", `/tenants/${tenant.id}`, { mail: { from_name: name } }, "mail.from_name"],
        ["POST", "/clients", { ...client, client_name: name }, "client_name"],
        [
          "POST",
          "/clients",
          { ...client, client_name: "x", branding: { product_name: name } },
          "branding.product_name",
        ],
        ["POST", "/organizations", { name }, "name"],
        ["POST", "/entities", { type: "team", name }, "name"],
        ["POST", "/users", { email: uniqueEmail("bidi"), name }, "name"],
      ] as const) {
        const res = await admin(path, { method, json });
        const body = (await res.json()) as { error: string; error_description: string };
        expect(res.status, `${method} ${path} ${JSON.stringify(control)}: ${JSON.stringify(body)}`).toBe(400);
        expect(body.error).toBe("invalid_request");
        expect(body.error_description).toContain(`${field}: must not contain bidirectional control characters`);
      }
    }
    // Arabic and Hebrew names themselves are welcome.
    const res = await admin(`/tenants/${tenant.id}`, {
      method: "PATCH",
      json: { name: "شركة أكمي", branding: { product_name: "אקמי" } },
    });
    expect(res.status, await res.clone().text()).toBe(200);
  }, 60_000);

  it("on the Arabic code page the address reads left to right and the application's name is isolated", async () => {
    const client = await registerClient({ client_name: "Acme (EU)" });
    const browser = new Browser();
    const { tx, html } = await openLoginPage(browser, client, { ui_locales: "ar" });
    expect(html).toContain("<h1>تسجيل الدخول إلى <bdi>Acme (EU)</bdi></h1>");
    const email = uniqueEmail("ar");
    const gen = await browser.postForm("/email-code/generate", { tx, email });
    expect(gen.status).toBe(200);
    const page = await gen.text();
    expect(page).toContain('<html lang="ar" dir="rtl">');
    expect(page).toContain(
      `إذا كان بإمكان <strong><bdi dir="ltr">${email}</bdi></strong> تسجيل الدخول إلى <bdi>Acme (EU)</bdi>`,
    );
  });
});

describe("language", () => {
  it("ui_locales beats Accept-Language, which beats the tenant's default; the page's language and direction follow", async () => {
    const client = await registerClient();
    const fr = await openLoginPage(new Browser(), client, { ui_locales: "de fr" }, { "Accept-Language": "ar" });
    expect(fr.html).toContain('<html lang="fr" dir="ltr">');
    expect(fr.html).toContain("Se connecter à");
    const ar = await openLoginPage(new Browser(), client, {}, { "Accept-Language": "de, ar;q=0.8" });
    expect(ar.html).toContain('<html lang="ar" dir="rtl">');
    expect(ar.html).toContain("تسجيل الدخول إلى");
    const en = await openLoginPage(new Browser(), client, {}, { "Accept-Language": "de" });
    expect(en.html).toContain('<html lang="en" dir="ltr">');

    const tenant = await createTenant({ locale: "fr" });
    const tenantClient = await registerClient({}, undefined, tenant.id);
    const byDefault = await openLoginPage(
      new Browser({ base: `/t/${tenant.id}` }),
      tenantClient,
      {},
      { "Accept-Language": "de" },
    );
    expect(byDefault.html).toContain('<html lang="fr" dir="ltr">');
  });

  it("the language chosen at /authorize holds for the whole login, and the mail speaks it", async () => {
    const client = await registerClient({ client_name: "Acme Billing" });
    const browser = new Browser();
    const email = uniqueEmail("fr");
    const { tx } = await openLoginPage(browser, client, { ui_locales: "fr" });
    // The code page is in French even though this post says nothing of languages.
    const gen = await browser.postForm("/email-code/generate", { tx, email });
    expect(gen.status).toBe(200);
    const page = await gen.text();
    expect(page).toContain('<html lang="fr" dir="ltr">');
    expect(page).toContain("Consultez vos e-mails");
    const [mail] = (await mailbox(email)) as unknown as { subject: string; text: string }[];
    expect(mail?.subject).toMatch(/^\d{6} est votre code de connexion à Keyway$/);
    expect(mail?.text).toContain("Votre code pour vous connecter à Acme Billing");
  });

  it("discovery lists the languages (ui_locales_supported)", async () => {
    const res = await new Browser().fetch("/.well-known/openid-configuration");
    expect(((await res.json()) as { ui_locales_supported: string[] }).ui_locales_supported).toEqual(["en", "fr", "ar"]);
  });
});

describe("the code page", () => {
  it("says how long the code lives and when a new one may be asked for; a wrong code keeps the countdown and says what to do", async () => {
    const e = withVars({
      POLICY: JSON.stringify({ client_cache_seconds: 0, resend_interval_seconds: 45, otp_ttl_seconds: 600 }),
    });
    const client = await registerClient({}, e);
    const browser = new Browser({ env: e });
    const email = uniqueEmail("states");
    const { tx } = await openLoginPage(browser, client);
    const gen = await browser.postForm("/email-code/generate", { tx, email });
    const page = await gen.text();
    expect(page).toContain("The code works for 10 minutes and only once.");
    expect(page).toMatch(/You can ask for a new code in <time id="resend-time" datetime="PT4[45]S">0:4[45]<\/time>\./);
    expect(page).toContain('autocomplete="one-time-code"');
    expect(page).toContain('inputmode="numeric"');
    expect(page).toContain('<div id="msg" class="msg" aria-live="polite" aria-atomic="true"></div>');
    expect(page).toContain('class="secondary"');
    expect(page).toMatch(/<script nonce="[^"]+">/);
    const resendAt = field(page, "resend_at") as string;

    const wrong = await browser.postForm("/email-code/verify", { tx, email, code: "000000", resend_at: resendAt });
    expect(wrong.status).toBe(400);
    const again = await wrong.text();
    expect(again).toContain(
      'role="alert">That code is not right, or it has expired. Check the newest email and try again.',
    );
    expect(again).toContain('aria-invalid="true" aria-describedby="msg"');
    expect(again).toMatch(/datetime="PT4[0-5]S"/);

    // Asked for too soon (no script to hold the button): the code page again, saying how long to wait.
    const early = await browser.postForm("/email-code/generate", { tx, email, resend: "1" });
    expect(early.status).toBe(429);
    expect(Number(early.headers.get("retry-after"))).toBeGreaterThan(0);
    const earlyPage = await early.text();
    expect(earlyPage).toContain("Check your email");
    expect(earlyPage).toMatch(/A code was just sent\. You can ask for a new one in 4\d seconds\./);
    // The countdown runs to the same time.
    expect(earlyPage).toMatch(/datetime="PT4\dS"/);
  });

  it("a resend after the interval says a new code is on its way; the locked address says when to try again", async () => {
    const e = withVars({
      POLICY: JSON.stringify({ client_cache_seconds: 0, resend_interval_seconds: 10, email_failures_per_hour: 3 }),
    });
    const client = await registerClient({}, e);
    const browser = new Browser({ env: e });
    const email = uniqueEmail("resend");
    const at = pinClock();
    const { tx } = await openLoginPage(browser, client);
    expect((await browser.postForm("/email-code/generate", { tx, email })).status).toBe(200);
    at(11_000);
    const resent = await browser.postForm("/email-code/generate", { tx, email, resend: "1" });
    expect(resent.status).toBe(200);
    expect(await resent.text()).toContain(
      "A new code is on its way. Use the newest one: the earlier code no longer works.",
    );
    let last: Response | undefined;
    for (let i = 0; i < 4; i++) last = await browser.postForm("/email-code/verify", { tx, email, code: "000000" });
    expect(last?.status).toBe(429);
    const locked = (await last?.text()) ?? "";
    expect(locked).toMatch(/Too many wrong codes\. You can try again in \d+ (minutes|seconds)\./);
    // Still the code page, with its field marked and the way to a new code or another address.
    expect(locked).toContain('aria-invalid="true"');
    expect(locked).toContain('action="/email-code/restart"');
  });

  it("a code pasted with a space or a dash signs in", async () => {
    const client = await registerClient();
    for (const shape of [
      (c: string) => `${c.slice(0, 3)} ${c.slice(3)}`,
      (c: string) => ` ${c.slice(0, 3)}-${c.slice(3)} `,
    ]) {
      const browser = new Browser();
      const email = uniqueEmail("paste");
      const { tx } = await openLoginPage(browser, client);
      expect((await browser.postForm("/email-code/generate", { tx, email })).status).toBe(200);
      const code = await latestCode(email);
      const res = await browser.postForm("/email-code/verify", { tx, email, code: shape(code) });
      expect(res.status, await res.clone().text()).toBe(303);
    }
  });
});

describe("use another address", () => {
  it("starts over with the address as typed, keeps the authorization request, and the other address signs in", async () => {
    const client = await registerClient();
    const browser = new Browser();
    const typo = uniqueEmail("typo").replace("@example.com", "@exmaple.com");
    const { tx } = await openLoginPage(browser, client, { state: "keep-me" });
    expect((await browser.postForm("/email-code/generate", { tx, email: typo })).status).toBe(200);

    const back = await browser.postForm("/email-code/restart", { tx, email: typo });
    expect(back.status).toBe(200);
    const page = await back.text();
    expect(page).toContain('action="/email-code/generate"');
    expect(field(page, "tx")).toBe(tx);
    expect(page).toContain(`value="${typo}"`);

    const email = uniqueEmail("fixed");
    expect((await browser.postForm("/email-code/generate", { tx, email })).status).toBe(200);
    const verified = await browser.postForm("/email-code/verify", { tx, email, code: await latestCode(email) });
    expect(verified.status).toBe(303);
    const done = await browser.fetch(verified.headers.get("location") as string);
    expect(done.status).toBe(302);
    const redirect = new URL(done.headers.get("location") as string);
    expect(redirect.origin + redirect.pathname).toBe(client.redirect_uris[0]);
    expect(redirect.searchParams.get("state")).toBe("keep-me");
    expect(redirect.searchParams.get("code")).toBeTruthy();
  });

  it("is refused for a transaction this browser does not hold", async () => {
    const client = await registerClient();
    const { tx } = await openLoginPage(new Browser(), client);
    const res = await new Browser().postForm("/email-code/restart", { tx });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain("Sign-in expired");
  });
});

describe("error pages", () => {
  it("speak the person's language, say what to do, and give developers the protocol's detail", async () => {
    const client = await registerClient();
    const res = await new Browser().fetch(
      `/authorize?client_id=${client.client_id}&redirect_uri=https://evil.example/cb`,
      {
        headers: { "Accept-Language": "fr" },
      },
    );
    expect(res.status).toBe(400);
    const html = await res.text();
    expect(html).toContain('<html lang="fr" dir="ltr">');
    expect(html).toContain("Cette demande ne peut pas être utilisée");
    expect(html).toContain('<code lang="en" dir="ltr">redirect_uri is not registered for this client</code>');
  });

  it("logout pages follow ui_locales (RP-Initiated Logout §2)", async () => {
    const res = await new Browser().fetch("/logout?ui_locales=ar");
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain('<html lang="ar" dir="rtl">');
    expect(html).toContain("تم تسجيل الخروج");
  });
});

/**
 * OIDC Registration §2: a client's `logo_uri`, `policy_uri` and `tos_uri` are shown to the person
 * ("the server SHOULD display"). Carried sealed in the login transaction from the client /authorize
 * loaded, so no step looks anything up; only https URLs a page and its CSP can use are shown.
 */
describe("the client's logo, privacy policy and terms (OIDC Registration §2)", () => {
  const registered = {
    client_name: "Dyn Portal",
    logo_uri: "https://img.dyn-portal.test/logo.png",
    policy_uri: "https://dyn-portal.test/privacy",
    tos_uri: "https://dyn-portal.test/terms",
  };

  it("the login pages show the logo (alt: the client's name) and the links in each language; the CSP allows the logo's origin", async () => {
    const client = await registerDynamic({ redirect_uris: ["https://dyn-portal.test/cb"], ...registered });
    const texts = {
      en: ["Privacy policy", "Terms of service"],
      fr: ["Politique de confidentialité", "Conditions d’utilisation"],
      ar: ["سياسة الخصوصية", "شروط الخدمة"],
    };
    for (const [locale, [privacy, terms]] of Object.entries(texts)) {
      const browser = new Browser();
      const { res, html, tx } = await openLoginPage(browser, client, { ui_locales: locale });
      expect(html, locale).toContain(
        '<img class="app-logo" src="https://img.dyn-portal.test/logo.png" alt="Dyn Portal">',
      );
      expect(html, locale).toContain(`<a href="https://dyn-portal.test/privacy" rel="noopener">${privacy}</a>`);
      expect(html, locale).toContain(`<a href="https://dyn-portal.test/terms" rel="noopener">${terms}</a>`);
      const csp = res.headers.get("content-security-policy") as string;
      expect(csp, locale).toContain("img-src 'self' data: https://img.dyn-portal.test;");
      // The code page, from the sealed transaction alone, shows them too.
      const gen = await browser.postForm("/email-code/generate", { tx, email: uniqueEmail("links") });
      expect(gen.status).toBe(200);
      const code = await gen.text();
      expect(code, locale).toContain('alt="Dyn Portal"');
      expect(code, locale).toContain(`>${terms}</a>`);
      expect(gen.headers.get("content-security-policy"), locale).toContain("https://img.dyn-portal.test;");
    }
  });

  it("beside a tenant's logo, the CSP names both origins; a client without them shows neither", async () => {
    const tenant = await createTenant({ branding: { logo_uri: "https://cdn.brand.test/logo.svg" } });
    const token = await mintRegistrationToken(tenant.id);
    const client = await registerDynamic(
      { redirect_uris: ["https://dyn-portal.test/cb"], ...registered },
      { token, base: `/t/${tenant.id}` },
    );
    const { res, html } = await openLoginPage(new Browser({ base: `/t/${tenant.id}` }), client);
    expect(html).toContain('<img src="https://cdn.brand.test/logo.svg" alt=""');
    expect(html).toContain('alt="Dyn Portal"');
    expect(res.headers.get("content-security-policy")).toContain(
      "img-src 'self' data: https://cdn.brand.test https://img.dyn-portal.test;",
    );
    const plain = await registerClient({ client_name: "Plain" });
    const other = await openLoginPage(new Browser(), plain);
    expect(other.html).not.toContain('class="app-logo"');
    expect(other.html).not.toContain("Privacy policy");
    expect(other.res.headers.get("content-security-policy")).toContain("img-src 'self' data:;");
  });

  it("shows only https URLs a page and its CSP can use: an http logo or link, or a host with CSP syntax, is left out", async () => {
    const client = await registerDynamic({
      redirect_uris: ["https://dyn-portal.test/cb"],
      client_name: "Loose",
      logo_uri: "https://img.dyn-portal.test;script-src/x.png",
      policy_uri: "http://dyn-portal.test/privacy",
      tos_uri: "https://dyn-portal.test/terms",
    });
    const { res, html } = await openLoginPage(new Browser(), client);
    expect(html).not.toContain('class="app-logo"');
    expect(html).not.toContain("script-src/x.png");
    expect(html).not.toContain("Privacy policy");
    expect(html).toContain('<a href="https://dyn-portal.test/terms" rel="noopener">Terms of service</a>');
    expect(res.headers.get("content-security-policy")).toContain("img-src 'self' data:;");
    expect(res.headers.get("content-security-policy")).not.toContain("script-src/");
  });
});

describe("cancel", () => {
  it("from either page, the client hears access_denied with its state and iss, and the transaction's cookie is cleared", async () => {
    const client = await registerClient();
    for (const onCodePage of [false, true]) {
      const browser = new Browser();
      const { tx, html } = await openLoginPage(browser, client, { state: "declined" });
      expect(html).toContain('action="/email-code/cancel"');
      if (onCodePage) {
        const sent = await browser.postForm("/email-code/generate", { tx, email: uniqueEmail("cancel") });
        expect(await sent.text()).toContain('action="/email-code/cancel"');
      }
      const res = await browser.postForm("/email-code/cancel", { tx });
      expect(res.status, await res.clone().text()).toBe(302);
      const to = new URL(res.headers.get("location") as string);
      expect(to.origin + to.pathname).toBe(client.redirect_uris[0]);
      expect(to.searchParams.get("error")).toBe("access_denied");
      expect(to.searchParams.get("state")).toBe("declined");
      expect(to.searchParams.get("iss")).toBe(ISSUER);
      expect(to.searchParams.get("code")).toBeNull();
      expect(res.headers.getSetCookie().some((c) => /kw_tx=;|max-age=0/i.test(c))).toBe(true);
    }
  });

  it("is refused for a transaction this browser does not hold, and for JSON", async () => {
    const client = await registerClient();
    const browser = new Browser();
    const { tx } = await openLoginPage(browser, client);
    const stranger = await new Browser().postForm("/email-code/cancel", { tx });
    expect(stranger.status).toBe(400);
    expect(stranger.headers.get("location")).toBeNull();
    const json = await browser.postJson("/email-code/cancel", { tx });
    expect(json.status).toBe(400);
  });
});
