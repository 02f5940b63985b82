import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { call } from "../support/harness";

describe("admin authentication (CONTRACT §5, F1)", () => {
  const paths: [string, string][] = [
    ["GET", "/admin/v1/clients"],
    ["POST", "/admin/v1/clients"],
    ["GET", "/admin/v1/clients/kwc_x"],
    ["PATCH", "/admin/v1/clients/kwc_x"],
    ["DELETE", "/admin/v1/clients/kwc_x"],
    ["POST", "/admin/v1/users"],
    ["POST", "/admin/v1/users/import"],
    ["GET", "/admin/v1/users"],
    ["GET", "/admin/v1/users/usr_x"],
    ["DELETE", "/admin/v1/users/usr_x"],
    ["POST", "/admin/v1/users/usr_x/revoke"],
    ["GET", "/admin/v1/shards"],
  ];

  it("answers 401 without a token, with a wrong token, or with another scheme", async () => {
    const bad = [
      undefined,
      "Bearer wrong",
      `Bearer ${env.ADMIN_TOKEN}x`,
      `Bearer ${env.ADMIN_TOKEN.slice(0, -1)}`,
      `Basic ${btoa(`admin:${env.ADMIN_TOKEN}`)}`,
      env.ADMIN_TOKEN,
      "Bearer ",
    ];
    for (const [method, path] of paths)
      for (const auth of bad) {
        const headers: Record<string, string> = { "Content-Type": "application/json" };
        if (auth !== undefined) headers.Authorization = auth;
        const res = await call(path, {
          method,
          headers,
          ...(method === "GET" || method === "DELETE" ? {} : { body: JSON.stringify({ email: "x@example.com" }) }),
        });
        expect(res.status, `${method} ${path} with ${auth}`).toBe(401);
        expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
      }
    // Nothing was created by those requests.
    const row = await env.DB.prepare("SELECT id FROM users WHERE email = ?").bind("x@example.com").first();
    expect(row).toBeNull();
  });

  it("lets the admin token in", async () => {
    const res = await call("/admin/v1/shards", { headers: { Authorization: `Bearer ${env.ADMIN_TOKEN}` } });
    expect(res.status).toBe(200);
  });

  it("marks every admin answer no-store: successes, errors and refusals", async () => {
    const auth = { Authorization: `Bearer ${env.ADMIN_TOKEN}` };
    for (const [path, headers, status] of [
      ["/admin/v1/shards", auth, 200],
      ["/admin/v1/users?limit=2", auth, 200],
      ["/admin/v1/clients", auth, 200],
      ["/admin/v1/users/usr_nope", auth, 404],
      ["/admin/v1/users?limit=-1", auth, 400],
      ["/admin/v1/shards", {}, 401],
    ] as const) {
      const res = await call(path, { headers });
      expect(res.status, path).toBe(status);
      expect(res.headers.get("cache-control"), `${path} ${status}`).toBe("no-store");
    }
  });
});
