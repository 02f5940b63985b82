import type { Context } from "hono";
import { z } from "zod";
import { withLastLogin } from "../../../durable-objects/contract/audit-trail";
import { errorField, log } from "../../../durable-objects/contract/log";
import { displayName } from "../../shared/branding/display-name";
import { auditEmailKey } from "../../shared/events/audit";
import { revokeUserEverywhere } from "../../shared/oauth/tokens";
import { normalizeEmail } from "../../shared/people/email";
import { findUser, findUserByEmail, newUserId, type User } from "../../shared/people/users";
import { OAuthError } from "../../shared/platform/errors";
import { json } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { keyShardsEverywhere, routeKey, shardAddress } from "../../shared/routing/shard-refs";
import { shard } from "../../shared/routing/stores";
import { dropUserGrants } from "./entities/service";
import { body, queryLimit } from "./validation";

const email = z.string().transform((v, ctx) => {
  const normalized = normalizeEmail(v);
  if (!normalized) {
    ctx.addIssue({ code: "custom", message: "not a valid email address" });
    return z.NEVER;
  }
  return normalized;
});
export const userInput = z.object({ email, name: displayName(200).optional() }).strict();
/** PATCH: only the name changes here (`null` clears it); an email is a user's identity in Keyway. */
export const userPatch = z.object({ name: displayName(200).nullable() }).strict();
export const importInput = z.object({ users: z.array(userInput).min(1).max(1000) }).strict();

export async function createUser(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, userInput);
  const now = Date.now();
  const row = await c.env.DB.prepare(
    "INSERT INTO users (id, tenant, email, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(tenant, email) DO NOTHING RETURNING *",
  )
    .bind(newUserId(), c.get("config").TENANT, input.email, input.name ?? null, now, now)
    .first<User>();
  if (!row) throw new OAuthError("conflict", "a user with this email exists");
  await rememberInShards(c, [row], now);
  return json(row, 201);
}

/** Bulk import, up to 1,000 per call, in one D1 batch (one transaction). Existing emails are left alone. */
export async function importUsers(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, importInput);
  const now = Date.now();
  const unique = new Map(input.users.map((u) => [u.email, u]));
  const stmt = c.env.DB.prepare(
    "INSERT INTO users (id, tenant, email, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(tenant, email) DO NOTHING RETURNING id, email",
  );
  const tenant = c.get("config").TENANT;
  const results = await c.env.DB.batch<{ id: string; email: string }>(
    [...unique.values()].map((u) => stmt.bind(newUserId(), tenant, u.email, u.name ?? null, now, now)),
  );
  const rows = results.flatMap((r) => r.results);
  await rememberInShards(c, rows, now);
  return json({ created: rows.length, existing: input.users.length - rows.length });
}

/**
 * Tells each new user's address shards (ChallengeStore, each region's current generation; none with
 * `residency` configured) who the address belongs
 * to, one call per shard, so the first sign-in of a created or imported user reads no D1. Only a cache:
 * if a shard cannot take it, that user's first sign-in reads D1 instead.
 */
export async function rememberInShards(c: Context<AppEnv>, users: { id: string; email: string }[], now: number) {
  const config = c.get("config");
  // With residency, where a person signs in decides where her state may be; the admin API does not
  // know it, so it writes nothing about her to any region (her first sign-in reads D1 instead).
  if (config.REGIONS.residency) return;
  const byShard = new Map<string, { ref: ReturnType<typeof routeKey>; users: { emailKey: string; id: string }[] }>();
  for (const u of users) {
    const emailKey = await auditEmailKey(config, u.email);
    for (const region of Object.keys(config.REGIONS.regions)) {
      const ref = routeKey(config, "challenge", emailKey, region);
      const address = shardAddress(ref);
      const entry = byShard.get(address) ?? { ref, users: [] };
      entry.users.push({ emailKey, id: u.id });
      byShard.set(address, entry);
    }
  }
  await Promise.all(
    [...byShard.values()].map(({ ref, users: list }) =>
      shard(c.env, "challenge", ref)
        .rememberUsers(list, now)
        .catch((err: unknown) => log("warn", "users: a shard could not remember", { error: errorField(err) })),
    ),
  );
}

export async function getUser(c: Context<AppEnv>): Promise<Response> {
  const user = await findUser(c.env, c.get("config").TENANT, c.req.param("id") ?? "");
  if (!user) throw new OAuthError("not_found", "no such user");
  return json((await lastLogins(c, [user]))[0]);
}

/** `last_login_at` as the audit trail has it (audit-trail.ts). */
function lastLogins(c: Context<AppEnv>, users: User[]): Promise<User[]> {
  const config = c.get("config");
  return withLastLogin(c.env.DB, config.TENANT, users, Date.now(), config.POLICY.audit_retention_days);
}

export async function patchUser(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, userPatch);
  const row = await c.env.DB.prepare(
    "UPDATE users SET name = ?, updated_at = ? WHERE id = ? AND tenant = ? RETURNING *",
  )
    .bind(input.name, Date.now(), c.req.param("id") ?? "", c.get("config").TENANT)
    .first<User>();
  if (!row) throw new OAuthError("not_found", "no such user");
  return json((await lastLogins(c, [row]))[0]);
}

/** At most this many ids in one `GET /users?ids=` (an organization's page of members is 50). */
export const MAX_IDS = 200;

export async function listUsers(c: Context<AppEnv>): Promise<Response> {
  const ids = c.req.query("ids");
  if (ids !== undefined) return usersByIds(c, ids);
  const q = c.req.query("email");
  if (q !== undefined) {
    const e = normalizeEmail(q);
    if (!e) throw new OAuthError("invalid_request", "email is not a valid address");
    const user = await findUserByEmail(c.env, c.get("config").TENANT, e);
    return json({ users: user ? await lastLogins(c, [user]) : [] });
  }
  const limit = queryLimit(c, 100, 1000);
  const after = c.req.query("after") ?? "";
  const { results } = await c.env.DB.prepare("SELECT * FROM users WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?")
    .bind(c.get("config").TENANT, after, limit)
    .all<User>();
  const last = results.at(-1);
  return json({ users: await lastLogins(c, results), next: results.length === limit && last ? last.id : null });
}

/**
 * `GET /users?ids=a,b,c`: the users with those ids (comma-separated, up to MAX_IDS), in the order
 * asked; an id with no user in this tenant is left out. One D1 read, keyed by the list (CROSS JOIN:
 * the list drives, each id a seek of the primary key), for a page that names many users at once
 * (an organization's members in the console).
 */
async function usersByIds(c: Context<AppEnv>, raw: string): Promise<Response> {
  if (c.req.query("email") !== undefined || c.req.query("after") !== undefined)
    throw new OAuthError("invalid_request", "ids takes neither email nor after");
  const ids = [...new Set(raw.split(",").filter(Boolean))];
  if (ids.length === 0 || ids.length > MAX_IDS || ids.some((id) => !/^[A-Za-z0-9_-]{1,100}$/.test(id)))
    throw new OAuthError("invalid_request", `ids is 1 to ${MAX_IDS} user ids, comma-separated`);
  const { results } = await c.env.DB.prepare(
    "SELECT u.* FROM json_each(?) AS j CROSS JOIN users AS u ON u.id = j.value AND u.tenant = ? ORDER BY j.key",
  )
    .bind(JSON.stringify(ids), c.get("config").TENANT)
    .all<User>();
  return json({ users: await lastLogins(c, results) });
}

/**
 * Deletes a user. The ChallengeStore shards of the address (every generation) forget which user it
 * was before the answer, so the next sign-in with it reads D1 (and, with open sign-up, creates a new
 * user); every revocation shard learns that the user's logins have ended, so a code already issued
 * is refused at the token endpoint.
 */
export async function deleteUser(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  const userId = c.req.param("id") ?? "";
  const row = await c.env.DB.prepare("DELETE FROM users WHERE id = ? AND tenant = ? RETURNING email, entity_shard")
    .bind(userId, config.TENANT)
    .first<{ email: string; entity_shard: string | null }>();
  if (!row) throw new OAuthError("not_found", "no such user");
  const emailKey = await auditEmailKey(config, row.email);
  await Promise.all([
    // Its grants go with it (issue 24): the organizations it belonged to no longer list it.
    dropUserGrants(c.env, config, { id: userId, entity_shard: row.entity_shard }),
    ...keyShardsEverywhere(config, "challenge", emailKey).map((ref) =>
      shard(c.env, "challenge", ref).forgetUser(emailKey),
    ),
    revokeUserEverywhere(c.env, config, userId, Date.now()),
  ]);
  return new Response(null, { status: 204 });
}

const REVOKE_SKEW_MARGIN_MS = 50;

/**
 * Ends every session and token of a user: sessions, access and refresh tokens are all checked
 * against `revoked_at` in D1 (a login at or before it is dead), and an authorization code already
 * issued against the same time in its sid's revocation shard, which every shard is told here.
 */
export async function revokeUser(c: Context<AppEnv>): Promise<Response> {
  const now = Date.now();
  const config = c.get("config");
  const row = await c.env.DB.prepare(
    "UPDATE users SET revoked_at = ?, updated_at = ? WHERE id = ? AND tenant = ? RETURNING *",
  )
    .bind(now, now, c.req.param("id") ?? "", config.TENANT)
    .first<User>();
  if (!row) throw new OAuthError("not_found", "no such user");
  await revokeUserEverywhere(c.env, config, row.id, now);
  // Logins are timed in whole seconds (auth_time, iat), and one timed at or before revoked_at is dead.
  // Answering only once the next second has begun (plus a margin for clock skew between machines)
  // means a login that starts after this response is never mistaken for one from before it.
  await new Promise((resolve) => setTimeout(resolve, 1000 - (now % 1000) + REVOKE_SKEW_MARGIN_MS));
  return json(row);
}
