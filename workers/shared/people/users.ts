import { randomToken } from "../../../durable-objects/contract/crypto";
import type { Env } from "../platform/env";
import { OAuthError } from "../platform/errors";

export interface User {
  id: string;
  /** The tenant the user belongs to (issue 23): an address is unique per tenant, never across. */
  tenant: string;
  email: string;
  name: string | null;
  created_at: number;
  updated_at: number;
  last_login_at: number | null;
  revoked_at: number | null;
  /** Issue 24: the EntityStore shard holding the user's grants (set at the first grant). */
  entity_shard?: string | null;
}

export const newUserId = () => `usr_${randomToken(16)}`;

export async function findUserByEmail(env: Env, tenant: string, email: string): Promise<User | null> {
  return env.DB.prepare("SELECT * FROM users WHERE tenant = ? AND email = ?").bind(tenant, email).first<User>();
}

/** A user of `tenant` by id; another tenant's user is not found. */
export async function findUser(env: Env, tenant: string, id: string): Promise<User | null> {
  return env.DB.prepare("SELECT * FROM users WHERE id = ? AND tenant = ?").bind(id, tenant).first<User>();
}

/**
 * Sign-up is sign-in: the first verified email creates its user. An existing user (the common case)
 * costs one read; only a first login writes.
 */
export async function findOrCreateUser(
  env: Env,
  tenant: string,
  email: string,
  now: number,
): Promise<{ user: User; created: boolean }> {
  const existing = await findUserByEmail(env, tenant, email);
  if (existing) return { user: existing, created: false };
  const id = newUserId();
  // Only into a tenant that stands: an isolate may still hold a deleted tenant's record for a few
  // seconds, and no user may be created behind its purge (the default tenant has no row).
  const created = await env.DB.prepare(
    `INSERT INTO users (id, tenant, email, created_at, updated_at)
     SELECT ?, ?, ?, ?, ? WHERE ? = 'default' OR EXISTS (SELECT 1 FROM tenants WHERE id = ? AND status = 'active')
     ON CONFLICT(tenant, email) DO UPDATE SET email = email RETURNING *`,
  )
    .bind(id, tenant, email, now, now, tenant, tenant)
    .first<User>();
  if (!created) throw new OAuthError("access_denied", "this tenant does not take sign-ups now");
  // A sign-up made at the same moment by another request wins the conflict: its row comes back.
  return { user: created, created: created.id === id };
}

/**
 * A login of `user` that began at `authTimeSeconds` still stands: the user is not deleted, nor revoked
 * since. Measured from the sign-in, never from a token's `iat`: a token issued after a revoke from a
 * login made before it is dead too.
 */
export function userStillValid(user: User | null, authTimeSeconds: number): user is User {
  return user !== null && (user.revoked_at === null || user.revoked_at < authTimeSeconds * 1000);
}
