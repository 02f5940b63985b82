import { z } from "zod";
import { errorField, log } from "../../../durable-objects/contract/log";
import { brandingSchema } from "../branding/branding";
import { displayName } from "../branding/display-name";
import { LOCALE_TAGS } from "../branding/i18n/locales";
import type { Config } from "../config/config";
import { policyFields } from "../config/policy";
import type { Env } from "../platform/env";
import { OAuthError, unavailable } from "../platform/errors";
import { DEFAULT_TENANT, hostedAt, issuerOf, TENANT_ID, type TenantRoute } from "../routing/tenant-route";

/**
 * Tenants (issue 23, CONTRACT §8): many issuers in one deployment. A tenant is a hard boundary: its
 * own issuer (`<origin>/t/<id>`, or a custom host mapped to it by TENANT_HOSTS), discovery, keys,
 * clients, users, policy and mail settings. The deployment's own issuer is the `default` tenant,
 * configured by its variables as before; every other tenant is a row of D1 `tenants`.
 *
 * A request's tenant becomes part of its configuration: `tenantView` gives the request the config
 * as the tenant sees it (issuer, name, policy, sign-up, mail, `TENANT`), so every id, sealed value,
 * email key, D1 query and key ring made from that config is the tenant's. Durable Object shards are
 * shared by all tenants: ids and keys name their tenant under their MAC, so nothing is stored per
 * tenant in a Durable Object until the tenant has traffic, and an idle tenant costs one D1 row and
 * its key rows.
 */

const TENANT_POLICY_KEYS = [
  "otp_ttl_seconds",
  "otp_max_attempts",
  "email_failures_per_hour",
  "email_failures_per_hour_all_sources",
  "email_consecutive_failures",
  "resend_interval_seconds",
  "sends_per_email_per_hour",
  "login_tx_ttl_seconds",
  "device_code_ttl_seconds",
  "device_poll_interval_seconds",
  "code_ttl_seconds",
  "session_ttl_seconds",
  "access_token_ttl_seconds",
  "access_token_signing_alg",
  "id_token_ttl_seconds",
  "refresh_token_ttl_seconds",
  "refresh_grace_seconds",
  "pushed_request_ttl_seconds",
  "require_pushed_authorization_requests",
  "open_registration",
  "registration_require_pkce",
  "client_assertion_token_endpoint_audience",
  "dpop_require_nonce",
  "passkey_offer",
] as const;
type TenantPolicyKey = (typeof TENANT_POLICY_KEYS)[number];

/**
 * The policy numbers a tenant may set, with the deployment's bounds; the rest (capacity, caches,
 * crons) are the deployment's. No defaults: what a tenant does not set follows the deployment's
 * POLICY (zod 4 would otherwise fill an absent optional field with its default).
 */
export const tenantPolicySchema = z
  .object(
    Object.fromEntries(
      TENANT_POLICY_KEYS.map((k) => {
        const field = policyFields.shape[k];
        return [k, (field instanceof z.ZodDefault ? field.unwrap() : field).optional()];
      }),
    ) as unknown as { [K in TenantPolicyKey]: z.ZodOptional<z.ZodType<z.output<(typeof policyFields.shape)[K]>>> },
  )
  .strict();

export const tenantMailSchema = z
  .object({
    /** The sender address; the deployment's MAIL_FROM when unset. */
    from: z.email().max(254).optional(),
    /** The display name in From; the product name when unset. */
    from_name: displayName(100).optional(),
    reply_to: z.email().max(254).optional(),
  })
  .strict();

/** What a tenant's `settings` column holds. */
export const tenantSettingsSchema = z
  .object({
    policy: tenantPolicySchema.default({}),
    /** Sign-up open (the first verified address creates its user) or by invitation (admin-created users only). */
    signup: z.enum(["open", "invite"]).default("open"),
    mail: tenantMailSchema.default({}),
    /** The tenant's pages and mail (issue 26): product name, logo, primary colour, support link. */
    branding: brandingSchema.default({}),
    /** The language of its pages and mail when the request names none Keyway has. */
    locale: z.enum(LOCALE_TAGS).optional(),
  })
  .strict();
export type TenantSettings = z.infer<typeof tenantSettingsSchema>;

export type TenantStatus = "active" | "disabled" | "deleted";

export interface Tenant {
  id: string;
  name: string;
  status: TenantStatus;
  settings: TenantSettings;
  created_at: number;
  updated_at: number;
}

export interface TenantRow {
  id: string;
  name: string;
  status: TenantStatus;
  settings: string;
  created_at: number;
  updated_at: number;
}

export function tenantFromRow(row: TenantRow): Tenant {
  const stored = JSON.parse(row.settings) as Record<string, unknown>;
  // Settings are validated when written; a row that no longer parses (a field removed since) keeps its
  // tenant working on the deployment's defaults rather than failing every request. Branding or mail
  // checked more strictly since they were written (issue 38: a host a CSP cannot name, a bidi control
  // in a name) cost that section alone, not the tenant's policy.
  let parsed = tenantSettingsSchema.safeParse(stored);
  const failed = parsed.success ? [] : [...new Set(parsed.error.issues.map((i) => i.path[0]))];
  if (failed.length && failed.every((k) => k === "branding" || k === "mail")) {
    parsed = tenantSettingsSchema.safeParse({ ...stored, ...Object.fromEntries(failed.map((k) => [k, {}])) });
    if (parsed.success)
      log("warn", "tenant settings: a section no longer parses; its defaults apply", {
        tenant: row.id,
        sections: failed.join(","),
      });
  }
  if (!parsed.success) log("error", "tenant settings do not parse; deployment defaults apply", { tenant: row.id });
  return { ...row, settings: parsed.success ? parsed.data : tenantSettingsSchema.parse({}) };
}

// ---- The isolate's cache of tenant records (never one D1 read per request).

const records = new Map<string, { tenant: Tenant | null; until: number }>();
const MAX_CACHED = 20_000;

/** A tenant's record, from this isolate's cache or D1 (null for one that does not exist). */
export async function loadTenant(env: Env, config: Config, id: string, now = Date.now()): Promise<Tenant | null> {
  if (!TENANT_ID.test(id)) return null;
  const hit = records.get(id);
  if (hit && hit.until > now) return hit.tenant;
  let tenant: Tenant | null;
  try {
    const row = await env.DB.prepare("SELECT * FROM tenants WHERE id = ?").bind(id).first<TenantRow>();
    tenant = row ? tenantFromRow(row) : null;
  } catch (err) {
    // A known tenant keeps being served from what was known while D1 cannot answer; an unknown one waits.
    log("warn", "tenant record could not be read", { tenant: id, error: errorField(err) });
    if (hit) {
      records.set(id, { tenant: hit.tenant, until: now + 5_000 });
      return hit.tenant;
    }
    throw unavailable(1);
  }
  // The oldest entry goes first (a Map keeps insertion order): made-up ids cannot flush the live tenants.
  records.delete(id);
  if (records.size >= MAX_CACHED) records.delete(records.keys().next().value as string);
  records.set(id, { tenant, until: now + config.POLICY.tenant_cache_seconds * 1000 });
  return tenant;
}

/** Forgets a cached tenant (after an admin change in this isolate, or when op-mgmt asks). */
export function forgetTenant(id: string): void {
  records.delete(id);
}

// ---- The configuration as a tenant sees it.

const views = new WeakMap<Config, Map<string, { tenant: Tenant; view: Config }>>();

/**
 * The config as `tenant` sees it: its issuer, its name as the product name (pages, mail), its policy
 * over the deployment's, its sign-up mode and mail settings, and `TENANT`. Kept per deployment config
 * and tenant record, so a request builds nothing when neither changed (the key ring and caches keyed
 * by the view stay warm).
 */
export function tenantView(base: Config, tenant: Tenant, via: TenantRoute["via"]): Config {
  let byTenant = views.get(base);
  if (!byTenant) {
    byTenant = new Map();
    views.set(base, byTenant);
  }
  // By how it was reached too: the cookie path of a tenant under a path is not the one at a host.
  const key = `${tenant.id} ${via}`;
  const hit = byTenant.get(key);
  if (hit && hit.tenant === tenant) return hit.view;
  const s = tenant.settings;
  const policy = { ...base.POLICY, ...s.policy };
  if (policy.email_failures_per_hour_all_sources < policy.email_failures_per_hour)
    policy.email_failures_per_hour_all_sources = policy.email_failures_per_hour;
  const view: Config = {
    ...base,
    TENANT: tenant.id,
    ISSUER: issuerOf(base, tenant.id),
    ISSUER_NAME: tenant.name,
    POLICY: policy,
    SIGNUP: s.signup,
    MAIL_FROM: s.mail.from ?? base.MAIL_FROM,
    MAIL_FROM_NAME: s.mail.from_name ?? tenant.name,
    MAIL_REPLY_TO: s.mail.reply_to,
    // A tenant's pages are its own: the deployment's branding is the default tenant's, not inherited.
    BRANDING: s.branding,
    DEFAULT_LOCALE: s.locale ?? base.DEFAULT_LOCALE,
    cookiePath: via === "path" ? `/t/${tenant.id}` : "/",
  };
  if (byTenant.size >= MAX_CACHED) byTenant.clear();
  byTenant.set(key, { tenant, view });
  return view;
}

/**
 * The config a request to a tenant's endpoints runs with, or the error it gets: 404 for a tenant that
 * does not exist (or was deleted), or one mapped to a custom host reached by its path; 403
 * `tenant_disabled` for a disabled one (it issues nothing and answers nothing but that).
 */
export async function configForRequest(env: Env, base: Config, route: TenantRoute): Promise<Config> {
  if (route.via === "origin") return base;
  if (route.tenant === DEFAULT_TENANT && route.via === "path")
    throw new OAuthError("not_found", "the default tenant is served at the origin's own paths");
  if (route.via === "path" && hostedAt(base, route.tenant))
    throw new OAuthError("not_found", `tenant ${route.tenant} is served at its own host`);
  // A host TENANT_HOSTS maps to the default tenant serves the deployment's own config.
  if (route.tenant === DEFAULT_TENANT) return base;
  const tenant = await loadTenant(env, base, route.tenant);
  if (!tenant || tenant.status === "deleted") throw new OAuthError("not_found", "no such tenant");
  if (tenant.status === "disabled") throw new OAuthError("tenant_disabled", `tenant ${tenant.id} is disabled`);
  return tenantView(base, tenant, route.via);
}
