import { Hono } from "hono";
import type { AppEnv } from "../../../shared/request/context";
import type { ConsoleEnv } from "./env";
import { renderMessagePage } from "./layout";
import { pageBasics, requireOperator, requireTenant, useAdminApp } from "./operator";
import { registerApplicationPages } from "./pages/applications";
import { registerPeopleArea } from "./pages/people-area";
import { registerTenantPages } from "./pages/tenants";
import { registerWebhookPages } from "./pages/webhooks";
import { callback, logout } from "./session";

export { CONSOLE_CLIENT_ID } from "./session";

/**
 * The operators' web console (issue 43, CONTRACT §11, docs/console.md), mounted at `/console` on
 * op-mgmt: sign-in (session.ts), the guard (operator.ts), the page shell (layout.tsx), and a file per
 * section under pages/. Every change a page makes is an admin API call on the operator's behalf
 * (`adminCall`): the console has no second implementation of anything the API does.
 */
export function mountConsole(app: Hono<AppEnv>): void {
  useAdminApp(app);
  const console = new Hono<ConsoleEnv>();
  console.use("*", pageBasics);
  console.get("/callback", callback);
  console.post("/logout", logout);
  console.use("*", requireOperator);
  console.use("/t/:tenant", requireTenant);
  console.use("/t/:tenant/*", requireTenant);
  registerTenantPages(console);
  registerPeopleArea(console);
  registerApplicationPages(console);
  registerWebhookPages(console);
  console.all("*", (c) => renderMessagePage(c, { kind: "notFound", status: 404 }));
  app.route("/console", console);
}
