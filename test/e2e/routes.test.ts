import { describe, expect, it } from "vitest";
import { PRODUCTION_ROUTES, WORKER_PATHS } from "../../scripts/lib/routes.mjs";
import { workerFor } from "../../workers/shared/app/worker-routes.ts";

/** The route tables (production and `npm start`) and the gateway's `workerFor` must send every path to one Worker. */
const PATHS = [
  "/.well-known/openid-configuration",
  "/authorize",
  "/email-code/generate",
  "/email-code/verify",
  "/passkey/verify",
  "/passkey/register",
  "/admin/v1/users/usr_x/passkeys",
  "/logout",
  "/register",
  "/register/kwc_abc",
  "/__dev/mailbox/a@example.com",
  "/token",
  "/userinfo",
  "/revoke",
  "/introspect",
  "/jwks.json",
  "/admin/v1/clients",
  "/admin/v1/users/import",
  "/console",
  "/console/callback",
  "/console/logout",
];

function match(table: Record<string, string[]>, path: string): string | null {
  // Cloudflare picks the most specific (longest) matching pattern.
  let best: { worker: string; len: number } | null = null;
  for (const [worker, patterns] of Object.entries(table))
    for (const p of patterns) {
      const hit = p.endsWith("*") ? path.startsWith(p.slice(0, -1)) : path === p;
      if (hit && (!best || p.length > best.len)) best = { worker, len: p.length };
    }
  return best?.worker ?? null;
}

describe("route tables", () => {
  it("send every Keyway path to the Worker workerFor names, locally and in production", () => {
    for (const path of PATHS) {
      const expected = `keyway-${workerFor(path)}`;
      expect(match(WORKER_PATHS, path), path).toBe(expected);
      expect(match(PRODUCTION_ROUTES, path), path).toBe(expected);
    }
  });

  it("send a tenant's paths to op-auth in production, which hands op-token's on by workerFor (issue 23)", () => {
    for (const path of PATHS.filter((p) => !p.startsWith("/admin/") && !p.startsWith("/console"))) {
      const tenantPath = `/t/acme${path}`;
      expect(match(PRODUCTION_ROUTES, tenantPath), tenantPath).toBe("keyway-op-auth");
      expect(workerFor(tenantPath), tenantPath).toBe(workerFor(path));
    }
  });
});
