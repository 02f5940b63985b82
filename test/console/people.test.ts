import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { type AuditRow, writeAuditGroups } from "../../durable-objects/contract/audit-trail";
import { codeSignInToOffer, enrol } from "../passkeys/support";
import { admin, type Browser, registerClient, uniqueEmail } from "../support/harness";
import { createTenant, tenantAdmin } from "../tenants/support";
import { csrfOf, grant, signIn } from "./support";

/**
 * The console's people, organizations and audit trail (issue 43, docs/console.md): a tenant
 * operator reaches only its tenant's, by URL or by form, and each action's effect is checked through
 * the admin API with the platform token.
 */

interface User {
  id: string;
  email: string;
  revoked_at: number | null;
}

async function operator(tenant?: string): Promise<{ browser: Browser; csrf: string }> {
  const email = uniqueEmail("people-op");
  expect((await grant(tenant ? { email, tenant } : { email })).status).toBe(201);
  const { browser, page } = await signIn(email);
  return { browser, csrf: csrfOf(await page.text()) };
}

async function userIn(tenant: string, email = uniqueEmail("person"), name = "Ada Person"): Promise<User> {
  const res = await tenantAdmin(tenant, "/users", { method: "POST", json: { email, name } });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as User;
}

async function orgIn(tenant: string, name: string): Promise<{ id: string; name: string }> {
  const res = await tenantAdmin(tenant, "/organizations", { method: "POST", json: { name } });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { id: string; name: string };
}

const members = async (tenant: string, org: string) =>
  (
    (await (await tenantAdmin(tenant, `/organizations/${org}/members`)).json()) as {
      members: { user_id: string; roles: string[] }[];
    }
  ).members;

const template = async (tenant: string) =>
  (
    (await (await tenantAdmin(tenant, "/entity-types/organization")).json()) as {
      roles: Record<string, { permissions: string[] }>;
    }
  ).roles;

/** Events straight into the trail's D1 tables (what a flush writes): the test's set-up, not the page's. */
async function writeEvents(rows: Omit<AuditRow, "id">[]): Promise<void> {
  const withIds = rows.map((r, i) => ({
    id: `ev${Date.now().toString(36)}${i}${Math.random().toString(36).slice(2, 8)}`,
    ...r,
  }));
  // One trail row per event, as a flush writes events that share no login.
  await writeAuditGroups(
    env.DB,
    withIds.map((r) => [r]),
  );
}

const multipart = (browser: Browser, path: string, csrf: string, file: File | null) => {
  const form = new FormData();
  form.set("csrf", csrf);
  if (file) form.set("file", file);
  return browser.fetch(path, { method: "POST", body: form });
};

describe("console people, organizations and audit: who may reach what", () => {
  it("keeps a tenant operator out of another tenant's pages and actions, by URL or by form", {
    timeout: 90_000,
  }, async () => {
    const mine = await createTenant({ name: "People Mine" });
    const other = await createTenant({ name: "People Other" });
    const theirs = await userIn(other.id, uniqueEmail("theirs"), "Their Person");
    const org = await orgIn(other.id, "Their Org");
    expect(
      (
        await tenantAdmin(other.id, `/organizations/${org.id}/members`, {
          method: "POST",
          json: { user_id: theirs.id, roles: ["owner"] },
        })
      ).status,
    ).toBe(201);
    const { browser, csrf } = await operator(mine.id);
    const o = `/console/t/${other.id}`;
    for (const path of [
      `${o}/people`,
      `${o}/people?q=${encodeURIComponent(theirs.email)}`,
      `${o}/people/${theirs.id}`,
      `${o}/people/${theirs.id}/revoke`,
      `${o}/people/import`,
      `${o}/orgs`,
      `${o}/orgs/roles`,
      `${o}/orgs/${org.id}`,
      `${o}/audit`,
      `${o}/audit/export?format=csv`,
    ]) {
      const res = await browser.fetch(path);
      expect(res.status, path).toBe(403);
      const html = await res.text();
      expect(html, path).not.toContain(theirs.email);
      expect(html, path).not.toContain("Their Org");
    }
    const posts: [string, Record<string, string>][] = [
      [`${o}/people/${theirs.id}/revoke`, {}],
      [`${o}/people/${theirs.id}/delete`, { confirm: theirs.email }],
      [`${o}/orgs`, { name: "Planted" }],
      [`${o}/orgs/${org.id}/members`, { who: uniqueEmail("x"), roles: "owner" }],
      [`${o}/orgs/${org.id}/members/${theirs.id}`, { roles: "nobody" }],
      [`${o}/orgs/${org.id}/members/${theirs.id}/remove`, {}],
      [`${o}/orgs/${org.id}/delete`, { confirm: "Their Org" }],
      [`${o}/orgs/roles`, { role: "planted", permissions: "all" }],
    ];
    for (const [path, body] of posts) expect((await browser.postForm(path, { csrf, ...body })).status, path).toBe(403);
    const upload = await multipart(
      browser,
      `${o}/people/import`,
      csrf,
      new File([`{"email":"${uniqueEmail("planted")}"}\n`], "x.ndjson"),
    );
    expect(upload.status).toBe(403);

    // Their ids through the operator's own tenant: the API scopes them to that tenant, so nothing is found.
    const m = `/console/t/${mine.id}`;
    expect((await browser.fetch(`${m}/people/${theirs.id}`)).status).toBe(404);
    expect((await browser.postForm(`${m}/people/${theirs.id}/delete`, { csrf, confirm: theirs.email })).status).toBe(
      404,
    );
    expect((await browser.postForm(`${m}/people/${theirs.id}/revoke`, { csrf })).status).toBe(404);
    expect((await browser.fetch(`${m}/orgs/${org.id}`)).status).toBe(404);
    expect((await browser.postForm(`${m}/orgs/${org.id}/members/${theirs.id}/remove`, { csrf })).status).toBe(404);
    expect((await browser.postForm(`${m}/orgs/${org.id}/delete`, { csrf, confirm: "Their Org" })).status).toBe(404);

    // Nothing of theirs changed.
    const stored = (await (await tenantAdmin(other.id, `/users/${theirs.id}`)).json()) as User;
    expect(stored.revoked_at).toBeNull();
    expect(await members(other.id, org.id)).toEqual([
      expect.objectContaining({ user_id: theirs.id, roles: ["owner"] }),
    ]);
    expect(await template(other.id)).toEqual({});
    const orgs = (await (await tenantAdmin(other.id, "/organizations")).json()) as { entities: { name: string }[] };
    expect(orgs.entities.map((e) => e.name)).toEqual(["Their Org"]);
    const jobs = (await (await tenantAdmin(other.id, "/imports")).json()) as { imports: unknown[] };
    expect(jobs.imports).toEqual([]);
  });
});

describe("console people", () => {
  it("finds a person by address or id and shows their organizations and recent events", {
    timeout: 60_000,
  }, async () => {
    const tenant = await createTenant();
    const user = await userIn(tenant.id, uniqueEmail("found"), "Grace Found");
    const org = await orgIn(tenant.id, "Found Org");
    await tenantAdmin(tenant.id, `/organizations/${org.id}/members`, {
      method: "POST",
      json: { user_id: user.id, roles: ["auditor"] },
    });
    const at = Date.now() - 60_000;
    await writeEvents([
      {
        at,
        kind: "sign_in",
        user_id: user.id,
        email_key: null,
        client_id: "app-found",
        ip: "192.0.2.7",
        detail: null,
        tenant: tenant.id,
      },
    ]);
    const { browser } = await operator(tenant.id);
    const base = `/console/t/${tenant.id}/people`;

    const byAddress = await browser.fetch(`${base}?q=${encodeURIComponent(user.email.toUpperCase())}`);
    expect(byAddress.status).toBe(200);
    expect(await byAddress.text()).toContain(`href="${base}/${user.id}"`);
    const byId = await (await browser.fetch(`${base}?q=${user.id}`)).text();
    expect(byId).toContain(user.email);
    const nobody = await (await browser.fetch(`${base}?q=${encodeURIComponent(uniqueEmail("nobody"))}`)).text();
    expect(nobody).toContain("No one in this tenant has this address or id.");
    expect(nobody).not.toContain(user.email);
    expect(await (await browser.fetch(base)).text()).toContain(user.email);

    const page = await browser.fetch(`${base}/${user.id}`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html.match(/<h1>/g)).toHaveLength(1);
    for (const text of [user.email, "Grace Found", "Found Org", "auditor", "app-found", "192.0.2.7", "sign_in"])
      expect(html, text).toContain(text);
    // Sessions: the API cannot list them, and the page says so rather than reading a store.
    expect(html).toContain("cannot list a person’s sessions");
    expect(html).toContain(`/console/t/${tenant.id}/audit?person=${user.id}`);
    expect((await browser.fetch(`${base}/usr_nobody`)).status).toBe(404);

    // In French and Arabic too.
    const ar = await browser.fetch(`${base}/${user.id}?lang=ar`);
    const arHtml = await ar.text();
    expect(arHtml).toContain('dir="rtl"');
    expect(arHtml).toContain("إنهاء كل الجلسات");
  });

  it("ends every session only after its confirmation step, and deletes only with the address typed", {
    timeout: 60_000,
  }, async () => {
    const tenant = await createTenant();
    const user = await userIn(tenant.id);
    const { browser, csrf } = await operator(tenant.id);
    const base = `/console/t/${tenant.id}/people/${user.id}`;
    const stored = async () => tenantAdmin(tenant.id, `/users/${user.id}`);

    const confirm = await browser.fetch(`${base}/revoke`);
    expect(confirm.status).toBe(200);
    const confirmHtml = await confirm.text();
    expect(confirmHtml).toContain(`action="${base}/revoke"`);
    expect(((await (await stored()).json()) as User).revoked_at).toBeNull();
    expect((await browser.postForm(`${base}/revoke`, {})).status).toBe(403);
    const revoked = await browser.postForm(`${base}/revoke`, { csrf });
    expect(revoked.status).toBe(303);
    expect(revoked.headers.get("location")).toBe(`${base}?notice=revoked`);
    expect(((await (await stored()).json()) as User).revoked_at).toEqual(expect.any(Number));
    expect(await (await browser.fetch(`${base}?notice=revoked`)).text()).toContain(
      "Every session and token of this person has ended.",
    );

    const wrong = await browser.postForm(`${base}/delete`, { csrf, confirm: "someone@else.example" });
    expect(wrong.status).toBe(400);
    expect(await wrong.text()).toContain("nothing was deleted");
    expect((await stored()).status).toBe(200);
    const deleted = await browser.postForm(`${base}/delete`, { csrf, confirm: ` ${user.email.toUpperCase()} ` });
    expect(deleted.status).toBe(303);
    expect(deleted.headers.get("location")).toBe(`/console/t/${tenant.id}/people?notice=deleted`);
    expect((await stored()).status).toBe(404);
  });

  it("lists a person's passkeys and removes one after a confirmation step", { timeout: 90_000 }, async () => {
    const client = await registerClient({});
    const email = uniqueEmail("passkey-person");
    const { res } = await enrol(await codeSignInToOffer(client, email));
    expect(res.status, await res.clone().text()).toBe(303);
    const user = ((await (await admin(`/users?email=${encodeURIComponent(email)}`)).json()) as { users: User[] })
      .users[0] as User;
    const [passkey] = ((await (await admin(`/users/${user.id}/passkeys`)).json()) as { passkeys: { id: string }[] })
      .passkeys;
    expect(passkey).toBeDefined();
    const { browser, csrf } = await operator();
    const base = `/console/t/default/people/${user.id}`;
    const html = await (await browser.fetch(base)).text();
    const removeHref = `${base}/passkeys/${passkey?.id}/remove`;
    expect(html).toContain(`href="${removeHref}"`);
    const confirm = await browser.fetch(removeHref);
    expect(confirm.status).toBe(200);
    expect(await confirm.text()).toContain(`action="${removeHref}"`);
    expect((await browser.fetch(`${base}/passkeys/nope/remove`)).status).toBe(404);
    const removed = await browser.postForm(removeHref, { csrf });
    expect(removed.status).toBe(303);
    expect(removed.headers.get("location")).toBe(`${base}?notice=passkeyRemoved`);
    const after = (await (await admin(`/users/${user.id}/passkeys`)).json()) as { passkeys: unknown[] };
    expect(after.passkeys).toEqual([]);
  });

  it("imports an NDJSON upload and shows the job with its errors by line", { timeout: 60_000 }, async () => {
    const tenant = await createTenant();
    const { browser, csrf } = await operator(tenant.id);
    const base = `/console/t/${tenant.id}/people/import`;
    const good = [uniqueEmail("imp-a"), uniqueEmail("imp-b"), uniqueEmail("imp-c")];
    const text = [
      JSON.stringify({ email: good[0], name: "Imported A" }),
      "{not json",
      JSON.stringify({ email: good[1] }),
      JSON.stringify({ email: "not an address" }),
      JSON.stringify({ email: good[2], role: "x" }),
      "",
    ].join("\n");
    const form = await browser.fetch(base);
    expect(form.status).toBe(200);
    expect(await form.text()).toContain('enctype="multipart/form-data"');

    const res = await multipart(
      browser,
      base,
      csrf,
      new File([text], "people.ndjson", { type: "application/x-ndjson" }),
    );
    expect(res.status, await res.clone().text()).toBe(303);
    const location = res.headers.get("location") as string;
    expect(location).toMatch(new RegExp(`^${base}/imp_[A-Za-z0-9_-]+\\?notice=imported$`));
    const jobId = (/\/(imp_[^?]+)/.exec(location) as RegExpExecArray)[1] as string;
    const job = (await (await tenantAdmin(tenant.id, `/imports/${jobId}`)).json()) as {
      status: string;
      created: number;
      failed: number;
    };
    expect(job).toMatchObject({ status: "done", created: 2, failed: 3 });
    for (const email of good.slice(0, 2)) {
      const found = (await (
        await tenantAdmin(tenant.id, `/users?email=${encodeURIComponent(email as string)}`)
      ).json()) as {
        users: User[];
      };
      expect(found.users, email).toHaveLength(1);
    }
    const page = await browser.fetch(location);
    expect(page.status).toBe(200);
    expect(page.headers.get("refresh")).toBeNull();
    const html = await page.text();
    expect(html).toContain("The import has finished.");
    for (const [line, error] of [
      ["2", "not a JSON record"],
      ["4", "email: not a valid address"],
      ["5", "Unrecognized key"],
    ])
      expect(html).toMatch(new RegExp(`<td>${line}</td><td><code dir="ltr">[^<]*${error}`));
    expect(await (await browser.fetch(base)).text()).toContain(jobId);

    // Refused before anything is sent to the API: no file, and bytes that are not UTF-8.
    expect((await multipart(browser, base, csrf, null)).status).toBe(400);
    const latin1 = new File([new Uint8Array([0x7b, 0x22, 0x65, 0xe9, 0x22, 0x7d, 0x0a])], "x.ndjson");
    const bad = await multipart(browser, base, csrf, latin1);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("not UTF-8");
    const all = (await (await tenantAdmin(tenant.id, "/imports")).json()) as { imports: unknown[] };
    expect(all.imports).toHaveLength(1);
  });

  it("refreshes a running job's page without script, and stops once it has ended", { timeout: 60_000 }, async () => {
    const tenant = await createTenant();
    const now = Date.now();
    const id = `imp_running${now.toString(36)}`;
    // A job another client is running (its row as runImport writes it): set-up, not the page.
    await env.DB.prepare(
      "INSERT INTO import_jobs (id, tenant, kind, status, lines, started_at, updated_at) VALUES (?, ?, 'users', 'running', 1200, ?, ?)",
    )
      .bind(id, tenant.id, now, now)
      .run();
    const { browser } = await operator(tenant.id);
    const path = `/console/t/${tenant.id}/people/import/${id}`;
    const running = await browser.fetch(path);
    expect(running.status).toBe(200);
    expect(running.headers.get("refresh")).toBe("3");
    expect(await running.text()).toContain("1,200 lines read so far");
    await env.DB.prepare("UPDATE import_jobs SET status = 'done', finished_at = ? WHERE id = ?").bind(now, id).run();
    const done = await browser.fetch(path);
    expect(done.headers.get("refresh")).toBeNull();
    expect((await browser.fetch(`/console/t/${tenant.id}/people/import/imp_nope`)).status).toBe(404);
  });
});

describe("console organizations", () => {
  it("creates an organization, adds a member by address, changes and removes roles and members", {
    timeout: 90_000,
  }, async () => {
    const tenant = await createTenant();
    const user = await userIn(tenant.id, uniqueEmail("member"));
    const { browser, csrf } = await operator(tenant.id);
    const base = `/console/t/${tenant.id}/orgs`;

    const created = await browser.postForm(base, { csrf, name: "Acme Widgets", external_id: "crm-42" });
    expect(created.status, await created.clone().text()).toBe(303);
    const orgPath = (created.headers.get("location") as string).split("?")[0] as string;
    const orgId = orgPath.split("/").at(-1) as string;
    const stored = (await (await tenantAdmin(tenant.id, `/organizations/${orgId}`)).json()) as Record<string, unknown>;
    expect(stored).toMatchObject({ name: "Acme Widgets", external_id: "crm-42" });
    expect(await (await browser.fetch(base)).text()).toContain("Acme Widgets");
    expect((await browser.postForm(base, { csrf, name: "" })).status).toBe(400);

    // The template is empty: any role, typed.
    const added = await browser.postForm(`${orgPath}/members`, {
      csrf,
      who: user.email.toUpperCase(),
      roles: "admin, billing admin",
    });
    expect(added.status, await added.clone().text()).toBe(303);
    expect(await members(tenant.id, orgId)).toEqual([
      expect.objectContaining({ user_id: user.id, roles: ["admin", "billing"] }),
    ]);
    const page = await (await browser.fetch(orgPath)).text();
    expect(page).toContain(user.email);
    expect(page).toContain('value="admin, billing"');
    const nobody = await browser.postForm(`${orgPath}/members`, { csrf, who: uniqueEmail("nobody"), roles: "" });
    expect(nobody.status).toBe(404);
    expect(await nobody.text()).toContain("No one in this tenant has this address or id.");

    expect((await browser.postForm(`${orgPath}/members/${user.id}`, { csrf, roles: "viewer" })).status).toBe(303);
    expect((await members(tenant.id, orgId))[0]?.roles).toEqual(["viewer"]);

    // Role template: the organization entity type's.
    const role = await browser.postForm(`${base}/roles`, {
      csrf,
      role: "editor",
      permissions: "docs:read, docs:write",
    });
    expect(role.status, await role.clone().text()).toBe(303);
    expect(await template(tenant.id)).toEqual({ editor: { permissions: ["docs:read", "docs:write"] } });
    expect((await browser.postForm(`${base}/roles`, { csrf, role: "bad role!", permissions: "" })).status).toBe(400);
    const withTemplate = await (await browser.fetch(orgPath)).text();
    expect(withTemplate).toMatch(/type="checkbox" name="roles" value="editor"/);
    // A role the template does not list is refused by the API, and said so.
    const refused = await browser.postForm(`${orgPath}/members/${user.id}`, { csrf, roles: "owner" });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain("not in the organization template");
    const edited = await browser.fetch(`${orgPath}/members/${user.id}`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: `csrf=${encodeURIComponent(csrf)}&roles=editor`,
    });
    expect(edited.status).toBe(303);
    expect((await members(tenant.id, orgId))[0]?.roles).toEqual(["editor"]);

    const confirmRole = await browser.fetch(`${base}/roles/editor/remove`);
    expect(confirmRole.status).toBe(200);
    expect(await template(tenant.id)).toHaveProperty("editor");
    expect((await browser.postForm(`${base}/roles/editor/remove`, { csrf })).status).toBe(303);
    expect(await template(tenant.id)).toEqual({});

    const confirmMember = await browser.fetch(`${orgPath}/members/${user.id}/remove`);
    expect(confirmMember.status).toBe(200);
    expect(await confirmMember.text()).toContain(user.email);
    expect(await members(tenant.id, orgId)).toHaveLength(1);
    expect((await browser.postForm(`${orgPath}/members/${user.id}/remove`, { csrf })).status).toBe(303);
    expect(await members(tenant.id, orgId)).toEqual([]);

    expect((await browser.postForm(`${orgPath}/delete`, { csrf, confirm: "Acme" })).status).toBe(400);
    expect((await tenantAdmin(tenant.id, `/organizations/${orgId}`)).status).toBe(200);
    const gone = await browser.postForm(`${orgPath}/delete`, { csrf, confirm: "Acme Widgets" });
    expect(gone.status).toBe(303);
    expect((await tenantAdmin(tenant.id, `/organizations/${orgId}`)).status).toBe(404);
  });
});

describe("console audit trail", () => {
  it("filters by person, kind and time, pages, and exports every filtered event as NDJSON and CSV", {
    timeout: 90_000,
  }, async () => {
    const tenant = await createTenant();
    const user = await userIn(tenant.id, uniqueEmail("audited"));
    const now = Date.now();
    const base = { email_key: null, client_id: "audit-app", ip: "192.0.2.9", tenant: tenant.id };
    // 1,005 of the person's sign-ins (more than one API page of 1,000), and other events around them.
    await writeEvents([
      ...Array.from({ length: 1005 }, (_, i) => ({
        ...base,
        at: now - 3_600_000 + i,
        kind: "sign_in" as const,
        user_id: user.id,
        detail: JSON.stringify({ n: i }),
      })),
      {
        ...base,
        at: now - 7_200_000,
        kind: "logout",
        user_id: user.id,
        client_id: "=HYPERLINK(1)",
        detail: JSON.stringify({ note: "=SUM(A1)" }),
      },
      { ...base, at: now - 1_000, kind: "code_sent", user_id: "usr_someone_else", detail: null },
    ]);
    const { browser } = await operator(tenant.id);
    const path = `/console/t/${tenant.id}/audit`;

    const all = await (await browser.fetch(path)).text();
    expect(all).toContain("usr_someone_else");
    const mine = await (await browser.fetch(`${path}?person=${user.id}&kind=logout`)).text();
    expect(mine).toContain("=SUM(A1)");
    expect(mine).not.toContain("usr_someone_else");
    expect(mine).not.toContain("&quot;n&quot;:");
    // By address, a page of 50, with a link to the next.
    const byAddress = await (
      await browser.fetch(`${path}?person=${encodeURIComponent(user.email)}&kind=sign_in`)
    ).text();
    expect(byAddress.match(/<tr><td><time/g)).toHaveLength(50);
    expect(byAddress).toContain(user.email);
    const older = /href="([^"]*cursor=[^"]+)" rel="next"/.exec(byAddress)?.[1]?.replace(/&amp;/g, "&") as string;
    expect(older).toContain("kind=sign_in");
    const second = await (await browser.fetch(older)).text();
    expect(second.match(/<tr><td><time/g)).toHaveLength(50);
    // A time range (UTC, as the form's datetime-local sends it).
    const since = new Date(now - 2 * 3_600_000 - 60_000).toISOString().slice(0, 16);
    const until = new Date(now - 3_600_000 - 60_000).toISOString().slice(0, 16);
    const ranged = await (await browser.fetch(`${path}?person=${user.id}&since=${since}&until=${until}`)).text();
    expect(ranged).toContain("=SUM(A1)");
    expect(ranged).not.toContain("&quot;n&quot;:");
    const bad = await browser.fetch(`${path}?since=yesterday`);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("not a date and time");

    const ndjson = await browser.fetch(`${path}/export?format=ndjson&person=${user.id}&kind=sign_in`);
    expect(ndjson.status).toBe(200);
    expect(ndjson.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
    expect(ndjson.headers.get("content-disposition")).toMatch(
      new RegExp(`^attachment; filename="audit-${tenant.id}-\\d{8}-\\d{4}\\.ndjson"$`),
    );
    const lines = (await ndjson.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { kind: string; user_id: string; detail: { n: number } });
    expect(lines).toHaveLength(1005);
    expect(lines.every((e) => e.kind === "sign_in" && e.user_id === user.id)).toBe(true);
    expect(new Set(lines.map((e) => e.detail.n)).size).toBe(1005);

    const csv = await browser.fetch(`${path}/export?format=csv&person=${user.id}`);
    expect(csv.headers.get("content-type")).toMatch(/^text\/csv/);
    expect(csv.headers.get("content-disposition")).toMatch(/\.csv"$/);
    const rows = (await csv.text()).split("\r\n").filter(Boolean);
    expect(rows[0]).toBe("id,at,kind,user_id,email_key,client_id,ip,detail");
    expect(rows).toHaveLength(1 + 1006);
    // A field a spreadsheet would run as a formula is not one.
    const logout = rows.find((r) => r.includes(",logout,")) as string;
    expect(logout).toContain(`,'=HYPERLINK(1),`);
    expect(logout).toContain(`"{""note"":""=SUM(A1)""}"`);
    expect(logout.split(",").some((f) => f.startsWith("="))).toBe(false);
    expect((await browser.fetch(`${path}/export?format=csv&kind=nope`)).status).toBe(400);
  });
});
