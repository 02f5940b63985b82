import type { Context, Next } from "hono";
import { z } from "zod";
import { randomToken, sha256, timingSafeEqualString } from "../../../durable-objects/contract/crypto";
import { askPeers } from "../../shared/app/isolate";
import { brandingSchema } from "../../shared/branding/branding";
import { displayName } from "../../shared/branding/display-name";
import { LOCALE_TAGS } from "../../shared/branding/i18n/locales";
import type { Config } from "../../shared/config/config";
import { firstKeyStatements, forgetKeyRing } from "../../shared/oauth/keys";
import type { Env } from "../../shared/platform/env";
import { OAuthError } from "../../shared/platform/errors";
import { json } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { allShards } from "../../shared/routing/shard-refs";
import { shard } from "../../shared/routing/stores";
import { DEFAULT_TENANT, issuerOf, TENANT_ID } from "../../shared/routing/tenant-route";
import {
  forgetTenant,
  type Tenant,
  type TenantRow,
  tenantFromRow,
  tenantMailSchema,
  tenantPolicySchema,
  tenantSettingsSchema,
  tenantView,
} from "../../shared/tenancy/tenants";
import { consoleCallerOf } from "./console/caller";
import { body, queryLimit } from "./validation";

/**
 * The tenants of the admin API (issue 23, CONTRACT §8): create, read, list, change, disable and
 * delete them, and their tenant-scoped admin keys. The `default` tenant is the deployment's own
 * issuer: it is listed and read here, and configured by the deployment's variables.
 */

const tenantId = z
  .string()
  .regex(TENANT_ID, "2 to 40 lower-case letters, digits and hyphens")
  .refine((id) => id !== DEFAULT_TENANT, "`default` is the deployment's own tenant");

export const tenantInput = z
  .object({
    id: tenantId,
    name: displayName(100),
    policy: tenantPolicySchema.optional(),
    signup: z.enum(["open", "invite"]).optional(),
    mail: tenantMailSchema.optional(),
    branding: brandingSchema.optional(),
    locale: z.enum(LOCALE_TAGS).optional(),
  })
  .strict();

export const tenantPatch = z
  .object({
    name: displayName(100).optional(),
    /** `disabled`: every endpoint of the tenant answers 403 `tenant_disabled` and issues nothing. */
    status: z.enum(["active", "disabled"]).optional(),
    /** Replaces the tenant's policy overrides (`{}` clears them). */
    policy: tenantPolicySchema.optional(),
    signup: z.enum(["open", "invite"]).optional(),
    /** Replaces the tenant's mail settings. */
    mail: tenantMailSchema.optional(),
    /** Replaces the tenant's branding (`{}` clears it). */
    branding: brandingSchema.optional(),
    /** The default language of its pages and mail; `null` returns to the deployment's. */
    locale: z.enum(LOCALE_TAGS).nullable().optional(),
  })
  .strict();

/** What the admin API shows of a tenant. */
function publicTenant(c: Context<AppEnv>, t: Tenant) {
  const issuer = issuerOf(c.get("config"), t.id);
  return {
    id: t.id,
    name: t.name,
    status: t.status,
    issuer,
    discovery: `${issuer}/.well-known/openid-configuration`,
    policy: t.settings.policy,
    signup: t.settings.signup,
    mail: t.settings.mail,
    branding: t.settings.branding,
    locale: t.settings.locale ?? null,
    created_at: t.created_at,
    updated_at: t.updated_at,
  };
}

/** The default tenant as the deployment configures it. */
function defaultTenant(c: Context<AppEnv>) {
  const config = c.get("config");
  return {
    id: DEFAULT_TENANT,
    name: config.ISSUER_NAME,
    status: "active" as const,
    issuer: config.ISSUER,
    discovery: `${config.ISSUER}/.well-known/openid-configuration`,
    policy: {},
    signup: config.SIGNUP,
    mail: { from: config.MAIL_FROM, ...(config.MAIL_FROM_NAME ? { from_name: config.MAIL_FROM_NAME } : {}) },
    branding: config.BRANDING,
    locale: config.DEFAULT_LOCALE,
    created_at: null,
    updated_at: null,
  };
}

const DEFAULT_IS_CONFIG =
  "the default tenant is configured by the deployment's variables (ISSUER_NAME, POLICY, SIGNUP, MAIL_*, BRANDING, DEFAULT_LOCALE)";

async function readTenant(c: Context<AppEnv>, id: string): Promise<Tenant> {
  const row = TENANT_ID.test(id)
    ? await c.env.DB.prepare("SELECT * FROM tenants WHERE id = ? AND status != 'deleted'").bind(id).first<TenantRow>()
    : null;
  if (!row) throw new OAuthError("not_found", "no such tenant");
  return tenantFromRow(row);
}

/** `POST /admin/v1/tenants`: the tenant, with its first signing keys, in one D1 batch. */
export async function createTenant(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, tenantInput);
  const config = c.get("config");
  const now = Date.now();
  const settings = tenantSettingsSchema.parse({
    policy: input.policy,
    signup: input.signup,
    mail: input.mail,
    branding: input.branding,
    locale: input.locale,
  });
  // The id is never reused: a deleted tenant's row stays as a tombstone, so its ids stay refused. The
  // row and the first keys are one batch (one transaction): a conflict leaves no key behind.
  const exists = await c.env.DB.prepare("SELECT status FROM tenants WHERE id = ?")
    .bind(input.id)
    .first<{ status: string }>();
  if (exists)
    throw new OAuthError(
      "conflict",
      exists.status === "deleted" ? "a deleted tenant's id is not reused" : "a tenant with this id exists",
    );
  try {
    await c.env.DB.batch([
      c.env.DB.prepare(
        "INSERT INTO tenants (id, name, status, settings, created_at, updated_at) VALUES (?, ?, 'active', ?, ?, ?)",
      ).bind(input.id, input.name, JSON.stringify(settings), now, now),
      ...(await firstKeyStatements(c.env, config, input.id, now)),
    ]);
  } catch (err) {
    if (err instanceof Error && /UNIQUE constraint/i.test(err.message))
      throw new OAuthError("conflict", "a tenant with this id exists");
    throw err;
  }
  // Isolates that were asked for this id before it existed forget that it did not.
  await forgetTenantEverywhere(c, input.id);
  return json(publicTenant(c, await readTenant(c, input.id)), 201);
}

/** `GET /admin/v1/tenants`: by id, `default` first, then pages of `limit` after `after`. */
export async function listTenants(c: Context<AppEnv>): Promise<Response> {
  const limit = queryLimit(c, 100, 1000);
  const after = c.req.query("after") ?? "";
  const { results } = await c.env.DB.prepare(
    "SELECT * FROM tenants WHERE status != 'deleted' AND id > ? ORDER BY id LIMIT ?",
  )
    .bind(after, limit)
    .all<TenantRow>();
  const tenants = results.map((r) => publicTenant(c, tenantFromRow(r)));
  const last = results.at(-1);
  return json({
    tenants: after === "" ? [defaultTenant(c), ...tenants] : tenants,
    next: results.length === limit && last ? last.id : null,
  });
}

export async function getTenant(c: Context<AppEnv>): Promise<Response> {
  const id = c.req.param("tenant") ?? "";
  if (id === DEFAULT_TENANT) return json(defaultTenant(c));
  return json(publicTenant(c, await readTenant(c, id)));
}

/** `PATCH /admin/v1/tenants/{id}`: name, status, policy, sign-up, mail; held at once where op-mgmt reaches. */
export async function patchTenant(c: Context<AppEnv>): Promise<Response> {
  const id = c.req.param("tenant") ?? "";
  if (id === DEFAULT_TENANT) throw new OAuthError("invalid_request", DEFAULT_IS_CONFIG);
  const patch = await body(c, tenantPatch);
  const current = await readTenant(c, id);
  const settings = tenantSettingsSchema.parse({
    policy: patch.policy ?? current.settings.policy,
    signup: patch.signup ?? current.settings.signup,
    mail: patch.mail ?? current.settings.mail,
    branding: patch.branding ?? current.settings.branding,
    locale: patch.locale === null ? undefined : (patch.locale ?? current.settings.locale),
  });
  await c.env.DB.prepare(
    "UPDATE tenants SET name = ?, status = ?, settings = ?, updated_at = ? WHERE id = ? AND status != 'deleted'",
  )
    .bind(patch.name ?? current.name, patch.status ?? current.status, JSON.stringify(settings), Date.now(), id)
    .run();
  await forgetTenantEverywhere(c, id);
  return json(publicTenant(c, await readTenant(c, id)));
}

/** Rows deleted per statement when a tenant goes: each statement stays well inside D1's time limit. */
const DELETE_BATCH = 5_000;

/**
 * `DELETE /admin/v1/tenants/{id}`: the tenant becomes a tombstone first (from then on every one of its
 * endpoints is 404 and every id, code, session, refresh token and access token it issued is refused:
 * ids name their tenant, tokens are signed with its keys), then its data is purged (purgeTenantData).
 * A purge cut short (a crash, a limit hit) is finished by the cron (resumeTenantPurges), or by this
 * DELETE repeated. What its logins left in the shared Durable Objects expires there by alarm,
 * unreachable. Its id is never given to another tenant.
 */
export async function deleteTenant(c: Context<AppEnv>): Promise<Response> {
  const id = c.req.param("tenant") ?? "";
  if (id === DEFAULT_TENANT) throw new OAuthError("invalid_request", DEFAULT_IS_CONFIG);
  const row = TENANT_ID.test(id)
    ? await c.env.DB.prepare("SELECT status FROM tenants WHERE id = ?").bind(id).first<{ status: string }>()
    : null;
  if (!row) throw new OAuthError("not_found", "no such tenant");
  // A DELETE of a deleted tenant finishes the purge an earlier one did not (a limit hit, a retry).
  if (row.status !== "deleted") {
    await c.env.DB.prepare("UPDATE tenants SET status = 'deleted', settings = '{}', updated_at = ? WHERE id = ?")
      .bind(Date.now(), id)
      .run();
    await forgetTenantEverywhere(c, id);
  }
  await purgeTenantData(c.env, c.get("config"), id);
  return new Response(null, { status: 204 });
}

/**
 * A deleted tenant's data, a batch at a time: its entities and grants in every entity shard (issue
 * 24), its entity types, import jobs and console operators' grants, its webhook endpoints (their
 * sealed secrets; their queued messages then fail as "the endpoint was deleted" and expire), users,
 * clients, signing keys and admin keys; then `purged_at` is set. Each step deletes only the tenant's rows, so running it again after
 * an interruption, or twice at once, does no harm. True once all is gone; false when the entity
 * shards still had rows after their rounds (the next cron run goes on).
 */
export async function purgeTenantData(env: Env, config: Config, id: string): Promise<boolean> {
  const shards = allShards(config, "entity");
  let entitiesGone = false;
  for (let round = 0; round < 50 && !entitiesGone; round++) {
    const done = await Promise.all(shards.map((ref) => shard(env, "entity", ref).purgeTenant(id, DELETE_BATCH)));
    entitiesGone = done.every(Boolean);
  }
  await env.DB.batch([
    env.DB.prepare("DELETE FROM entity_types WHERE tenant = ?").bind(id),
    env.DB.prepare("DELETE FROM import_jobs WHERE tenant = ?").bind(id),
    // Its console operators' grants (issue 43); a deployment operator's grant is no tenant's.
    env.DB.prepare("DELETE FROM operators WHERE tenant = ?").bind(id),
  ]);
  for (const table of [
    "webhook_endpoints",
    "users",
    "clients",
    "signing_keys",
    "admin_keys",
    "registration_tokens",
  ] as const) {
    const key = table === "clients" ? "client_id" : table === "signing_keys" ? "kid" : "id";
    for (;;) {
      const { meta } = await env.DB.prepare(
        `DELETE FROM ${table} WHERE ${key} IN (SELECT ${key} FROM ${table} WHERE tenant = ? LIMIT ?)`,
      )
        .bind(id, DELETE_BATCH)
        .run();
      if (meta.changes < DELETE_BATCH) break;
    }
  }
  if (!entitiesGone) return false;
  await env.DB.prepare("UPDATE tenants SET purged_at = ? WHERE id = ? AND status = 'deleted'")
    .bind(Date.now(), id)
    .run();
  return true;
}

/** Deleted tenants whose purge one cron run finishes at most (each is batches of DELETE_BATCH rows). */
export const PURGES_PER_RUN = 5;

/**
 * From op-mgmt's cron (issue 38 item 12c): the purges that did not finish (a tombstone without
 * `purged_at`: the DELETE's Worker crashed or hit a limit after the tombstone) go on by themselves.
 * The tenant answers 404 from the tombstone on, so no one could tell a purge was cut short.
 */
export async function resumeTenantPurges(env: Env, config: Config): Promise<string[]> {
  const { results } = await env.DB.prepare(
    "SELECT id FROM tenants WHERE status = 'deleted' AND purged_at IS NULL ORDER BY updated_at LIMIT ?",
  )
    .bind(PURGES_PER_RUN)
    .all<{ id: string }>();
  const finished: string[] = [];
  for (const { id } of results) if (await purgeTenantData(env, config, id)) finished.push(id);
  return finished;
}

/** A tenant changed: forgotten here (record and keys) and by the op-auth and op-token isolates op-mgmt reaches. */
async function forgetTenantEverywhere(c: Context<AppEnv>, id: string): Promise<void> {
  forgetTenant(id);
  forgetKeyRing(id);
  await askPeers(c.env, c.get("config").ADMIN_TOKEN, "POST", `/__keyway/forget-tenant/${encodeURIComponent(id)}`);
}

// ---- Tenant-scoped admin keys.

const KEY_PREFIX = "kwa_";
const hashKey = (key: string) => sha256(`admin-key:${key}`);

export const adminKeyInput = z.object({ name: displayName(100) }).strict();

/** The tenant a scoped route is for; a scoped route reached by the platform's own paths is 404. */
function scopedTenant(c: Context<AppEnv>): string {
  const route = c.get("tenantRoute");
  if (route.via !== "path") throw new OAuthError("not_found", "no such endpoint");
  return route.tenant;
}

/**
 * Admin keys are made and revoked with the platform token only: a leaked key cannot mint the keys
 * that would outlive its own revocation. A tenant's key may list them.
 */
function requirePlatform(c: Context<AppEnv>): void {
  if (c.get("adminCaller") !== "platform")
    throw new OAuthError("forbidden", "admin keys are created and revoked with the platform admin token");
}

/** `POST /admin/v1/tenants/{id}/admin-keys`: a key that opens that tenant's routes only; shown once. */
export async function createAdminKey(c: Context<AppEnv>): Promise<Response> {
  const tenant = scopedTenant(c);
  requirePlatform(c);
  const input = await body(c, adminKeyInput);
  const key = `${KEY_PREFIX}${randomToken(32)}`;
  const id = `kak_${randomToken(12)}`;
  const now = Date.now();
  await c.env.DB.prepare("INSERT INTO admin_keys (id, tenant, name, key_hash, created_at) VALUES (?, ?, ?, ?, ?)")
    .bind(id, tenant, input.name, await hashKey(key), now)
    .run();
  return json({ id, tenant, name: input.name, key, created_at: now }, 201, { "Cache-Control": "no-store" });
}

export async function listAdminKeys(c: Context<AppEnv>): Promise<Response> {
  const tenant = scopedTenant(c);
  const { results } = await c.env.DB.prepare(
    "SELECT id, tenant, name, created_at, revoked_at FROM admin_keys WHERE tenant = ? ORDER BY id LIMIT 1000",
  )
    .bind(tenant)
    .all();
  return json({ admin_keys: results });
}

/** `DELETE /admin/v1/tenants/{id}/admin-keys/{key_id}`: revoked at once (keys are checked in D1 on every call). */
export async function revokeAdminKey(c: Context<AppEnv>): Promise<Response> {
  const tenant = scopedTenant(c);
  requirePlatform(c);
  const { meta } = await c.env.DB.prepare(
    "UPDATE admin_keys SET revoked_at = ? WHERE id = ? AND tenant = ? AND revoked_at IS NULL",
  )
    .bind(Date.now(), c.req.param("id") ?? "", tenant)
    .run();
  if (!meta.changes) throw new OAuthError("not_found", "no such admin key");
  return new Response(null, { status: 204 });
}

// ---- Who may call: the platform token everywhere, a tenant's admin key on its tenant's routes only.

const unauthorized = () =>
  new OAuthError("unauthorized", "a valid admin token is required", {
    wwwAuthenticate: 'Bearer realm="keyway-admin"',
  });

/**
 * Middleware for `/admin/*`: `Authorization: Bearer <ADMIN_TOKEN>` (CONTRACT §5), or a tenant's admin
 * key on `/admin/v1/tenants/<that tenant>/...` (CONTRACT §8), else 401. A key is looked up by its hash
 * in D1 on every call (admin traffic is light), so a revoked key stops at once everywhere.
 */
export async function requireAdminOrTenantKey(c: Context<AppEnv>, next: Next): Promise<void> {
  const operator = consoleCallerOf(c.req.raw);
  if (operator) {
    // A console page acting for an operator (console/caller.ts): a deployment operator acts as the
    // platform, a tenant operator as that tenant's admin key would, on its tenants only.
    const route = c.get("tenantRoute");
    const tenant = route.via === "path" ? route.tenant : DEFAULT_TENANT;
    if (operator.scope !== "all" && !operator.scope.includes(tenant))
      throw new OAuthError("forbidden", "this operator does not manage that tenant");
    c.set("adminCaller", operator.scope === "all" ? "platform" : "tenant-key");
    c.set("adminOperator", operator.email);
    return next();
  }
  const m = /^Bearer (.+)$/.exec(c.req.header("authorization") ?? "");
  const presented = m?.[1] ?? "";
  if (m && timingSafeEqualString(presented, c.get("config").ADMIN_TOKEN)) {
    c.set("adminCaller", "platform");
    return next();
  }
  const route = c.get("tenantRoute");
  if (!presented.startsWith(KEY_PREFIX) || presented.length > 100 || route.via !== "path") throw unauthorized();
  const row = await c.env.DB.prepare("SELECT tenant FROM admin_keys WHERE key_hash = ? AND revoked_at IS NULL")
    .bind(await hashKey(presented))
    .first<{ tenant: string }>();
  if (!row || row.tenant !== route.tenant) throw unauthorized();
  c.set("adminCaller", "tenant-key");
  return next();
}

/**
 * Middleware for the tenant-scoped routes: the config as the tenant sees it (its issuer, policy,
 * `TENANT`, which every handler's D1 query and store key is scoped by). A disabled tenant is still
 * managed here; a deleted or unknown one is 404.
 */
export async function scopeToTenant(c: Context<AppEnv>, next: Next): Promise<void> {
  const route = c.get("tenantRoute");
  if (route.via !== "path" || route.tenant === DEFAULT_TENANT) return next();
  // Read fresh (admin traffic is light): a tenant deleted through another isolate is gone here too.
  const tenant = await readTenant(c, route.tenant);
  c.set("config", tenantView(c.get("config"), tenant, "path"));
  return next();
}
