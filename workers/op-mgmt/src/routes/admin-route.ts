import type { Handler } from "hono";
import type { z } from "zod";
import type { AppEnv } from "../../../shared/request/context";

/**
 * The admin API, one row per endpoint: op-mgmt registers its handlers from this table, and the
 * OpenAPI document (`GET /admin/v1/openapi.json`) is generated from it, request bodies from the very
 * zod schemas the handlers validate with. A route cannot exist without being documented.
 */
export interface AdminRoute {
  method: "get" | "post" | "patch" | "delete";
  /** Hono's path syntax (`:id`). */
  path: string;
  summary: string;
  handler: Handler<AppEnv>;
  /** The JSON body's schema, as `body()` parses it. */
  body?: z.ZodType;
  /** Query parameters the handler reads (it refuses others where it says so). */
  query?: readonly string[];
  /** The success status, when it is not 200. */
  status?: 201 | 204;
  /**
   * Who the route is for (issue 23): `tenant` routes are served at their path (the default tenant's)
   * and under `/admin/v1/tenants/{tenant}` for each tenant, where a tenant's admin key opens them;
   * `platform` routes only at their path, to the platform token; `scoped` routes only under a tenant.
   */
  scope: "tenant" | "platform" | "scoped";
}

/** The query parameters of a paginated list with an attribute filter. */
export const LIST_QUERY = ["cursor", "limit", "attribute", "value"] as const;
