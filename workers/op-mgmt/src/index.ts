import { log } from "../../../durable-objects/contract/log";
import { createApp } from "../../shared/app/app";
import { loadConfig } from "../../shared/config/config";
import type { Env } from "../../shared/platform/env";
import { OAuthError } from "../../shared/platform/errors";
import { retireDrainedGenerations } from "../../shared/routing/live-shards";
import { auditAdminChanges } from "./audit";
import { mountConsole } from "./console/index";
import { markInterruptedImports } from "./entities/imports";
import { scheduledRotation } from "./keys";
import { sweepAuditEvents } from "./retention";
import { ADMIN_ROUTES } from "./routes";
import { CONTROLLER_CRON, runShardController } from "./shard-controller";
import { requireAdminOrTenantKey, resumeTenantPurges, scopeToTenant } from "./tenants";

/** op-mgmt: the admin API under /admin/v1 (CONTRACT §5), and the operators' web console at /console (§11). */
export const app = createApp("admin");
mountConsole(app);

// Admin answers hold users, clients and keys: never kept by a cache on the way (RFC 9111 §5.2.2.5).
app.use("/admin/*", async (c, next) => {
  await next();
  c.res.headers.set("Cache-Control", "no-store");
});
app.use("/admin/*", requireAdminOrTenantKey);
app.use("/admin/*", scopeToTenant);
app.use("/admin/*", auditAdminChanges);
for (const route of ADMIN_ROUTES)
  app[route.method](route.path, (c, next) => {
    // A platform route is not a tenant's (`/admin/v1/tenants/acme/shards` is 404), a scoped one only a tenant's.
    const scoped = c.get("tenantRoute").via === "path";
    if ((route.scope === "platform" && scoped) || (route.scope === "scoped" && !scoped))
      throw new OAuthError("not_found", "no such endpoint");
    // A tenant's key (or a tenant operator in the console) never opens a platform route, at any path.
    if (route.scope === "platform" && c.get("adminCaller") === "tenant-key")
      throw new OAuthError("forbidden", "this endpoint takes the platform admin token");
    return route.handler(c, next);
  });

export default {
  fetch: app.fetch,
  /**
   * The crons (op-mgmt's wrangler.toml): every 5 minutes the shard controller (when enabled) and the
   * tenant purges a crash cut short, and import jobs whose Worker died marked `interrupted` (issue 38);
   * hourly, key rotation when due, audit retention, and the rows of drained shard generations deleted
   * (issue 38 item 14) as well.
   */
  async scheduled(controller, env, ctx) {
    const config = loadConfig(env);
    const now = controller.scheduledTime;
    const work: Promise<unknown>[] = [
      runShardController(env, config, now).then((decisions) => {
        for (const d of decisions) if (d.action !== "none") log("info", "shard controller", { ...d });
      }),
      resumeTenantPurges(env, config).then((finished) => {
        if (finished.length) log("info", "tenant purges finished by the cron", { tenants: finished });
      }),
      markInterruptedImports(env, config, now).then((interrupted) => {
        if (interrupted) log("warn", "import jobs interrupted", { interrupted });
      }),
    ];
    if (controller.cron !== CONTROLLER_CRON)
      work.push(
        scheduledRotation(env, config, now),
        sweepAuditEvents(env, config, now).then((swept) => {
          if (swept.deleted || swept.months_dropped.length) log("info", "audit retention", swept);
        }),
        retireDrainedGenerations(env, config, now).then((retired) => {
          if (retired) log("info", "drained shard generations retired", { rows: retired });
        }),
      );
    ctx.waitUntil(Promise.all(work));
  },
} satisfies ExportedHandler<Env>;
