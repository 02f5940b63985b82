import { z } from "zod";
import type { AdminRoute } from "./routes/admin-route";

const ERROR = {
  type: "object",
  properties: { error: { type: "string" }, error_description: { type: "string" } },
  required: ["error"],
} as const;

/** A zod schema as JSON Schema 2020-12 (OpenAPI 3.1's dialect), as the request is written (before transforms). */
function jsonSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" });
  return rest;
}

/**
 * The OpenAPI 3.1 document of the admin API, built from the route table (routes.ts): paths, methods,
 * parameters and request bodies come from what the handlers are registered and validate with.
 */
export function openApiDocument(routes: readonly AdminRoute[], issuer: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  // A tenant's routes are served at their own path (the default tenant's) and under each tenant's.
  const served = routes.flatMap((r) => {
    const underTenant = { ...r, path: `/admin/v1/tenants/:tenant${r.path.slice("/admin/v1".length)}` };
    return r.scope === "tenant" ? [r, underTenant] : r.scope === "scoped" ? [underTenant] : [r];
  });
  for (const r of served) {
    const path = r.path.replace(/:([A-Za-z_]+)/g, "{$1}");
    const parameters = [
      ...[...r.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => ({
        name: m[1],
        in: "path",
        required: true,
        schema: { type: "string" },
      })),
      ...(r.query ?? []).map((name) => ({ name, in: "query", required: false, schema: { type: "string" } })),
    ];
    const status = String(r.status ?? 200);
    const operation: Record<string, unknown> = {
      summary: r.summary,
      responses: {
        [status]: { description: r.status === 204 ? "Done, no body" : "Success (JSON)" },
        "400": { description: "Invalid request", content: { "application/json": { schema: ERROR } } },
        "401": {
          description: "No or wrong admin token (a tenant's admin key opens its own tenant's routes only)",
          content: { "application/json": { schema: ERROR } },
        },
        ...(r.path.includes(":")
          ? { "404": { description: "Not found", content: { "application/json": { schema: ERROR } } } }
          : {}),
        "503": {
          description: "Overloaded; retry after `Retry-After`",
          content: { "application/json": { schema: ERROR } },
        },
      },
    };
    if (parameters.length) operation.parameters = parameters;
    if (r.body)
      operation.requestBody = { required: true, content: { "application/json": { schema: jsonSchema(r.body) } } };
    paths[path] = { ...paths[path], [r.method]: operation };
  }
  return {
    openapi: "3.1.0",
    info: { title: "Keyway admin API", version: "1" },
    servers: [{ url: issuer }],
    components: { securitySchemes: { adminToken: { type: "http", scheme: "bearer" } } },
    security: [{ adminToken: [] }],
    paths,
  };
}
