import type { Config } from "../config/config";
import type { Env } from "../platform/env";
import type { TenantRoute } from "../routing/tenant-route";

/**
 * What a Hono handler of any Keyway Worker sees on its context: the bindings, and what the app
 * (workers/shared/app/app.ts) sets before the handler runs. A type apart from the app so that
 * middleware (admission, quotas, the admin check) and the concerns' handlers can name it without
 * importing the app that mounts them.
 */
export type AppEnv = {
  Bindings: Env;
  /** `corsOrigins`: the origins the request's client registered, set once the client is known. */
  Variables: {
    config: Config;
    corsOrigins?: string[];
    /** The region this request maps to (regions.ts): where what it begins is placed. */
    region: string;
    /** The tenant the request's URL names, and the path the Worker routes on (tenants.ts). */
    tenantRoute: TenantRoute;
    /** op-mgmt: who called, the platform's admin token or a tenant's admin key. */
    adminCaller?: "platform" | "tenant-key";
    /** op-mgmt: the console operator a request acts for (audited), when it came from the console. */
    adminOperator?: string;
  };
};
