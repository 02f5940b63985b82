import { describe, expect, it } from "vitest";
import { app as mgmtApp } from "../../workers/op-mgmt/src/index";
import { admin, call } from "../support/harness";

interface Operation {
  summary: string;
  parameters?: { name: string; in: string }[];
  requestBody?: { content: { "application/json": { schema: Record<string, unknown> } } };
  responses: Record<string, unknown>;
}
type Doc = { openapi: string; paths: Record<string, Record<string, Operation>> };

describe("the admin API's OpenAPI document (issue 15 item 6)", () => {
  it("is served to the admin only, as OpenAPI 3.1", async () => {
    expect((await call("/admin/v1/openapi.json")).status).toBe(401);
    const res = await admin("/openapi.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const doc = (await res.json()) as Doc;
    expect(doc.openapi).toBe("3.1.0");
  });

  it("lists every admin route op-mgmt serves, with its method and path parameters", async () => {
    const doc = (await (await admin("/openapi.json")).json()) as Doc;
    const served = mgmtApp.routes
      .filter((r) => r.path.startsWith("/admin/v1/") && r.method !== "ALL")
      .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:([A-Za-z_]+)/g, "{$1}")}`);
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => `${method} ${path}`),
    );
    // A tenant's routes are served by the same handlers under /admin/v1/tenants/{tenant} (issue 23):
    // op-mgmt routes them there by path, so the router lists them once, at their own path.
    const underTenant = /^(\w+) \/admin\/v1\/tenants\/\{tenant\}(\/.+)$/;
    const ownPath = (op: string) => {
      const m = underTenant.exec(op);
      return m ? `${m[1]} /admin/v1${m[2]}` : op;
    };
    expect(new Set(documented.map(ownPath))).toEqual(new Set(served));
    // Every tenant resource is documented under a tenant; the platform's own are not.
    for (const op of ["get /clients", "post /users/import", "get /audit", "post /keys/rotate", "post /admin-keys"])
      expect(documented).toContain(op.replace(" /", " /admin/v1/tenants/{tenant}/"));
    expect(documented).not.toContain("post /admin/v1/tenants/{tenant}/shards");
    expect(documented).toContain("get /admin/v1/tenants/{tenant}/shards");
    expect(documented).not.toContain("post /admin/v1/admin-keys");
    expect(served.length).toBeGreaterThanOrEqual(19);
    expect(doc.paths["/admin/v1/users/{id}"]?.patch?.parameters).toEqual([
      { name: "id", in: "path", required: true, schema: { type: "string" } },
    ]);
  });

  it("describes request bodies from the zod schemas the handlers validate with", async () => {
    const doc = (await (await admin("/openapi.json")).json()) as Doc;
    const body = (path: string, method: string) =>
      doc.paths[path]?.[method]?.requestBody?.content["application/json"].schema as {
        required?: string[];
        properties: Record<string, Record<string, unknown>>;
        additionalProperties?: boolean;
      };
    const create = body("/admin/v1/clients", "post");
    // redirect_uris is required only for a login client, which the schema's refinement checks.
    expect(new Set(create.required)).toEqual(new Set(["client_name", "token_endpoint_auth_method"]));
    expect(create.additionalProperties).toBe(false);
    expect(create.properties.token_endpoint_auth_method?.enum).toEqual([
      "none",
      "client_secret_basic",
      "client_secret_post",
      "private_key_jwt",
    ]);
    expect(create.properties.grant_types?.default).toEqual(["authorization_code", "refresh_token"]);
    // PATCH: every field optional, still strict.
    const patch = body("/admin/v1/clients/{id}", "patch");
    expect(patch.required ?? []).toEqual([]);
    expect(patch.additionalProperties).toBe(false);
    expect(body("/admin/v1/users/{id}", "patch").properties.name).toEqual({
      anyOf: [{ type: "string", minLength: 1, maxLength: 200 }, { type: "null" }],
    });
    expect(body("/admin/v1/users/import", "post").properties.users?.maxItems).toBe(1000);
    // What the document says is refused is refused.
    const unknownField = await admin("/clients", {
      method: "POST",
      json: { client_name: "x", redirect_uris: ["https://a.example/cb"], token_endpoint_auth_method: "none", extra: 1 },
    });
    expect(unknownField.status).toBe(400);
  });
});
