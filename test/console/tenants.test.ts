import { describe, expect, it } from "vitest";
import costDoc from "../../docs/cost.md?raw";
import { PRICES } from "../../workers/op-mgmt/src/bill";
import { billGrowth, type PlatformStats } from "../../workers/op-mgmt/src/stats";
import { admin, type Browser, call, fullLogin, registerClient, uniqueEmail } from "../support/harness";
import { createTenant, tenantAdmin, uniqueTenantId } from "../tenants/support";
import { consoleEnv, csrfOf, grant, signIn } from "./support";

/**
 * The tenants' pages of the console (issue 43): creating a tenant, its settings (status, language,
 * branding, signing keys, admin keys, deletion with the purge's progress) and the capacity page, and
 * the admin API they added (`GET /admin/v1/tenant-purges/{id}`, `POST /admin/v1/stats/bill`). Each
 * change is checked in stored state through the admin API with the platform token; each refusal by
 * URL and by form.
 */

/** A signed-in operator and the CSRF token of their forms. */
async function operator(tenant?: string): Promise<{ browser: Browser; csrf: string; email: string }> {
  const email = uniqueEmail(tenant ? "tenant-op" : "deploy-op");
  expect((await grant(tenant ? { email, tenant } : { email })).status).toBe(201);
  const { browser, page } = await signIn(email);
  return { browser, csrf: csrfOf(await page.text()), email };
}

const tenantOf = async (id: string) => (await admin(`/tenants/${id}`)).json() as Promise<Record<string, unknown>>;

describe("admin API: a deleted tenant's purge", () => {
  it("is read by the platform only, 404 until the tenant is deleted, then done with nothing left", async () => {
    const tenant = await createTenant();
    expect((await tenantAdmin(tenant.id, "/admin-keys", { method: "POST", json: { name: "k" } })).status).toBe(201);
    expect((await admin(`/tenant-purges/${tenant.id}`)).status).toBe(404);
    expect((await admin("/tenant-purges/NOT-AN-ID")).status).toBe(404);
    expect((await call(`/admin/v1/tenant-purges/${tenant.id}`)).status).toBe(401);
    expect((await admin(`/tenants/${tenant.id}`, { method: "DELETE" })).status).toBe(204);
    const res = await admin(`/tenant-purges/${tenant.id}`);
    expect(res.status).toBe(200);
    const purge = (await res.json()) as { done: boolean; purged_at: number; remaining: Record<string, number> };
    expect(purge.done).toBe(true);
    expect(purge.purged_at).toBeGreaterThan(0);
    expect(Object.keys(purge.remaining)).toEqual(expect.arrayContaining(["users", "clients", "signing_keys"]));
    expect(Object.values(purge.remaining).every((n) => n === 0)).toBe(true);
    // Not a tenant's route: under a tenant's admin path it does not exist.
    expect((await tenantAdmin(tenant.id, "/tenant-purges/x")).status).toBe(404);
  });

  it("shows what is left of a purge cut short", async () => {
    const tenant = await createTenant();
    await admin(`/tenants/${tenant.id}`, { method: "DELETE" });
    // As a purge a crash cut short leaves it: the tombstone without purged_at, a row not yet deleted.
    await consoleEnv.DB.prepare("UPDATE tenants SET purged_at = NULL WHERE id = ?").bind(tenant.id).run();
    await consoleEnv.DB.prepare(
      "INSERT INTO admin_keys (id, tenant, name, key_hash, created_at) VALUES (?, ?, 'left', ?, 0)",
    )
      .bind(`kak_${tenant.id}`, tenant.id, `hash-${tenant.id}`)
      .run();
    const purge = (await (await admin(`/tenant-purges/${tenant.id}`)).json()) as {
      done: boolean;
      remaining: Record<string, number>;
    };
    expect(purge.done).toBe(false);
    expect(purge.remaining.admin_keys).toBe(1);
  });
});

describe("admin API: the bill per million logins", () => {
  it("prices with docs/cost.md's table", () => {
    for (const [key, p] of Object.entries(PRICES)) {
      const row = new RegExp(`^\\| \`${key}\` \\| [^|]+ \\| ([0-9,]+) \\| ([0-9.]+) \\|`, "m").exec(costDoc);
      expect(row, key).not.toBeNull();
      expect(Number(row?.[1]?.replace(/,/g, "")), key).toBe(p.per);
      expect(Number(row?.[2]), key).toBe(p.usd);
    }
  });

  it("counts a shard restarted between the reads from its restart, never below zero", () => {
    const row = (since: string, served: number, rows: number, storage: number) => ({
      region: "wnam",
      generation: 0,
      shard: 0,
      since,
      served,
      rows_written: rows,
      rows_read: 0,
      alarms_set: 0,
      alarm_runs: 0,
      d1_rows_read: 0,
      d1_rows_written: 0,
      pending_deletes: 0,
      storage_bytes: storage,
    });
    const stats = (shards: ReturnType<typeof row>[], requests: number) =>
      ({
        stores: { session: { shards } },
        billing: { worker_requests: requests, d1_rows_read: 0, d1_rows_written: 0, d1_size_bytes: 0 },
      }) as unknown as PlatformStats;
    // The first shard ran on (5 calls more); the second restarted (evicted while idle) and made 2 since.
    const before = stats([row("t0", 100, 300, 4096), { ...row("t0", 50, 90, 8192), shard: 1 }], 40);
    const after = stats([row("t0", 105, 310, 4096), { ...row("t1", 2, 6, 9216), shard: 1 }], 3);
    const { billed, stores } = billGrowth(before, after);
    expect(stores.session).toEqual({ calls: 7, rows: 16 });
    expect(billed.durable_object_requests).toBe(7);
    expect(billed.durable_object_rows_written).toBe(16);
    // Storage is a level, kept across a restart: its difference.
    expect(billed.durable_object_storage_bytes).toBe(1024);
    // An isolate replaced (its counter went down) counts what the new one served.
    expect(billed.worker_requests).toBe(3);
  });

  it("validates its window and is the platform's only", async () => {
    expect((await admin("/stats/bill", { method: "POST", json: { window_seconds: 0 } })).status).toBe(400);
    expect((await admin("/stats/bill", { method: "POST", json: { window: 1 } })).status).toBe(400);
    const tenant = await createTenant();
    expect((await tenantAdmin(tenant.id, "/stats/bill", { method: "POST", json: {} })).status).toBe(404);
  });
});

describe("console: creating a tenant", () => {
  it("creates one from the form, showing the API's validation on its fields", { timeout: 60_000 }, async () => {
    const { browser, csrf } = await operator();
    const page = await (await browser.fetch("/console")).text();
    expect(page).toContain('action="/console/tenants"');
    expect(page).toMatch(/<label for="create-id">/);

    const bad = await browser.postForm("/console/tenants", { csrf, id: "Not Valid", name: "Bad", locale: "fr" });
    expect(bad.status).toBe(400);
    const badHtml = await bad.text();
    expect(badHtml).toContain('role="alert"');
    expect(badHtml).toMatch(/id="create-id"[^>]*value="Not Valid"[^>]*aria-invalid="true"/);
    expect(badHtml).toContain('id="create-id-error"');
    expect(badHtml).toMatch(/<option value="fr" lang="fr" selected/);
    expect((await admin("/tenants/not valid")).status).toBe(404);

    const id = uniqueTenantId("con");
    const made = await browser.postForm("/console/tenants", { csrf, id, name: "Console Made", locale: "ar" });
    expect(made.status, await made.clone().text()).toBe(303);
    expect(made.headers.get("location")).toBe(`/console/t/${id}?notice=created`);
    expect(await tenantOf(id)).toMatchObject({ id, name: "Console Made", status: "active", locale: "ar" });
    const shown = await (await browser.fetch(`/console/t/${id}?notice=created`)).text();
    expect(shown).toContain("The tenant is created");

    const again = await browser.postForm("/console/tenants", { csrf, id, name: "Twice" });
    expect(again.status).toBe(409);
    expect(await again.text()).toMatch(/id="create-id"[^>]*aria-invalid="true"/);
  });

  it("is not offered to a tenant operator, and refused by form", { timeout: 60_000 }, async () => {
    const mine = await createTenant();
    const { browser, csrf } = await operator(mine.id);
    expect(await (await browser.fetch("/console")).text()).not.toContain('action="/console/tenants"');
    const id = uniqueTenantId("nope");
    const res = await browser.postForm("/console/tenants", { csrf, id, name: "Nope" });
    expect(res.status).toBe(403);
    expect((await admin(`/tenants/${id}`)).status).toBe(404);
  });
});

describe("console: a tenant's settings", () => {
  it("disables and enables, sets the language and the branding, for a deployment operator", {
    timeout: 90_000,
  }, async () => {
    const tenant = await createTenant({ name: "Settings Co" });
    const { browser, csrf } = await operator();
    const base = `/console/t/${tenant.id}`;
    const overview = await (await browser.fetch(base)).text();
    expect(overview).toContain(`href="${base}/status/disable"`);
    // Disabling asks first: the link is a page, the change is its form.
    const ask = await browser.fetch(`${base}/status/disable`);
    expect(ask.status).toBe(200);
    expect(await ask.text()).toContain('name="status" value="disabled"');
    expect((await tenantOf(tenant.id)).status).toBe("active");
    const off = await browser.postForm(`${base}/status`, { csrf, status: "disabled" });
    expect(off.status).toBe(303);
    expect((await tenantOf(tenant.id)).status).toBe("disabled");
    expect((await call(`/t/${tenant.id}/.well-known/openid-configuration`)).status).toBe(403);
    expect(await (await browser.fetch(base)).text()).toContain('name="status" value="active"');
    expect((await browser.postForm(`${base}/status`, { csrf, status: "active" })).status).toBe(303);
    expect((await tenantOf(tenant.id)).status).toBe("active");

    expect((await browser.postForm(`${base}/language`, { csrf, locale: "fr" })).status).toBe(303);
    expect((await tenantOf(tenant.id)).locale).toBe("fr");
    expect((await browser.postForm(`${base}/language`, { csrf, locale: "" })).status).toBe(303);
    expect((await tenantOf(tenant.id)).locale).toBeNull();

    // A preview stores nothing, and shows a bad field under itself.
    const fields = {
      product_name: "Acme Cloud",
      logo_uri: "https://cdn.acme.example/logo.png",
      primary_color: "#ffcc00",
      support_uri: "mailto:help@acme.example",
    };
    const preview = await browser.postForm(`${base}/branding`, {
      csrf,
      ...fields,
      primary_color: "yellow",
      preview_locale: "ar",
      action: "preview",
    });
    expect(preview.status).toBe(400);
    const previewHtml = await preview.text();
    expect(previewHtml).toMatch(/id="brand-primary_color"[^>]*aria-invalid="true"/);
    // The login page's Arabic words, the product, and the logo's origin allowed by the page's CSP.
    expect(previewHtml).toContain('lang="ar" dir="rtl" aria-hidden="true"');
    expect(previewHtml).toContain("Acme Cloud");
    expect(preview.headers.get("content-security-policy")).toContain("img-src 'self' data: https://cdn.acme.example");
    expect((await tenantOf(tenant.id)).branding).toEqual({});

    const good = await browser.postForm(`${base}/branding`, { csrf, ...fields, action: "preview" });
    expect(good.status).toBe(200);
    // lookOf makes text on #ffcc00 black: the preview shows what the login page will.
    expect(await good.text()).toContain("--primary:#ffcc00;--on-primary:#111111");
    expect((await browser.postForm(`${base}/branding`, { csrf, ...fields, action: "save" })).status).toBe(303);
    expect((await tenantOf(tenant.id)).branding).toEqual(fields);

    // The API's refusal (a logo that is not https) is shown on the form; nothing changes.
    const refused = await browser.postForm(`${base}/branding`, {
      csrf,
      ...fields,
      logo_uri: "http://evil.example/x.png",
      action: "save",
    });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toMatch(/id="brand-logo_uri"[^>]*aria-invalid="true"/);
    expect((await tenantOf(tenant.id)).branding).toEqual(fields);
  });

  it("rotates signing keys after a confirmation, mints an admin key shown once, revokes it", {
    timeout: 90_000,
  }, async () => {
    const tenant = await createTenant();
    const { browser, csrf } = await operator();
    const base = `/console/t/${tenant.id}`;
    const keysBefore = (await (await tenantAdmin(tenant.id, "/keys")).json()) as { keys: unknown[] };
    expect((await browser.fetch(`${base}/keys/rotate`)).status).toBe(200);
    const rotated = await browser.postForm(`${base}/keys/rotate`, { csrf });
    expect(rotated.status).toBe(303);
    const keysAfter = (await (await tenantAdmin(tenant.id, "/keys")).json()) as { keys: unknown[] };
    expect(keysAfter.keys.length).toBe(keysBefore.keys.length + 2);

    const minted = await browser.postForm(`${base}/admin-keys`, { csrf, name: "CI deploys" });
    expect(minted.status).toBe(200);
    expect(minted.headers.get("cache-control")).toBe("no-store");
    const key = /id="minted-key"[^>]*value="(kwa_[^"]+)"/.exec(await minted.text())?.[1] as string;
    expect(key).toBeTruthy();
    const withKey = await call(`/admin/v1/tenants/${tenant.id}/clients`, {
      headers: { Authorization: `Bearer ${key}` },
    });
    expect(withKey.status).toBe(200);
    // Shown once: the keys page lists the key by name, never the key.
    const list = await (await browser.fetch(`${base}/keys`)).text();
    expect(list).toContain("CI deploys");
    expect(list).not.toContain(key);
    const { admin_keys } = (await (await tenantAdmin(tenant.id, "/admin-keys")).json()) as {
      admin_keys: { id: string; revoked_at: number | null }[];
    };
    const keyId = admin_keys[0]?.id as string;
    expect((await browser.fetch(`${base}/admin-keys/${keyId}/revoke`)).status).toBe(200);
    expect((await browser.postForm(`${base}/admin-keys/${keyId}/revoke`, { csrf })).status).toBe(303);
    expect(
      (await call(`/admin/v1/tenants/${tenant.id}/clients`, { headers: { Authorization: `Bearer ${key}` } })).status,
    ).toBe(401);
  });

  it("deletes only with the tenant's id typed, then shows the purge done", { timeout: 90_000 }, async () => {
    const tenant = await createTenant();
    await registerClient({}, consoleEnv, tenant.id);
    const { browser, csrf } = await operator();
    const base = `/console/t/${tenant.id}`;
    expect(await (await browser.fetch(`${base}/delete`)).text()).toContain('name="confirm"');
    const wrong = await browser.postForm(`${base}/delete`, { csrf, confirm: `${tenant.id}x` });
    expect(wrong.status).toBe(400);
    expect((await admin(`/tenants/${tenant.id}`)).status).toBe(200);
    const done = await browser.postForm(`${base}/delete`, { csrf, confirm: tenant.id });
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe(`/console/purges/${tenant.id}`);
    expect((await admin(`/tenants/${tenant.id}`)).status).toBe(404);
    const progress = await browser.fetch(`/console/purges/${tenant.id}`);
    expect(progress.status).toBe(200);
    // Done: no more refreshing.
    expect(progress.headers.get("refresh")).toBeNull();
    expect(await progress.text()).toContain("and all its data are deleted");
    // The tenant's pages are gone with it.
    expect((await browser.fetch(base)).status).toBe(403);
  });

  it("refreshes the progress of a purge that is not done", { timeout: 60_000 }, async () => {
    const tenant = await createTenant();
    await admin(`/tenants/${tenant.id}`, { method: "DELETE" });
    await consoleEnv.DB.prepare("UPDATE tenants SET purged_at = NULL WHERE id = ?").bind(tenant.id).run();
    const { browser, csrf } = await operator();
    const res = await browser.fetch(`/console/purges/${tenant.id}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("refresh")).toBe("5");
    expect(await res.text()).toMatch(/<progress id="purge-progress" max="9" value="9"/);
    // Continuing runs the DELETE again, which finishes it.
    expect((await browser.postForm(`/console/purges/${tenant.id}`, { csrf })).status).toBe(303);
    expect(((await (await admin(`/tenant-purges/${tenant.id}`)).json()) as { done: boolean }).done).toBe(true);
  });
});

describe("console: a tenant operator's settings", () => {
  it("sees its settings, with why it cannot change what is the platform's; the forms are refused", {
    timeout: 90_000,
  }, async () => {
    const mine = await createTenant({ name: "Mine Ltd" });
    const other = await createTenant({ name: "Other Ltd" });
    const { browser, csrf } = await operator(mine.id);
    const base = `/console/t/${mine.id}`;
    const overview = await (await browser.fetch(base)).text();
    expect(overview).toContain("take a deployment operator");
    expect(overview).not.toContain(`${base}/status/disable`);
    const keys = await (await browser.fetch(`${base}/keys`)).text();
    expect(keys).toContain("Only a deployment operator mints and revokes admin keys");
    expect(keys).not.toContain(`action="${base}/admin-keys"`);

    // By form, the admin API refuses what the page does not offer; nothing changes.
    expect((await browser.postForm(`${base}/status`, { csrf, status: "disabled" })).status).toBe(403);
    expect((await browser.postForm(`${base}/language`, { csrf, locale: "ar" })).status).toBe(403);
    const branding = await browser.postForm(`${base}/branding`, { csrf, product_name: "X", action: "save" });
    expect(branding.status).toBe(403);
    expect((await browser.postForm(`${base}/admin-keys`, { csrf, name: "sneaky" })).status).toBe(403);
    expect((await browser.postForm(`${base}/delete`, { csrf, confirm: mine.id })).status).toBe(403);
    const stored = await tenantOf(mine.id);
    expect(stored).toMatchObject({ status: "active", locale: null, branding: {} });
    const { admin_keys } = (await (await tenantAdmin(mine.id, "/admin-keys")).json()) as { admin_keys: unknown[] };
    expect(admin_keys).toEqual([]);
    expect((await browser.fetch(`/console/purges/${mine.id}`)).status).toBe(403);

    // Its own signing keys are its to rotate (a tenant route).
    const before = (await (await tenantAdmin(mine.id, "/keys")).json()) as { keys: unknown[] };
    expect((await browser.postForm(`${base}/keys/rotate`, { csrf })).status).toBe(303);
    const after = (await (await tenantAdmin(mine.id, "/keys")).json()) as { keys: unknown[] };
    expect(after.keys.length).toBe(before.keys.length + 2);

    // Another tenant's settings: refused by URL and by form, before anything is read or changed.
    const otherKeys = (await (await tenantAdmin(other.id, "/keys")).json()) as { keys: unknown[] };
    for (const path of ["", "/branding", "/keys", "/keys/rotate", "/delete", "/status/disable"]) {
      const res = await browser.fetch(`/console/t/${other.id}${path}`);
      expect(res.status, path).toBe(403);
      expect(await res.text()).not.toContain("Other Ltd");
    }
    for (const [path, form] of [
      ["/keys/rotate", {}],
      ["/status", { status: "disabled" }],
      ["/delete", { confirm: other.id }],
      ["/admin-keys", { name: "x" }],
    ] as const)
      expect((await browser.postForm(`/console/t/${other.id}${path}`, { csrf, ...form })).status, path).toBe(403);
    expect((await (await tenantAdmin(other.id, "/keys")).json()) as { keys: unknown[] }).toEqual(otherKeys);
    expect(await tenantOf(other.id)).toMatchObject({ status: "active" });
  });
});

describe("console: capacity", () => {
  it("is refused to a tenant operator, by URL and by form", { timeout: 60_000 }, async () => {
    const mine = await createTenant();
    const { browser, csrf } = await operator(mine.id);
    const before = await (await admin("/shards")).json();
    for (const path of ["/console/capacity", "/console/capacity/change?store=entity&shards=40"])
      expect((await browser.fetch(path)).status, path).toBe(403);
    expect((await browser.postForm("/console/capacity/change", { csrf, store: "entity", shards: "40" })).status).toBe(
      403,
    );
    expect((await browser.postForm("/console/capacity/plan", { csrf, window_seconds: "1" })).status).toBe(403);
    expect((await browser.postForm("/console/capacity/bill", { csrf, window_seconds: "1" })).status).toBe(403);
    expect(await (await admin("/shards")).json()).toEqual(before);
    expect(await (await browser.fetch("/console")).text()).not.toContain('href="/console/capacity"');
  });

  it("shows each store's shards as a chart and a table; a change takes a confirmation", {
    timeout: 60_000,
  }, async () => {
    const { browser, csrf } = await operator();
    const page = await browser.fetch("/console/capacity");
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('<svg class="chart"');
    expect(html).toMatch(/<th scope="row" class="id">session<\/th>/);
    const shards = (await (await admin("/shards")).json()) as {
      stores: Record<string, { shards: number; generations: number[] }>;
    };
    const entity = shards.stores.entity as { shards: number; generations: number[] };
    const next = entity.shards + 1;
    const review = await browser.fetch(`/console/capacity/change?store=entity&shards=${next}`);
    expect(review.status).toBe(200);
    expect(await review.text()).toContain(`name="shards" value="${next}"`);
    // Reviewing changed nothing.
    expect(((await (await admin("/shards")).json()) as typeof shards).stores.entity?.generations).toEqual(
      entity.generations,
    );
    expect((await browser.fetch("/console/capacity/change?store=entity&shards=0")).status).toBe(400);
    const done = await browser.postForm("/console/capacity/change", { csrf, store: "entity", shards: String(next) });
    expect(done.status, await done.clone().text()).toBe(303);
    const after = (await (await admin("/shards")).json()) as typeof shards;
    expect(after.stores.entity?.generations).toEqual([...entity.generations, next]);
    // One pending generation at a time: the API's 409 is shown on the page.
    const again = await browser.postForm("/console/capacity/change", { csrf, store: "entity", shards: String(next) });
    expect(again.status).toBe(409);
    expect(await again.text()).toContain('role="alert"');
  });

  it("measures the bill per million logins from the counters, drawn and tabulated", { timeout: 90_000 }, async () => {
    const { browser, csrf } = await operator();
    const client = await registerClient({});
    const measuring = browser.postForm("/console/capacity/bill", { csrf, window_seconds: "3" });
    await new Promise((r) => setTimeout(r, 500));
    await fullLogin(client);
    const res = await measuring;
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toMatch(/Sign-ins in the 3 s measured: [1-9][0-9]*\. The bill: \$[0-9.,]+ per million logins/);
    expect(html).toContain('id="cost-chart-caption"');
    expect(html).toContain('id="calls-chart-caption"');
    expect(html).toContain("Workers requests");
    // Counters are compared shard by shard: no line is negative (a shard evicted in between resets its own).
    expect(html).not.toMatch(/-\$|\$-/);
    // The API's own answer: one login or more, priced line by line.
    const bill = await admin("/stats/bill", { method: "POST", json: { window_seconds: 1 } });
    expect(bill.status).toBe(200);
    expect(await bill.json()).toMatchObject({ window_seconds: 1, not_priced: expect.any(Array) });
  });
});
