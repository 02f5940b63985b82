import { requireAdmin } from "../../shared/admin-auth";
import { createApp } from "../../shared/app";
import { loadConfig } from "../../shared/config";
import type { Env } from "../../shared/env";
import { log } from "../../shared/log";
import { auditAdminChanges } from "./audit";
import { scheduledRotation } from "./keys";
import { sweepAuditEvents } from "./retention";
import { ADMIN_ROUTES } from "./routes";
import { CONTROLLER_CRON, runShardController } from "./shard-controller";

/** op-mgmt: the admin API under /admin/v1 (CONTRACT §5). */
export const app = createApp();

// Admin answers hold users, clients and keys: never kept by a cache on the way (RFC 9111 §5.2.2.5).
app.use("/admin/*", async (c, next) => {
  await next();
  c.res.headers.set("Cache-Control", "no-store");
});
app.use("/admin/*", requireAdmin);
app.use("/admin/*", auditAdminChanges);
for (const route of ADMIN_ROUTES) app[route.method](route.path, route.handler);

export default {
  fetch: app.fetch,
  /**
   * The crons (op-mgmt's wrangler.toml): every 5 minutes the shard controller (when enabled); hourly,
   * key rotation when due and audit retention as well.
   */
  async scheduled(controller, env, ctx) {
    const config = loadConfig(env);
    const now = controller.scheduledTime;
    const work: Promise<unknown>[] = [
      runShardController(env, config, now).then((decisions) => {
        for (const d of decisions) if (d.action !== "none") log("info", "shard controller", { ...d });
      }),
    ];
    if (controller.cron !== CONTROLLER_CRON)
      work.push(
        scheduledRotation(env, config, now),
        sweepAuditEvents(env, config, now).then((swept) => {
          if (swept.deleted) log("info", "audit retention", swept);
        }),
      );
    ctx.waitUntil(Promise.all(work));
  },
} satisfies ExportedHandler<Env>;
