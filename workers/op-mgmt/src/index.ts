import { requireAdmin } from "../../shared/admin-auth";
import { createApp } from "../../shared/app";
import { loadConfig } from "../../shared/config";
import type { Env } from "../../shared/env";
import { auditAdminChanges, listAudit } from "./audit";
import { createClient, deleteClient, getClient, listClients, patchClient } from "./clients";
import { listKeys, rotateKeys, scheduledRotation } from "./keys";
import { sweepAuditEvents } from "./retention";
import { listShards } from "./shards";
import { shardStats } from "./stats";
import { testMailbox } from "./test-mailbox";
import { createUser, deleteUser, getUser, importUsers, listUsers, patchUser, revokeUser } from "./users";

/** op-mgmt: the admin API under /admin/v1 (CONTRACT §5). */
export const app = createApp();

// Admin answers hold users, clients and keys: never kept by a cache on the way (RFC 9111 §5.2.2.5).
app.use("/admin/*", async (c, next) => {
  await next();
  c.res.headers.set("Cache-Control", "no-store");
});
app.use("/admin/*", requireAdmin);
app.use("/admin/*", auditAdminChanges);
app.get("/admin/v1/audit", listAudit);
app.post("/admin/v1/clients", createClient);
app.get("/admin/v1/clients", listClients);
app.get("/admin/v1/clients/:id", getClient);
app.patch("/admin/v1/clients/:id", patchClient);
app.delete("/admin/v1/clients/:id", deleteClient);
app.post("/admin/v1/users", createUser);
app.post("/admin/v1/users/import", importUsers);
app.get("/admin/v1/users", listUsers);
app.get("/admin/v1/users/:id", getUser);
app.patch("/admin/v1/users/:id", patchUser);
app.delete("/admin/v1/users/:id", deleteUser);
app.post("/admin/v1/users/:id/revoke", revokeUser);
app.get("/admin/v1/shards", listShards);
app.get("/admin/v1/stats", shardStats);
app.get("/admin/v1/test-mailbox/:email", testMailbox);
app.get("/admin/v1/keys", listKeys);
app.post("/admin/v1/keys/rotate", rotateKeys);

export default {
  fetch: app.fetch,
  /** The cron (hourly, op-mgmt's wrangler.toml): key rotation when due, and audit retention. */
  async scheduled(controller, env, ctx) {
    const config = loadConfig(env);
    ctx.waitUntil(
      Promise.all([
        scheduledRotation(env, config, controller.scheduledTime),
        sweepAuditEvents(env, config, controller.scheduledTime).then((swept) => {
          if (swept.deleted) console.log(JSON.stringify({ msg: "audit retention", ...swept }));
        }),
      ]),
    );
  },
} satisfies ExportedHandler<Env>;
