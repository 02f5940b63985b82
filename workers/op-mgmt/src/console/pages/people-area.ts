import type { Hono } from "hono";
import type { ConsoleEnv } from "../env";
import { registerAuditPages } from "./audit";
import { registerOrganizationPages } from "./organizations";
import { registerPeoplePages } from "./people";

/** A tenant's people, organizations and audit trail (docs/console.md): one call for console/index.ts. */
export function registerPeopleArea(app: Hono<ConsoleEnv>): void {
  registerPeoplePages(app);
  registerOrganizationPages(app);
  registerAuditPages(app);
}
