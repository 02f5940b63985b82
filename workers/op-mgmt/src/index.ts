import { requireAdmin } from "../../shared/admin-auth";
import { createApp } from "../../shared/app";
import { loadConfig } from "../../shared/config";
import type { Env } from "../../shared/env";
import { log } from "../../shared/log";
import { auditAdminChanges } from "./audit";
import { scheduledRotation } from "./keys";
import { sweepAuditEvents } from "./retention";
import { ADMIN_ROUTES } from "./routes";

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
  /** The cron (hourly, op-mgmt's wrangler.toml): key rotation when due, and audit retention. */
  async scheduled(controller, env, ctx) {
    const config = loadConfig(env);
    ctx.waitUntil(
      Promise.all([
        scheduledRotation(env, config, controller.scheduledTime),
        sweepAuditEvents(env, config, controller.scheduledTime).then((swept) => {
          if (swept.deleted) log("info", "audit retention", swept);
        }),
      ]),
    );
  },
} satisfies ExportedHandler<Env>;
