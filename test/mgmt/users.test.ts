import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { admin, fullLogin, pinClock, registerClient, uniqueEmail, userinfo, verifyJwt } from "../support/harness";

afterEach(() => {
  vi.useRealTimers();
});

interface User {
  id: string;
  email: string;
  name: string | null;
  revoked_at: number | null;
}

describe("users (CONTRACT §5)", () => {
  it("creates a user with a normalized email: 201, then 409 for the same address in any case", async () => {
    const email = uniqueEmail("create");
    const res = await admin("/users", { method: "POST", json: { email: email.toUpperCase(), name: "Ada" } });
    expect(res.status).toBe(201);
    const user = (await res.json()) as User;
    expect(user).toMatchObject({ id: expect.stringMatching(/^usr_/), email, name: "Ada", revoked_at: null });
    expect(await env.DB.prepare("SELECT email, name FROM users WHERE id = ?").bind(user.id).first()).toEqual({
      email,
      name: "Ada",
    });
    expect((await admin("/users", { method: "POST", json: { email } })).status).toBe(409);
    // A login by that address reaches that user.
    const client = await registerClient();
    const { tokens } = await fullLogin(client, email);
    expect((await verifyJwt(tokens.id_token)).payload.sub).toBe(user.id);
  });

  it("refuses invalid users with 400 and stores nothing", async () => {
    const before = (await env.DB.prepare("SELECT COUNT(*) AS n FROM users").first<{ n: number }>())?.n;
    for (const json of [
      {},
      { email: "not-an-email" },
      { email: "a@example.com\r\nBcc: b@example.com" },
      { email: 5 },
      { email: uniqueEmail(), admin: true },
      { email: uniqueEmail(), name: "" },
      { email: uniqueEmail(), name: 7 },
    ]) {
      const res = await admin("/users", { method: "POST", json });
      expect(res.status, JSON.stringify(json)).toBe(400);
    }
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM users").first<{ n: number }>())?.n).toBe(before);
  });

  it("imports users in bulk and counts created and existing", async () => {
    const existing = uniqueEmail("exists");
    await admin("/users", { method: "POST", json: { email: existing } });
    const fresh = Array.from({ length: 5 }, () => uniqueEmail("import"));
    const res = await admin("/users/import", {
      method: "POST",
      json: { users: [...fresh.map((email, i) => ({ email, name: `U${i}` })), { email: existing.toUpperCase() }] },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ created: 5, existing: 1 });
    const { results } = await env.DB.prepare(
      `SELECT email, name FROM users WHERE email IN (${fresh.map(() => "?").join(",")}) ORDER BY email`,
    )
      .bind(...fresh)
      .all();
    expect(results).toHaveLength(5);
    // The same import again: all existing.
    const again = await admin("/users/import", { method: "POST", json: { users: fresh.map((email) => ({ email })) } });
    expect(await again.json()).toEqual({ created: 0, existing: 5 });
  });

  it("imports 1,000 users in one call and refuses 1,001 or an invalid entry without storing any", async () => {
    const tag = Math.random().toString(36).slice(2, 8);
    const users = Array.from({ length: 1000 }, (_, i) => ({ email: `bulk.${tag}.${i}@example.com` }));
    const res = await admin("/users/import", { method: "POST", json: { users } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ created: 1000, existing: 0 });

    const tag2 = Math.random().toString(36).slice(2, 8);
    const tooMany = Array.from({ length: 1001 }, (_, i) => ({ email: `over.${tag2}.${i}@example.com` }));
    expect((await admin("/users/import", { method: "POST", json: { users: tooMany } })).status).toBe(400);
    const oneBad = [...tooMany.slice(0, 3), { email: "broken" }];
    expect((await admin("/users/import", { method: "POST", json: { users: oneBad } })).status).toBe(400);
    expect((await admin("/users/import", { method: "POST", json: { users: [] } })).status).toBe(400);
    const stored = await env.DB.prepare("SELECT COUNT(*) AS n FROM users WHERE email LIKE ?")
      .bind(`over.${tag2}.%`)
      .first<{ n: number }>();
    expect(stored?.n).toBe(0);
  });

  it("gets a user by id and finds one by email; unknown ids are 404", async () => {
    const email = uniqueEmail("get");
    const created = (await (await admin("/users", { method: "POST", json: { email } })).json()) as User;
    const got = await admin(`/users/${created.id}`);
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual(created);
    const byEmail = await admin(`/users?email=${encodeURIComponent(email.toUpperCase())}`);
    expect(await byEmail.json()).toEqual({ users: [created] });
    const nobody = await admin(`/users?email=${encodeURIComponent(uniqueEmail("nobody"))}`);
    expect(await nobody.json()).toEqual({ users: [] });
    expect((await admin("/users?email=not-an-email")).status).toBe(400);
    expect((await admin("/users/usr_nope")).status).toBe(404);
  });

  it("updates a user's name with PATCH, clears it with null, and refuses anything else", async () => {
    const email = uniqueEmail("patch");
    const created = (await (await admin("/users", { method: "POST", json: { email } })).json()) as User;
    const named = await admin(`/users/${created.id}`, { method: "PATCH", json: { name: "  Grace Hopper " } });
    expect(named.status, await named.clone().text()).toBe(200);
    expect(await named.json()).toMatchObject({ id: created.id, email, name: "Grace Hopper" });
    expect(((await (await admin(`/users/${created.id}`)).json()) as User).name).toBe("Grace Hopper");
    const cleared = await admin(`/users/${created.id}`, { method: "PATCH", json: { name: null } });
    expect(((await cleared.json()) as User).name).toBeNull();
    for (const bad of [{ email: "other@example.com" }, { name: "" }, { name: "x".repeat(201) }, {}, { name: 7 }]) {
      const res = await admin(`/users/${created.id}`, { method: "PATCH", json: bad });
      expect(res.status, JSON.stringify(bad)).toBe(400);
    }
    expect((await admin("/users/usr_nope", { method: "PATCH", json: { name: "x" } })).status).toBe(404);
    expect(((await (await admin(`/users/${created.id}`)).json()) as User).email).toBe(email);
  });

  it("lists users in pages", async () => {
    for (let i = 0; i < 3; i++) await admin("/users", { method: "POST", json: { email: uniqueEmail("page") } });
    const first = (await (await admin("/users?limit=2")).json()) as { users: User[]; next: string | null };
    expect(first.users).toHaveLength(2);
    expect(first.next).toBe(first.users[1]?.id);
    const second = (await (await admin(`/users?limit=2&after=${first.next}`)).json()) as { users: User[] };
    expect(second.users).toHaveLength(2);
    expect((second.users[0] as User).id > (first.next as string)).toBe(true);
    expect(second.users.map((u) => u.id)).not.toContain(first.users[0]?.id);
  });

  it("reads users by id in the order asked, only the tenant's, and validates the list", {
    timeout: 30_000,
  }, async () => {
    const made: User[] = [];
    for (let i = 0; i < 3; i++)
      made.push(
        (await (await admin("/users", { method: "POST", json: { email: uniqueEmail("ids") } })).json()) as User,
      );
    const [a, b, c] = made as [User, User, User];
    const tenant = `ids-${Date.now().toString(36)}`;
    expect((await admin("/tenants", { method: "POST", json: { id: tenant, name: "Ids" } })).status).toBe(201);
    const theirs = (await (
      await admin(`/tenants/${tenant}/users`, { method: "POST", json: { email: uniqueEmail("ids-other") } })
    ).json()) as User;
    const res = await admin(`/users?ids=${c.id},${a.id},usr_nobody,${theirs.id},${c.id}`);
    expect(res.status, await res.clone().text()).toBe(200);
    const { users } = (await res.json()) as { users: User[] };
    expect(users.map((u) => u.email)).toEqual([c.email, a.email]);
    // Under the other tenant, only its own user.
    const other = (await (await admin(`/tenants/${tenant}/users?ids=${a.id},${theirs.id}`)).json()) as {
      users: User[];
    };
    expect(other.users.map((u) => u.id)).toEqual([theirs.id]);
    const tooMany = Array.from({ length: 201 }, (_, i) => `usr_${i}`).join(",");
    for (const bad of ["", ",", tooMany, "a b", `${b.id}&email=${encodeURIComponent(b.email)}`, `${b.id}&after=x`])
      expect((await admin(`/users?ids=${bad}`)).status, bad).toBe(400);
  });

  it("refuses a page size that is not a whole number from 1 to 1000 with 400, never every user or a 503", async () => {
    for (const limit of ["-1", "0", "1.5", "1001", "abc", ""]) {
      const res = await admin(`/users?limit=${limit}`);
      expect(res.status, `limit=${limit}`).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe("invalid_request");
    }
    expect((await admin("/users?limit=1000")).status).toBe(200);
  });

  it("deletes a user: 204, then 404, and their tokens stop working", async () => {
    const client = await registerClient();
    const { tokens, email } = await fullLogin(client);
    const user = await env.DB.prepare("SELECT id FROM users WHERE email = ?").bind(email).first<{ id: string }>();
    expect((await admin(`/users/${user?.id}`, { method: "DELETE" })).status).toBe(204);
    expect((await admin(`/users/${user?.id}`)).status).toBe(404);
    expect((await admin(`/users/${user?.id}`, { method: "DELETE" })).status).toBe(404);
    expect((await userinfo(tokens.access_token)).status).toBe(401);
  });

  it("forgets a deleted user in the email's shard at once: the next sign-in is a new user, whose tokens work", async () => {
    const client = await registerClient();
    const at = pinClock();
    const first = await fullLogin(client);
    const old = await env.DB.prepare("SELECT id FROM users WHERE email = ?").bind(first.email).first<{ id: string }>();
    // A second login takes the user from the email's ChallengeStore shard, not D1.
    at(61_000);
    const second = await fullLogin(client, first.email);
    expect((await verifyJwt(second.tokens.id_token)).payload.sub).toBe(old?.id);

    expect((await admin(`/users/${old?.id}`, { method: "DELETE" })).status).toBe(204);
    at(122_000);
    const third = await fullLogin(client, first.email);
    const now = await env.DB.prepare("SELECT id FROM users WHERE email = ?").bind(first.email).first<{ id: string }>();
    expect(now?.id).not.toBe(old?.id);
    expect((await verifyJwt(third.tokens.id_token)).payload.sub).toBe(now?.id);
    expect((await userinfo(third.tokens.access_token)).status).toBe(200);
  });

  it("revokes a user: revoked_at set; 404 for an unknown user", async () => {
    const client = await registerClient();
    const { tokens, email } = await fullLogin(client);
    const user = await env.DB.prepare("SELECT id FROM users WHERE email = ?").bind(email).first<{ id: string }>();
    const before = Date.now();
    const res = await admin(`/users/${user?.id}/revoke`, { method: "POST" });
    expect(res.status).toBe(200);
    const row = await env.DB.prepare("SELECT revoked_at FROM users WHERE id = ?")
      .bind(user?.id)
      .first<{ revoked_at: number }>();
    expect(row?.revoked_at).toBeGreaterThanOrEqual(before - 1000);
    expect((await userinfo(tokens.access_token)).status).toBe(401);
    expect((await admin("/users/usr_nope/revoke", { method: "POST" })).status).toBe(404);
  });
});
