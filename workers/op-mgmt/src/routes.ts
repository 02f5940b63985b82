import { openApiDocument } from "./openapi";
import type { AdminRoute } from "./routes/admin-route";
import { OPERATION_ROUTES } from "./routes/operation-routes";
import { PEOPLE_ROUTES } from "./routes/people-routes";
import { TENANT_ROUTES } from "./routes/tenant-routes";

/**
 * The admin API, one row per endpoint (routes/admin-route.ts says what a row is), in registration
 * order: a tenant's set-up, people and entities, operations, and the OpenAPI document built from
 * all of them. An endpoint is found in one guess, by its first path segment, in one of the three.
 */
export const ADMIN_ROUTES: readonly AdminRoute[] = [
  ...TENANT_ROUTES,
  ...PEOPLE_ROUTES,
  ...OPERATION_ROUTES,
  {
    method: "get",
    path: "/admin/v1/openapi.json",
    summary: "This document (OpenAPI 3.1)",
    handler: (c) => c.json(openApiDocument(ADMIN_ROUTES, c.get("config").ISSUER)),
    scope: "platform",
  },
];
