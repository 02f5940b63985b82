import { createExecutionContext, createScheduledController, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { MAX_JOB_BYTES, MAX_JOB_LINES } from "../../workers/op-mgmt/src/entities/imports";
import mgmt from "../../workers/op-mgmt/src/index";
import { loadConfig } from "../../workers/shared/config/config";
import { policy, sql, uniqueEmail, withVars } from "../support/harness";
import { createTenant } from "../tenants/support";
import { entityStub, everyShard, homeOf, ndjson, type StoredEntity, scoped, typeName, unique } from "./support";

/**
 * Issue 24: NDJSON imports of users, entities and grants. Each answer (the finished job) is checked
 * against what D1 and the EntityStore shards then hold; a rerun of the same file changes nothing.
 */

interface Job {
  id: string;
  kind: string;
  status: string;
  lines: number;
  created: number;
  updated: number;
  unchanged: number;
  failed: number;
  errors: { line: number; error: string }[];
  started_at: number;
  updated_at: number;
  finished_at: number | null;
}

/** Every stored entity of a type (all shards), with the shard each was found on, in id order. */
async function dumpType(type: string, tenant = "default"): Promise<(StoredEntity & { shard: string })[]> {
  const pages = await Promise.all(
    everyShard().map(async (address) =>
      (
        await sql<StoredEntity>(
          entityStub(address),
          "SELECT * FROM entities WHERE tenant = ? AND type = ? ORDER BY id",
          tenant,
          type,
        )
      ).map((r) => ({ ...r, shard: address })),
    ),
  );
  return pages.flat().sort((a, b) => (a.id < b.id ? -1 : 1));
}

async function createType(name: string, roles: Record<string, { permissions: string[] }> = {}, tenant?: string) {
  const res = await scoped(tenant)("/entity-types", { method: "POST", json: { name, roles } });
  expect(res.status, await res.clone().text()).toBe(201);
}

async function runJob(
  kind: "users" | "entities" | "grants",
  records: (Record<string, unknown> | string)[],
  tenant?: string,
): Promise<Job> {
  const res = await ndjson(kind, records, tenant);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as Job;
}

const counts = (job: Job) => ({
  status: job.status,
  lines: job.lines,
  created: job.created,
  updated: job.updated,
  unchanged: job.unchanged,
  failed: job.failed,
});

async function usersByEmail(emails: string[], tenant = "default") {
  const { results } = await env.DB.prepare(
    "SELECT id, email, name, created_at, updated_at, entity_shard FROM users WHERE tenant = ? AND email IN (SELECT value FROM json_each(?)) ORDER BY email",
  )
    .bind(tenant, JSON.stringify(emails))
    .all<{
      id: string;
      email: string;
      name: string | null;
      created_at: number;
      updated_at: number;
      entity_shard: string | null;
    }>();
  return results;
}

describe("entities import", () => {
  it("loads every line: the job's counts and the stored rows, each on the shard its id names", async () => {
    const type = typeName();
    await createType(type);
    const prefix = unique("e");
    const records = Array.from({ length: 12 }, (_, i) => ({
      type,
      name: `Entity ${i}`,
      external_id: `${prefix}-${i}`,
      attributes: { i, even: i % 2 === 0, label: `l${i}` },
    }));
    const job = await runJob("entities", records);
    expect(job).toMatchObject({
      id: expect.stringMatching(/^imp_/),
      kind: "entities",
      status: "done",
      lines: 12,
      created: 12,
      updated: 0,
      unchanged: 0,
      failed: 0,
      errors: [],
    });
    expect(job.finished_at).toEqual(expect.any(Number));

    const stored = await dumpType(type);
    expect(stored).toHaveLength(12);
    expect(stored.map((r) => r.external_id).sort()).toEqual(records.map((r) => r.external_id).sort());
    for (const row of stored) {
      const i = Number((row.external_id as string).slice(prefix.length + 1));
      expect(row).toMatchObject({ tenant: "default", name: `Entity ${i}` });
      expect(JSON.parse(row.attributes)).toEqual({ i, even: i % 2 === 0, label: `l${i}` });
      expect(row.shard).toBe(homeOf(row.id));
    }
    // Through the API too.
    const one = stored[0] as StoredEntity;
    const read = await scoped()(`/entities/${one.id}`);
    expect(await read.json()).toMatchObject({ id: one.id, external_id: one.external_id, type });
  });

  it("a rerun of the same file changes nothing: every line unchanged, the stored rows identical", async () => {
    const type = typeName();
    await createType(type);
    const prefix = unique("rerun");
    const records = Array.from({ length: 20 }, (_, i) => ({
      type,
      name: `R ${i}`,
      external_id: `${prefix}-${i}`,
      attributes: { i },
    }));
    expect(counts(await runJob("entities", records))).toEqual({
      status: "done",
      lines: 20,
      created: 20,
      updated: 0,
      unchanged: 0,
      failed: 0,
    });
    const before = await dumpType(type);
    expect(before).toHaveLength(20);

    const rerun = await runJob("entities", records);
    expect(counts(rerun)).toEqual({ status: "done", lines: 20, created: 0, updated: 0, unchanged: 20, failed: 0 });
    expect(await dumpType(type)).toEqual(before);

    // One line changed: that one updated, in place (same id, same created_at).
    const changed = records.map((r, i) => (i === 7 ? { ...r, name: "R seven", attributes: { i, new: true } } : r));
    expect(counts(await runJob("entities", changed))).toEqual({
      status: "done",
      lines: 20,
      created: 0,
      updated: 1,
      unchanged: 19,
      failed: 0,
    });
    const after = await dumpType(type);
    expect(after.map((r) => r.id)).toEqual(before.map((r) => r.id));
    const seven = after.find((r) => r.external_id === `${prefix}-7`);
    const sevenBefore = before.find((r) => r.external_id === `${prefix}-7`);
    expect(seven).toMatchObject({ name: "R seven", created_at: sevenBefore?.created_at, id: sevenBefore?.id });
    expect(JSON.parse(seven?.attributes as string)).toEqual({ i: 7, new: true });
    expect(after.filter((r) => r.external_id !== `${prefix}-7`)).toEqual(
      before.filter((r) => r.external_id !== `${prefix}-7`),
    );
  });

  it("reports a malformed line with its line number; the other lines load", async () => {
    const type = typeName();
    await createType(type);
    const other = typeName();
    await createType(other);
    const prefix = unique("bad");
    const taken = `${prefix}-taken`;
    expect((await runJob("entities", [{ type: other, name: "Other", external_id: taken }])).created).toBe(1);
    const job = await runJob("entities", [
      { type, name: "Good 1", external_id: `${prefix}-1` }, // 1
      "{not json", // 2
      { type, name: "No external id" }, // 3
      { type: typeName(), name: "Unknown type", external_id: `${prefix}-3` }, // 4
      { type, name: "Bad attribute", external_id: `${prefix}-4`, attributes: { "bad name": 1 } }, // 5
      "", // 6: blank, skipped but numbered
      { type, name: "Good 2", external_id: `${prefix}-2`, attributes: { ok: true } }, // 7
      { type, name: "Too big", external_id: `${prefix}-5`, attributes: { a: "x".repeat(1_025) } }, // 8
      { type, name: "Another type's id", external_id: taken }, // 9
      { type, name: "Extra", external_id: `${prefix}-6`, extra: 1 }, // 10
      "[1, 2]", // 11
    ]);
    expect(counts(job)).toEqual({ status: "done", lines: 10, created: 2, updated: 0, unchanged: 0, failed: 8 });
    expect(job.errors.map((e) => e.line).sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 8, 9, 10, 11]);
    const error = (line: number) => job.errors.find((e) => e.line === line)?.error ?? "";
    expect(error(2)).toContain("JSON");
    expect(error(3)).toContain("external_id");
    expect(error(4)).toContain("type");
    expect(error(5)).toContain("attributes");
    expect(error(8)).toContain("attributes");
    expect(error(9)).toContain("another type");
    expect(error(10)).toContain("extra");

    const stored = await dumpType(type);
    expect(stored.map((r) => r.name).sort()).toEqual(["Good 1", "Good 2"]);
    expect(JSON.parse(stored.find((r) => r.name === "Good 2")?.attributes as string)).toEqual({ ok: true });
    // The other type's entity kept its type and name.
    expect((await dumpType(other)).map((r) => [r.external_id, r.name])).toEqual([[taken, "Other"]]);

    // The job as stored, and as listed.
    const read = await scoped()(`/imports/${job.id}`);
    expect(read.status).toBe(200);
    expect(await read.json()).toEqual(job);
  });

  it("a line longer than 16 KB is reported by its number and skipped; the lines after it load (whole or in chunks)", async () => {
    const type = typeName();
    await createType(type);
    const prefix = unique("long");
    const body = (tag: string) =>
      [
        { type, name: `Før ${tag}`, external_id: `${prefix}-${tag}-1` },
        { type, name: "Long", external_id: `${prefix}-${tag}-long`, attributes: { a: "é".repeat(20_000) } },
        { type, name: `Ünïcødé ${tag} ✓`, external_id: `${prefix}-${tag}-3` },
        { type, name: `After ${tag}`, external_id: `${prefix}-${tag}-4` },
      ]
        .map((r) => JSON.stringify(r))
        .join("\n");
    const post = (payload: BodyInit) =>
      scoped()("/imports/entities", {
        method: "POST",
        headers: { "Content-Type": "application/x-ndjson" },
        body: payload,
      });
    // Whole: one string.
    const whole = await post(body("w"));
    expect(whole.status, await whole.clone().text()).toBe(200);
    const wj = (await whole.json()) as Job;
    expect(counts(wj)).toEqual({ status: "done", lines: 4, created: 3, updated: 0, unchanged: 0, failed: 1 });
    expect(wj.errors).toEqual([{ line: 2, error: expect.stringContaining("16384") }]);
    // In chunks of 1,000 bytes: lines and multi-byte characters split across them.
    const bytes = new TextEncoder().encode(body("c"));
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let at = 0; at < bytes.length; at += 1_000) controller.enqueue(bytes.slice(at, at + 1_000));
        controller.close();
      },
    });
    const chunked = await post(stream);
    expect(chunked.status, await chunked.clone().text()).toBe(200);
    const cj = (await chunked.json()) as Job;
    expect(counts(cj)).toEqual({ status: "done", lines: 4, created: 3, updated: 0, unchanged: 0, failed: 1 });
    expect(cj.errors).toEqual([{ line: 2, error: expect.stringContaining("16384") }]);
    expect((await dumpType(type)).map((r) => r.name).sort()).toEqual(
      ["After c", "After w", "Før c", "Før w", "Ünïcødé c ✓", "Ünïcødé w ✓"].sort(),
    );
  });

  it("two imports of overlapping files in parallel end with each entity exactly once", async () => {
    const type = typeName();
    await createType(type);
    const prefix = unique("par");
    const record = (i: number) => ({ type, name: `P ${i}`, external_id: `${prefix}-${i}`, attributes: { i } });
    const a = Array.from({ length: 40 }, (_, i) => record(i));
    const b = Array.from({ length: 40 }, (_, i) => record(i + 20));
    const [ja, jb] = await Promise.all([runJob("entities", a), runJob("entities", b)]);
    expect(ja.status).toBe("done");
    expect(jb.status).toBe("done");
    expect(ja.failed + jb.failed).toBe(0);
    expect(ja.created + jb.created).toBe(60);
    expect(ja.unchanged + jb.unchanged).toBe(20);
    expect(ja.updated + jb.updated).toBe(0);

    const stored = await dumpType(type);
    expect(stored).toHaveLength(60);
    expect(new Set(stored.map((r) => r.external_id)).size).toBe(60);
    expect(new Set(stored.map((r) => r.id)).size).toBe(60);
    expect(stored.map((r) => r.external_id).sort()).toEqual(
      Array.from({ length: 60 }, (_, i) => `${prefix}-${i}`).sort(),
    );
    // Again both at once: nothing changes.
    const [ra, rb] = await Promise.all([runJob("entities", a), runJob("entities", b)]);
    expect([ra.unchanged, rb.unchanged, ra.created + rb.created]).toEqual([40, 40, 0]);
    expect(await dumpType(type)).toEqual(stored);
  });

  it("imports into another tenant stay in that tenant", async () => {
    const tenant = await createTenant();
    const prefix = unique("ten");
    const job = await runJob(
      "entities",
      [
        { type: "organization", name: "T1", external_id: `${prefix}-1` },
        { type: "organization", name: "T2", external_id: `${prefix}-2` },
      ],
      tenant.id,
    );
    expect(counts(job)).toMatchObject({ created: 2, failed: 0 });
    const stored = await dumpType("organization", tenant.id);
    expect(stored.map((r) => r.name)).toEqual(expect.arrayContaining(["T1", "T2"]));
    expect(stored).toHaveLength(2);
    for (const r of stored) expect(r.id.startsWith(`ent_${tenant.id}~`)).toBe(true);
    // The same external ids at the default tenant are other entities.
    const here = await runJob("entities", [{ type: "organization", name: "D1", external_id: `${prefix}-1` }]);
    expect(here.created).toBe(1);
    // The job is the tenant's: not found at the default tenant's routes.
    expect((await scoped()(`/imports/${job.id}`)).status).toBe(404);
    expect((await scoped(tenant.id)(`/imports/${job.id}`)).status).toBe(200);
  });
});

describe("users import", () => {
  it("creates users, a rerun leaves them unchanged, a changed name is updated", async () => {
    const emails = [uniqueEmail("imp"), uniqueEmail("imp"), uniqueEmail("imp")];
    const records = [
      { email: emails[0], name: "Ada" },
      { email: (emails[1] as string).toUpperCase() },
      { email: emails[2], name: "Grace" },
    ];
    const job = await runJob("users", records);
    expect(job).toMatchObject({ kind: "users", status: "done", errors: [] });
    expect(counts(job)).toEqual({ status: "done", lines: 3, created: 3, updated: 0, unchanged: 0, failed: 0 });
    const first = await usersByEmail(emails);
    expect(first.map((u) => [u.email, u.name])).toEqual(
      [
        [emails[0], "Ada"],
        [emails[1], null],
        [emails[2], "Grace"],
      ].sort((x, y) => ((x[0] as string) < (y[0] as string) ? -1 : 1)),
    );

    const rerun = await runJob("users", records);
    expect(counts(rerun)).toEqual({ status: "done", lines: 3, created: 0, updated: 0, unchanged: 3, failed: 0 });
    expect(await usersByEmail(emails)).toEqual(first);

    const renamed = await runJob("users", [
      records[0] as Record<string, unknown>,
      records[1] as Record<string, unknown>,
      { email: emails[2], name: "Grace H." },
    ]);
    expect(counts(renamed)).toEqual({ status: "done", lines: 3, created: 0, updated: 1, unchanged: 2, failed: 0 });
    const after = await usersByEmail(emails);
    expect(after.map((u) => u.id)).toEqual(first.map((u) => u.id));
    expect(after.find((u) => u.email === emails[2])?.name).toBe("Grace H.");
    const read = await scoped()(`/users/${after.find((u) => u.email === emails[2])?.id}`);
    expect(await read.json()).toMatchObject({ email: emails[2], name: "Grace H." });

    // A line without a name leaves the name a user has: an import adds, it does not blank.
    const nameless = await runJob("users", [{ email: emails[0] }]);
    expect(counts(nameless)).toEqual({ status: "done", lines: 1, created: 0, updated: 0, unchanged: 1, failed: 0 });
    expect((await usersByEmail([emails[0] as string]))[0]?.name).toBe("Ada");
  });

  it("reports a bad address or record by line; the others load", async () => {
    const good = uniqueEmail("imp");
    const job = await runJob("users", [
      { email: "not an address" },
      { email: good },
      { email: uniqueEmail(), role: "x" },
      "42",
    ]);
    expect(counts(job)).toEqual({ status: "done", lines: 4, created: 1, updated: 0, unchanged: 0, failed: 3 });
    expect(job.errors.map((e) => e.line).sort()).toEqual([1, 3, 4]);
    expect((await usersByEmail([good])).length).toBe(1);
  });
});

/** Imports these addresses as new users (each must be created). */
async function importNewUsers(emails: string[]): Promise<void> {
  expect(
    (
      await runJob(
        "users",
        emails.map((email) => ({ email })),
      )
    ).created,
  ).toBe(emails.length);
}

describe("grants import", () => {
  it("a role the target's template does not list fails that line; the permissions of the others are resolved", async () => {
    const type = typeName();
    await createType(type, { reader: { permissions: ["r:read"] }, writer: { permissions: ["r:read", "r:write"] } });
    const ext = unique("repo");
    expect((await runJob("entities", [{ type, name: "Repo", external_id: ext }])).created).toBe(1);
    const emails = [uniqueEmail("role"), uniqueEmail("role")];
    await importNewUsers(emails);
    const job = await runJob("grants", [
      { email: emails[0], target_external_id: ext, roles: ["writer"], permissions: ["r:admin"] },
      { email: emails[1], target_external_id: ext, roles: ["owner"] },
    ]);
    expect(counts(job)).toEqual({ status: "done", lines: 2, created: 1, updated: 0, unchanged: 0, failed: 1 });
    expect(job.errors).toEqual([{ line: 2, error: expect.stringContaining("owner") }]);
    const users = await usersByEmail(emails);
    const writer = users.find((u) => u.email === emails[0]);
    const grants = (await (await scoped()(`/users/${writer?.id}/grants`)).json()) as {
      grants: { roles: string[]; permissions: string[] }[];
    };
    expect(grants.grants).toEqual([
      expect.objectContaining({ roles: ["writer"], permissions: ["r:read", "r:write", "r:admin"] }),
    ]);
    const refused = users.find((u) => u.email === emails[1]);
    // The refused line wrote no grant (its user may have been given a shard, but holds nothing there).
    if (refused?.entity_shard)
      expect(await sql(entityStub(refused.entity_shard), "SELECT * FROM grants WHERE subject = ?", refused.id)).toEqual(
        [],
      );
    expect((await (await scoped()(`/users/${refused?.id}/grants`)).json()) as unknown).toEqual({
      grants: [],
      next: null,
    });
  });

  it("grants memberships by email and target_external_id; they are then the users' organizations", async () => {
    const prefix = unique("org");
    const orgs = await runJob("entities", [
      { type: "organization", name: "Import Org A", external_id: `${prefix}-a` },
      { type: "organization", name: "Import Org B", external_id: `${prefix}-b` },
    ]);
    expect(orgs.created).toBe(2);
    const emails = [uniqueEmail("g"), uniqueEmail("g")];
    await importNewUsers(emails);
    const imported = await usersByEmail(emails);
    const u0 = imported.find((u) => u.email === emails[0]);
    const u1 = imported.find((u) => u.email === emails[1]);
    expect(u0?.entity_shard).toBeNull();

    const records = [
      { email: emails[0], target_external_id: `${prefix}-a`, roles: ["admin"] },
      { email: (emails[0] as string).toUpperCase(), target_external_id: `${prefix}-b`, roles: ["member"] },
      { email: emails[1], target_external_id: `${prefix}-a`, roles: ["member", "billing"] },
      { email: uniqueEmail("nobody"), target_external_id: `${prefix}-a` },
      { email: emails[1], target_external_id: `${prefix}-missing` },
      { email: emails[1] },
    ];
    const job = await runJob("grants", records);
    expect(counts(job)).toEqual({ status: "done", lines: 6, created: 3, updated: 0, unchanged: 0, failed: 3 });
    expect(job.errors.map((e) => e.line).sort()).toEqual([4, 5, 6]);
    expect(job.errors.find((e) => e.line === 4)?.error).toContain("subject");
    expect(job.errors.find((e) => e.line === 5)?.error).toContain("target");

    const orgIds = Object.fromEntries(
      (await dumpType("organization"))
        .filter((r) => r.external_id?.startsWith(prefix))
        .map((r) => [r.external_id as string, r.id]),
    );
    const aId = orgIds[`${prefix}-a`] as string;
    const bId = orgIds[`${prefix}-b`] as string;
    const orgsOf = async (id: string) =>
      (
        (await (await scoped()(`/users/${id}/organizations`)).json()) as {
          organizations: { id: string; name: string; roles: string[] }[];
        }
      ).organizations.sort((x, y) => (x.name < y.name ? -1 : 1));
    expect(await orgsOf(u0?.id as string)).toEqual([
      { id: aId, name: "Import Org A", roles: ["admin"], permissions: [] },
      { id: bId, name: "Import Org B", roles: ["member"], permissions: [] },
    ]);
    expect(await orgsOf(u1?.id as string)).toEqual([
      { id: aId, name: "Import Org A", roles: ["member", "billing"], permissions: [] },
    ]);
    // Stored: each user's grants on its shard (assigned at the first grant), the members on A's shard.
    const [s0] = await usersByEmail([emails[0] as string]);
    expect(s0?.entity_shard).toMatch(/^entity:g0:s\d+$/);
    expect(
      await sql(
        entityStub(s0?.entity_shard as string),
        "SELECT target FROM grants WHERE subject = ? ORDER BY target",
        u0?.id,
      ),
    ).toEqual([{ target: aId }, { target: bId }].sort((x, y) => (x.target < y.target ? -1 : 1)));
    expect(
      (await sql<{ subject: string }>(entityStub(homeOf(aId)), "SELECT subject FROM grantees WHERE target = ?", aId))
        .map((r) => r.subject)
        .sort(),
    ).toEqual([u0?.id, u1?.id].sort());

    // A rerun writes nothing.
    const rerun = await runJob("grants", records);
    expect(counts(rerun)).toEqual({ status: "done", lines: 6, created: 0, updated: 0, unchanged: 3, failed: 3 });
  });

  it("a changed grant (other roles) is counted updated, like a changed user or entity", async () => {
    const ext = unique("org");
    expect((await runJob("entities", [{ type: "organization", name: "Changing", external_id: ext }])).created).toBe(1);
    const email = uniqueEmail("chg");
    expect((await runJob("users", [{ email }])).created).toBe(1);
    const first = await runJob("grants", [{ email, target_external_id: ext, roles: ["member"] }]);
    expect(counts(first)).toEqual({ status: "done", lines: 1, created: 1, updated: 0, unchanged: 0, failed: 0 });
    const changed = await runJob("grants", [{ email, target_external_id: ext, roles: ["admin"] }]);
    // The grant itself changed either way (its roles are the new ones) ...
    const [user] = await usersByEmail([email]);
    const orgs = (await (await scoped()(`/users/${user?.id}/organizations`)).json()) as {
      organizations: { roles: string[] }[];
    };
    expect(orgs.organizations.map((o) => o.roles)).toEqual([["admin"]]);
    // ... and the job says so as an update, not a second creation.
    expect(counts(changed)).toEqual({ status: "done", lines: 1, created: 0, updated: 1, unchanged: 0, failed: 0 });
  });
});

describe("import jobs", () => {
  it("GET /imports/{id} returns the job; GET /imports lists it; an unknown job is 404", async () => {
    const type = typeName();
    await createType(type);
    const job = await runJob("entities", [{ type, name: "J", external_id: unique("job") }, "oops"]);
    expect(counts(job)).toEqual({ status: "done", lines: 2, created: 1, updated: 0, unchanged: 0, failed: 1 });
    const read = await scoped()(`/imports/${job.id}`);
    expect(read.status).toBe(200);
    expect(await read.json()).toEqual(job);
    const row = await env.DB.prepare(
      "SELECT tenant, kind, status, created, failed, errors FROM import_jobs WHERE id = ?",
    )
      .bind(job.id)
      .first<Record<string, unknown>>();
    expect(row).toEqual({
      tenant: "default",
      kind: "entities",
      status: "done",
      created: 1,
      failed: 1,
      errors: JSON.stringify([{ line: 2, error: "not a JSON record" }]),
    });
    const list = (await (await scoped()("/imports")).json()) as { imports: Job[] };
    expect(list.imports.find((j) => j.id === job.id)).toEqual(job);
    expect((await scoped()("/imports/imp_doesnotexist")).status).toBe(404);

    // A tenant's list is its own jobs, newest first.
    const tenant = await createTenant();
    const older = await runJob("users", [{ email: uniqueEmail("l") }], tenant.id);
    const newer = await runJob("entities", [{ type: "organization", name: "N", external_id: unique("n") }], tenant.id);
    const theirs = (await (await scoped(tenant.id)("/imports")).json()) as { imports: Job[] };
    expect(theirs.imports.map((j) => j.id).sort()).toEqual([newer.id, older.id].sort());
    expect(theirs.imports.find((j) => j.id === older.id)).toEqual(older);
    expect(theirs.imports[0]?.started_at).toBeGreaterThanOrEqual(theirs.imports[1]?.started_at as number);
  });

  it("a body that is not NDJSON is unsupported_media_type (415); an unknown kind is 404; neither makes a job", async () => {
    const tenant = await createTenant();
    const t = scoped(tenant.id);
    const wrong = await t("/imports/entities", {
      method: "POST",
      json: { type: "organization", name: "x", external_id: "y" },
    });
    expect(wrong.status).toBe(415);
    expect(((await wrong.json()) as { error: string }).error).toBe("unsupported_media_type");
    const none = await t("/imports/entities", { method: "POST", body: "{}\n" });
    expect(none.status).toBe(415);

    const unknown = await ndjson("clients" as never, [{ name: "x" }], tenant.id);
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: string }).error).toBe("not_found");
    const jobs = async () =>
      (await env.DB.prepare("SELECT kind FROM import_jobs WHERE tenant = ?").bind(tenant.id).all<{ kind: string }>())
        .results;
    expect(await jobs()).toEqual([]);
    expect(await dumpType("organization", tenant.id)).toEqual([]);

    // application/jsonl is taken as well, and a last line without a newline counts.
    const jsonl = await t("/imports/entities", {
      method: "POST",
      headers: { "Content-Type": "application/jsonl; charset=utf-8" },
      body: JSON.stringify({ type: "organization", name: "L", external_id: unique("jsonl") }),
    });
    expect(jsonl.status, await jsonl.clone().text()).toBe(200);
    expect(counts((await jsonl.json()) as Job)).toEqual({
      status: "done",
      lines: 1,
      created: 1,
      updated: 0,
      unchanged: 0,
      failed: 0,
    });
    expect((await dumpType("organization", tenant.id)).map((r) => r.name)).toEqual(["L"]);
    expect(await jobs()).toEqual([{ kind: "entities" }]);
  });
});

/**
 * Issue 38: an import's body is bounded like any other (size, time, encoding) and its memory stays
 * flat: each line is validated as it is read and a batch closes by bytes as well as by lines.
 */
describe("import limits (issue 38)", () => {
  /** A request whose body the test writes as it goes: `push` a line, `end` the body. */
  function streamedImport(kind: string, tenant: string, testEnv: object = env) {
    let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        controller = c;
      },
    });
    const encoder = new TextEncoder();
    const response = scoped(tenant)(
      `/imports/${kind}`,
      { method: "POST", headers: { "Content-Type": "application/x-ndjson" }, body },
      testEnv,
    );
    return {
      push: (...lines: (Record<string, unknown> | string)[]) =>
        controller?.enqueue(
          encoder.encode(lines.map((l) => `${typeof l === "string" ? l : JSON.stringify(l)}\n`).join("")),
        ),
      end: () => controller?.close(),
      response,
    };
  }

  /** The tenant's one job, once it exists. */
  async function onlyJob(tenant: string): Promise<Job | undefined> {
    const list = (await (await scoped(tenant)("/imports")).json()) as { imports: Job[] };
    return list.imports[0];
  }

  it("a batch closes by bytes as well as by lines: the job's progress shows before its body ends", async () => {
    const tenant = (await createTenant()).id;
    const upload = streamedImport("entities", tenant);
    // 300 valid lines of about 4 KB (1.2 MB): fewer lines than a batch takes, more bytes.
    const big = (i: number) => ({
      type: "organization",
      name: `Big ${i}`,
      external_id: `big-${i}`,
      attributes: { a: "a".repeat(1_000), b: "b".repeat(1_000), c: "c".repeat(1_000), d: "d".repeat(990) },
    });
    upload.push(...Array.from({ length: 300 }, (_, i) => big(i)));
    const deadline = Date.now() + 15_000;
    let progress: Job | undefined;
    while (Date.now() < deadline) {
      progress = await onlyJob(tenant);
      if (progress && progress.created > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    upload.end();
    const res = await upload.response;
    expect(res.status, await res.clone().text()).toBe(200);
    // Written while the body was still open: the first batch closed by its bytes.
    expect(progress).toMatchObject({ status: "running" });
    expect(progress?.created).toBeGreaterThan(0);
    expect(progress?.created).toBeLessThan(300);
    expect(counts((await res.json()) as Job)).toEqual({
      status: "done",
      lines: 300,
      created: 300,
      updated: 0,
      unchanged: 0,
      failed: 0,
    });
  }, 30_000);

  it("invalid UTF-8 is the client's error: 400 with its line; the lines before it load; the job failed", async () => {
    const tenant = (await createTenant()).id;
    const good = (i: number) => JSON.stringify({ type: "organization", name: `U ${i}`, external_id: `u-${i}` });
    const bytes = new Uint8Array([
      ...new TextEncoder().encode(`${good(1)}\n\n${good(2)}\n{"type":"organization","name":"`),
      0xff,
      0xfe,
      ...new TextEncoder().encode(`","external_id":"u-3"}\n${good(4)}\n`),
    ]);
    const res = await scoped(tenant)("/imports/entities", {
      method: "POST",
      headers: { "Content-Type": "application/x-ndjson" },
      body: bytes,
    });
    expect(res.status).toBe(400);
    expect(res.headers.get("Retry-After")).toBeNull();
    const error = (await res.json()) as { error: string; error_description: string };
    expect(error.error).toBe("invalid_request");
    expect(error.error_description).toMatch(/line 4\b.*UTF-8/);
    const job = (await onlyJob(tenant)) as Job;
    expect(error.error_description).toContain(job.id);
    expect(counts(job)).toEqual({ status: "failed", lines: 3, created: 2, updated: 0, unchanged: 0, failed: 1 });
    expect(job.errors).toEqual([{ line: 4, error: expect.stringContaining("UTF-8") }]);
    expect(job.finished_at).toEqual(expect.any(Number));
    expect((await dumpType("organization", tenant)).map((r) => r.name).sort()).toEqual(["U 1", "U 2"]);
  });

  it("blank lines count toward a job's line cap", async () => {
    const tenant = (await createTenant()).id;
    const res = await scoped(tenant)("/imports/entities", {
      method: "POST",
      headers: { "Content-Type": "application/x-ndjson" },
      body: "\n".repeat(MAX_JOB_LINES + 5),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const job = (await res.json()) as Job;
    expect(job.status).toBe("incomplete");
    expect(job.errors).toEqual([{ line: MAX_JOB_LINES + 1, error: expect.stringContaining(String(MAX_JOB_LINES)) }]);
  });

  it("a body declared larger than a job takes is 413 before any job starts", async () => {
    const tenant = (await createTenant()).id;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode('{"type":"organization","name":"x","external_id":"x"}\n'));
        c.close();
      },
    });
    const res = await scoped(tenant)("/imports/entities", {
      method: "POST",
      headers: { "Content-Type": "application/x-ndjson", "Content-Length": String(MAX_JOB_BYTES + 1) },
      body,
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: string }).error).toBe("payload_too_large");
    expect(await onlyJob(tenant)).toBeUndefined();
  });

  it("a body that stops arriving is 408 after body_deadline_seconds, with its line; the lines before it load", async () => {
    const tenant = (await createTenant()).id;
    const testEnv = withVars({ POLICY: policy({ body_deadline_seconds: 1 }) });
    const upload = streamedImport("entities", tenant, testEnv);
    upload.push(
      { type: "organization", name: "S 1", external_id: "s-1" },
      { type: "organization", name: "S 2", external_id: "s-2" },
    );
    const started = Date.now();
    const res = await upload.response;
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(res.status).toBe(408);
    const error = (await res.json()) as { error: string; error_description: string };
    expect(error.error).toBe("invalid_request");
    expect(error.error_description).toMatch(/line 3\b/);
    const job = (await onlyJob(tenant)) as Job;
    expect(counts(job)).toEqual({ status: "failed", lines: 2, created: 2, updated: 0, unchanged: 0, failed: 1 });
    expect(job.errors).toEqual([{ line: 3, error: expect.stringContaining("in time") }]);
  }, 30_000);

  it("a live job's heartbeat (updated_at) moves while it reads, before any batch is written", async () => {
    const tenant = (await createTenant()).id;
    const upload = streamedImport("entities", tenant);
    upload.push({ type: "organization", name: "H 1", external_id: "h-1" });
    // Longer than the heartbeat's interval (3 s), shorter than the body's deadline (10 s).
    await new Promise((r) => setTimeout(r, 3_500));
    upload.push({ type: "organization", name: "H 2", external_id: "h-2" });
    let job: Job | undefined;
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline) {
      job = await onlyJob(tenant);
      if (job && job.updated_at > job.started_at) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(job).toMatchObject({ status: "running", lines: 0, created: 0 });
    expect(job?.updated_at).toBeGreaterThanOrEqual((job?.started_at as number) + 3_000);
    upload.end();
    const res = await upload.response;
    expect(counts((await res.json()) as Job)).toMatchObject({ status: "done", lines: 2, created: 2 });
  }, 30_000);

  it("a running job whose heartbeat is stale reads as interrupted, with its counts; a live one stays running", async () => {
    const tenant = (await createTenant()).id;
    const stale = loadConfig(env).POLICY.import_stale_after_seconds * 1000;
    const now = Date.now();
    const insert = (id: string, updatedAt: number) =>
      env.DB.prepare(
        `INSERT INTO import_jobs (id, tenant, kind, status, lines, created, started_at, updated_at)
         VALUES (?, ?, 'entities', 'running', 5000, 5000, ?, ?)`,
      ).bind(id, tenant, updatedAt - 60_000, updatedAt);
    const dead = `imp_dead${unique("x").replace(/-/g, "")}`;
    const live = `imp_live${unique("x").replace(/-/g, "")}`;
    await env.DB.batch([insert(dead, now - stale - 5_000), insert(live, now - 1_000)]);

    const read = (await (await scoped(tenant)(`/imports/${dead}`)).json()) as Job;
    expect(read).toMatchObject({ id: dead, status: "interrupted", lines: 5000, created: 5000 });
    expect(read.finished_at).toBeGreaterThanOrEqual(now);
    expect(read.updated_at).toBe(now - stale - 5_000);
    const list = (await (await scoped(tenant)("/imports")).json()) as { imports: Job[] };
    expect(list.imports.find((j) => j.id === live)).toMatchObject({ status: "running", finished_at: null });
  });

  it("op-mgmt's cron marks a stale running job interrupted, whichever tenant it is", async () => {
    const tenant = (await createTenant()).id;
    const stale = loadConfig(env).POLICY.import_stale_after_seconds * 1000;
    const id = `imp_cron${unique("x").replace(/-/g, "")}`;
    const at = Date.now() - stale - 5_000;
    await env.DB.prepare(
      `INSERT INTO import_jobs (id, tenant, kind, status, lines, created, started_at, updated_at)
       VALUES (?, ?, 'users', 'running', 7, 7, ?, ?)`,
    )
      .bind(id, tenant, at, at)
      .run();
    const ctx = createExecutionContext();
    await mgmt.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "*/5 * * * *" }), env, ctx);
    await waitOnExecutionContext(ctx);
    const row = await env.DB.prepare("SELECT status, lines, created, finished_at FROM import_jobs WHERE id = ?")
      .bind(id)
      .first<{ status: string; lines: number; created: number; finished_at: number | null }>();
    expect(row).toMatchObject({ status: "interrupted", lines: 7, created: 7, finished_at: expect.any(Number) });
  });
});
