/**
 * Which Worker serves which path. In production each Worker has routes on the issuer's host
 * (see each wrangler.toml); locally the dev gateway dispatches by this table.
 */
export type WorkerName = "op-auth" | "op-token" | "op-mgmt";

export function workerFor(pathname: string): WorkerName {
  if (pathname.startsWith("/admin/")) return "op-mgmt";
  // The operators' web console (issue 43), at the deployment's origin only.
  if (pathname === "/console" || pathname.startsWith("/console/")) return "op-mgmt";
  // A tenant's endpoints (`/t/<tenant>/token`) belong to the Worker of the same path at the origin.
  const tenantPath = /^\/t\/[^/]+(\/.*)?$/.exec(pathname);
  if (tenantPath) return tenantPath[1] ? workerFor(tenantPath[1]) : "op-auth";
  if (["/token", "/userinfo", "/revoke", "/introspect", "/jwks.json", "/device_authorization"].includes(pathname))
    return "op-token";
  return "op-auth";
}
