import type { Config } from "../config/config";

/** Tenants: which tenant a request is for, and the keys that are per tenant (docs/tenants.md). */

export const DEFAULT_TENANT = "default";
export const TENANT_ID = /^[a-z0-9-]{2,40}$/;

/** Where a request's tenant came from: the origin's own paths, a `/t/<id>` prefix, or a custom host. */
export interface TenantRoute {
  tenant: string;
  via: "origin" | "path" | "host";
  /** The path with any `/t/<id>` prefix removed: what the Worker routes on. */
  path: string;
}

const TENANT_PATH = /^\/t\/([^/]*)(\/.*)?$/;
const WELL_KNOWN_TENANT_PATH = /^\/\.well-known\/(openid-configuration)\/t\/([^/]+)$/;

/** The path part of a URL string, without parsing the whole URL (routing runs on every request). */
function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("://") + 3);
  if (start < 0) return "/";
  const q = url.indexOf("?", start);
  const h = url.indexOf("#", start);
  const end = Math.min(q < 0 ? url.length : q, h < 0 ? url.length : h);
  return url.slice(start, end);
}

function hostOf(url: string): string {
  const start = url.indexOf("://") + 3;
  const end = url.indexOf("/", start);
  return url.slice(start, end < 0 ? undefined : end).toLowerCase();
}

/**
 * A request's tenant by its URL: a host TENANT_HOSTS maps, else `/t/<id>/...`, else the origin's own
 * (`default`). A `/t/` segment that is not a tenant id routes as an unknown tenant (404 later), never
 * as the default's path.
 */
export function tenantRouteOf(url: string, hosts: Readonly<Record<string, string>>): TenantRoute {
  const path = pathOf(url);
  const host = hostOf(url);
  // Own properties only: a Host of `constructor` is no tenant's.
  if (Object.hasOwn(hosts, host)) return { tenant: hosts[host] as string, via: "host", path };
  // RFC 8414 §3.1's form for an issuer with a path: the well-known segment first, then the issuer's path.
  const wellKnown = WELL_KNOWN_TENANT_PATH.exec(path);
  if (wellKnown) return { tenant: wellKnown[2] as string, via: "path", path: `/.well-known/${wellKnown[1]}` };
  const m = TENANT_PATH.exec(path);
  if (!m) return { tenant: DEFAULT_TENANT, via: "origin", path };
  return { tenant: m[1] as string, via: "path", path: m[2] ?? "/" };
}

/**
 * The admin API's tenant: `/admin/v1/tenants/<id>/<resource...>` is the resource route of that
 * tenant (`/admin/v1/<resource...>` for the Worker's router); every other admin path is the
 * platform's own, and its resource routes are the `default` tenant's.
 */
const ADMIN_TENANT_PATH = /^\/admin\/v1\/tenants\/([^/]+)(\/.+)$/;
export function adminTenantRouteOf(url: string): TenantRoute {
  const path = pathOf(url);
  const m = ADMIN_TENANT_PATH.exec(path);
  if (!m) return { tenant: DEFAULT_TENANT, via: "origin", path };
  return { tenant: m[1] as string, via: "path", path: `/admin/v1${m[2]}` };
}

/** The issuer of a tenant: the deployment's for `default`, its custom host, or `<origin>/t/<id>`. */
export function issuerOf(config: Pick<Config, "ISSUER" | "TENANT_HOSTS">, tenant: string): string {
  if (tenant === DEFAULT_TENANT) return config.ISSUER;
  const host = hostedAt(config, tenant);
  if (host) return `${new URL(config.ISSUER).protocol}//${host}`;
  return `${config.ISSUER}/t/${tenant}`;
}

/** The custom host a tenant is served at, if TENANT_HOSTS maps one to it. */
export function hostedAt(config: Pick<Config, "TENANT_HOSTS">, tenant: string): string | undefined {
  for (const [host, t] of Object.entries(config.TENANT_HOSTS)) if (t === tenant) return host;
  return undefined;
}

/**
 * Keys that hold per address or per user code, per tenant: the default tenant's are what they were
 * before tenants (state written then keeps its meaning), another tenant's are prefixed by its id.
 */
export function tenantScoped(config: Pick<Config, "TENANT">, key: string): string {
  return config.TENANT === DEFAULT_TENANT ? key : `${config.TENANT}:${key}`;
}
