import { describe, expect, it } from "vitest";
import { admin, type Browser, form, registerClient, uniqueEmail } from "../support/harness";
import { createTenant, registerTenantClient, tenantAdmin } from "../tenants/support";
import { csrfOf, grant, signIn } from "./support";

// The console's applications pages (issue 43): every action through the admin API, checked here by
// the stored state the platform token reads back; a tenant operator reaches only its own tenant's.

interface StoredClient {
  client_id: string;
  client_name: string;
  token_endpoint_auth_method: string;
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  grant_types: string[];
  scope: string;
  resources: string[];
  allowed_cors_origins: string[];
  branding: Record<string, string>;
  require_pkce: boolean;
  dpop_bound_access_tokens: boolean;
  require_pushed_authorization_requests: boolean;
}

/** A form post as a browser sends it: repeated names for checkboxes, the session's CSRF token. */
function post(browser: Browser, path: string, csrf: string, fields: [string, string][]): Promise<Response> {
  return browser.fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams([["csrf", csrf], ...fields]),
  });
}

const stored = async (tenant: string, id: string) => {
  const res = await tenantAdmin(tenant, `/clients/${id}`);
  return { status: res.status, client: (await res.json()) as StoredClient };
};
const clientCount = async (tenant: string) =>
  ((await (await tenantAdmin(tenant, "/clients")).json()) as { clients: unknown[] }).clients.length;

async function operatorOf(tenant?: string): Promise<{ browser: Browser; csrf: string }> {
  const email = uniqueEmail("apps-op");
  expect((await grant(tenant ? { email, tenant } : { email })).status).toBe(201);
  const { browser, page } = await signIn(email);
  return { browser, csrf: csrfOf(await page.text()) };
}

const REGISTER: [string, string][] = [
  ["client_name", "Console Shop"],
  ["token_endpoint_auth_method", "client_secret_basic"],
  ["grant_types", "authorization_code"],
  ["grant_types", "refresh_token"],
  ["redirect_uris", "https://shop.example.com/cb\r\nhttps://shop.example.com/cb2\r\n"],
  ["post_logout_redirect_uris", "https://shop.example.com/bye"],
  ["scope", "openid email"],
  ["resources", "https://api.shop.example.com/"],
  ["allowed_cors_origins", ""],
  ["jwks_uri", ""],
  ["require_pkce", "on"],
  ["dpop_bound_access_tokens", "on"],
  ["branding.product_name", "Shop"],
  ["branding.logo_uri", ""],
  ["branding.primary_color", "#AA3300"],
  ["branding.support_uri", "mailto:help@shop.example.com"],
];

describe("console applications: who may reach what", () => {
  it("keeps a tenant operator out of another tenant's applications, by URL and by form", {
    timeout: 90_000,
  }, async () => {
    const mine = await createTenant({ name: "Apps Mine" });
    const other = await createTenant({ name: "Apps Other" });
    const theirs = await registerTenantClient(other.id, { client_name: "Their app" });
    const { browser, csrf } = await operatorOf(mine.id);

    expect((await browser.fetch(`/console/t/${mine.id}/apps`)).status).toBe(200);
    for (const path of [
      `/console/t/${other.id}/apps`,
      `/console/t/${other.id}/apps/new`,
      `/console/t/${other.id}/apps/${theirs.client_id}`,
      `/console/t/${other.id}/apps/${theirs.client_id}/delete`,
      "/console/t/default/apps",
    ]) {
      const res = await browser.fetch(path);
      expect(res.status, path).toBe(403);
      expect(await res.text()).not.toContain("Their app");
    }
    const before = await clientCount(other.id);
    expect((await post(browser, `/console/t/${other.id}/apps/new`, csrf, REGISTER)).status).toBe(403);
    expect(await clientCount(other.id)).toBe(before);
    expect(
      (await post(browser, `/console/t/${other.id}/apps/${theirs.client_id}/delete`, csrf, [["confirm", "Their app"]]))
        .status,
    ).toBe(403);
    expect(
      (await post(browser, `/console/t/${other.id}/apps/${theirs.client_id}/rotate-secret`, csrf, [])).status,
    ).toBe(403);

    // The other tenant's client id under the operator's own tenant: the API does not find it there.
    const own = (rest: string) => `/console/t/${mine.id}/apps/${theirs.client_id}${rest}`;
    expect((await browser.fetch(own(""))).status).toBe(404);
    expect((await post(browser, own(""), csrf, [["client_name", "Hijacked"]])).status).toBe(404);
    expect((await post(browser, own("/rotate-secret"), csrf, [])).status).toBe(404);
    expect((await post(browser, own("/delete"), csrf, [["confirm", "Their app"]])).status).toBe(404);
    const after = await stored(other.id, theirs.client_id);
    expect(after.status).toBe(200);
    expect(after.client.client_name).toBe("Their app");
    // A form without the session's CSRF token changes nothing on the operator's own tenant either.
    const res = await browser.postForm(`/console/t/${mine.id}/apps/new`, { client_name: "No token" });
    expect(res.status).toBe(403);
    expect(await clientCount(mine.id)).toBe(0);
  });

  it("shows the console's own client read-only at the default tenant, and refuses to change it", {
    timeout: 60_000,
  }, async () => {
    const { browser, csrf } = await operatorOf();
    const list = await (await browser.fetch("/console/t/default/apps")).text();
    expect(list).toContain("keyway-console");
    expect(list).toContain("read-only");
    expect(list).not.toContain('href="/console/t/default/apps/keyway-console"');
    const page = await browser.fetch("/console/t/default/apps/keyway-console");
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("cannot be changed here");
    expect(html).not.toContain('action="/console/t/default/apps/keyway-console"');
    const before = (await (await admin("/clients/keyway-console")).json()) as StoredClient;
    for (const [path, fields] of [
      ["", [["client_name", "Taken over"]]],
      ["/delete", [["confirm", before.client_name]]],
      ["/rotate-secret", []],
    ] as [string, [string, string][]][]) {
      const res = await post(browser, `/console/t/default/apps/keyway-console${path}`, csrf, fields);
      expect(res.status, path).toBe(403);
    }
    expect(await (await admin("/clients/keyway-console")).json()).toEqual(before);
  });
});

describe("console applications: register, change, new secret, delete", () => {
  it("registers an application, its secret shown once in the answer; keeps input and shows the API's refusal", {
    timeout: 90_000,
  }, async () => {
    const tenant = await createTenant({ name: "Apps Register" });
    const { browser, csrf } = await operatorOf(tenant.id);
    const form = await browser.fetch(`/console/t/${tenant.id}/apps/new`);
    expect(form.status).toBe(200);
    const formHtml = await form.text();
    for (const name of ["client_name", "redirect_uris", "scope", "resources", "branding.primary_color"])
      expect(formHtml).toContain(`name="${name}"`);

    // Refused by the API: the page shows why beside the field, keeps what was typed, stores nothing.
    const bad = REGISTER.map(([k, v]): [string, string] =>
      k === "redirect_uris" ? [k, "http://shop.example.com/cb"] : [k, v],
    );
    const refused = await post(browser, `/console/t/${tenant.id}/apps/new`, csrf, bad);
    expect(refused.status).toBe(400);
    const refusedHtml = await refused.text();
    expect(refusedHtml).toContain("http is allowed only for loopback");
    expect(refusedHtml).toMatch(/aria-describedby="[^"]*problem-redirect_uris"[^>]*aria-invalid="true"/);
    expect(refusedHtml).toContain(">http://shop.example.com/cb</textarea>");
    expect(refusedHtml).toContain('value="Console Shop"');
    expect(refusedHtml).toContain('value="#AA3300"');
    expect(await clientCount(tenant.id)).toBe(0);

    const ok = await post(browser, `/console/t/${tenant.id}/apps/new`, csrf, REGISTER);
    expect(ok.status).toBe(200);
    expect(ok.headers.get("cache-control")).toBe("no-store");
    expect(ok.headers.get("location")).toBeNull();
    const html = await ok.text();
    const secret = /id="client-secret">(kws_[^<]+)</.exec(html)?.[1];
    const id = /id="client-id">(kwc_[^<]+)</.exec(html)?.[1] as string;
    expect(secret).toBeTruthy();
    expect(id).toBeTruthy();
    const { client } = await stored(tenant.id, id);
    expect(client).toMatchObject({
      client_name: "Console Shop",
      token_endpoint_auth_method: "client_secret_basic",
      redirect_uris: ["https://shop.example.com/cb", "https://shop.example.com/cb2"],
      post_logout_redirect_uris: ["https://shop.example.com/bye"],
      grant_types: ["authorization_code", "refresh_token"],
      scope: "openid email",
      resources: ["https://api.shop.example.com/"],
      require_pkce: true,
      dpop_bound_access_tokens: true,
      require_pushed_authorization_requests: false,
      branding: { product_name: "Shop", primary_color: "#aa3300", support_uri: "mailto:help@shop.example.com" },
    });
    // The application's page never shows the secret again.
    const page = await (await browser.fetch(`/console/t/${tenant.id}/apps/${id}`)).text();
    expect(page).toContain("Console Shop");
    expect(page).not.toContain(secret);
  });

  it("changes an application's settings; refuses a switch to another kind with the input kept", {
    timeout: 90_000,
  }, async () => {
    const tenant = await createTenant({ name: "Apps Change" });
    const app = await registerTenantClient(tenant.id, { client_name: "Change me" });
    const { browser, csrf } = await operatorOf(tenant.id);
    const path = `/console/t/${tenant.id}/apps/${app.client_id}`;
    const page = await (await browser.fetch(path)).text();
    // A secret application may choose between the two ways of sending its secret, not become public.
    expect(page).toContain('value="client_secret_post"');
    expect(page).not.toContain('<option value="none"');
    const changed: [string, string][] = [
      ["client_name", "Changed"],
      ["token_endpoint_auth_method", "client_secret_post"],
      ["grant_types", "authorization_code"],
      ["redirect_uris", "https://changed.example.com/cb"],
      ["post_logout_redirect_uris", ""],
      ["scope", "openid  profile"],
      ["resources", "https://api.changed.example.com/\nhttps://billing.changed.example.com/"],
      ["allowed_cors_origins", "https://changed.example.com"],
      ["require_pkce", "on"],
      ["require_pushed_authorization_requests", "on"],
      ["branding.product_name", "Changed Inc"],
      ["branding.logo_uri", ""],
      ["branding.primary_color", ""],
      ["branding.support_uri", ""],
    ];
    const saved = await post(browser, path, csrf, changed);
    expect(saved.status, await saved.clone().text()).toBe(303);
    expect(saved.headers.get("location")).toBe(`${path}?notice=saved`);
    expect((await stored(tenant.id, app.client_id)).client).toMatchObject({
      client_name: "Changed",
      token_endpoint_auth_method: "client_secret_post",
      redirect_uris: ["https://changed.example.com/cb"],
      post_logout_redirect_uris: [],
      grant_types: ["authorization_code"],
      scope: "openid profile",
      resources: ["https://api.changed.example.com/", "https://billing.changed.example.com/"],
      allowed_cors_origins: ["https://changed.example.com"],
      require_pushed_authorization_requests: true,
      dpop_bound_access_tokens: false,
      branding: { product_name: "Changed Inc" },
    });
    expect(await (await browser.fetch(`${path}?notice=saved`)).text()).toContain("Changes saved.");

    const forged = changed.map(([k, v]): [string, string] =>
      k === "token_endpoint_auth_method" ? [k, "none"] : k === "client_name" ? [k, "Kept typed"] : [k, v],
    );
    const refused = await post(browser, path, csrf, forged);
    expect(refused.status).toBe(400);
    const html = await refused.text();
    expect(html).toContain("cannot switch between public, secret and key authentication");
    expect(html).toContain('value="Kept typed"');
    expect((await stored(tenant.id, app.client_id)).client.client_name).toBe("Changed");

    // A problem the API names by its field is shown beside that field.
    const noOpenid = changed.map(([k, v]): [string, string] => (k === "scope" ? [k, "email"] : [k, v]));
    const scopeHtml = await (await post(browser, path, csrf, noOpenid)).text();
    expect(scopeHtml).toMatch(/<p class="field-problem" id="problem-scope">.*scope must include openid/s);
  });

  it("makes a new secret after a confirmation step: the old one stops, the new one works", {
    timeout: 90_000,
  }, async () => {
    const machine = await registerClient({
      client_name: `Console machine ${Date.now()}`,
      redirect_uris: [],
      post_logout_redirect_uris: [],
      grant_types: ["client_credentials"],
      scope: "reports:read",
    });
    const { browser, csrf } = await operatorOf();
    const path = `/console/t/default/apps/${machine.client_id}`;
    expect(await (await browser.fetch(path)).text()).toContain(`href="${path}/rotate-secret"`);
    const confirm = await browser.fetch(`${path}/rotate-secret`);
    expect(confirm.status).toBe(200);
    expect(await confirm.text()).toContain(`action="${path}/rotate-secret"`);
    // Only the confirmation changes anything: the secret still works after the GET.
    expect((await form(machine, { grant_type: "client_credentials" })).status).toBe(200);
    const rotated = await post(browser, `${path}/rotate-secret`, csrf, []);
    expect(rotated.status).toBe(200);
    expect(rotated.headers.get("cache-control")).toBe("no-store");
    const secret = /id="client-secret">(kws_[^<]+)</.exec(await rotated.text())?.[1] as string;
    expect(secret).toBeTruthy();
    expect((await form(machine, { grant_type: "client_credentials" })).status).toBe(401);
    expect((await form({ ...machine, client_secret: secret }, { grant_type: "client_credentials" })).status).toBe(200);
  });

  it("deletes an application only when its name is typed", { timeout: 90_000 }, async () => {
    const tenant = await createTenant({ name: "Apps Delete" });
    const app = await registerTenantClient(tenant.id, { client_name: "Old app" });
    const { browser, csrf } = await operatorOf(tenant.id);
    const path = `/console/t/${tenant.id}/apps/${app.client_id}/delete`;
    expect((await browser.fetch(path)).status).toBe(200);
    const wrong = await post(browser, path, csrf, [["confirm", "old app"]]);
    expect(wrong.status).toBe(400);
    expect(await wrong.text()).toContain("Nothing was deleted");
    expect((await stored(tenant.id, app.client_id)).status).toBe(200);
    const done = await post(browser, path, csrf, [["confirm", "Old app"]]);
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe(`/console/t/${tenant.id}/apps?notice=deleted`);
    expect((await stored(tenant.id, app.client_id)).status).toBe(404);
    expect(await (await browser.fetch(done.headers.get("location") as string)).text()).toContain(
      "The application was deleted.",
    );
  });

  it("speaks French and Arabic", { timeout: 60_000 }, async () => {
    const tenant = await createTenant({ name: "Apps Lang" });
    const { browser } = await operatorOf(tenant.id);
    const fr = await (await browser.fetch(`/console/t/${tenant.id}/apps/new?lang=fr`)).text();
    expect(fr).toContain("Enregistrer une application");
    const ar = await (await browser.fetch(`/console/t/${tenant.id}/apps/new?lang=ar`)).text();
    expect(ar).toContain('dir="rtl"');
    expect(ar).toContain("تسجيل تطبيق");
    // URLs read left to right on an Arabic page.
    expect(ar).toMatch(
      /<textarea[^>]*name="redirect_uris"[^>]*dir="ltr"|<textarea[^>]*dir="ltr"[^>]*name="redirect_uris"/,
    );
  });
});
