import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type E2EStack, startE2EStack } from "./support.js";

/**
 * A tenant on a custom host (TENANT_HOSTS, issue 23), through the local gateway: requests to the stack
 * carry `Host: login.<tenant>.test`, as a DNS record pointing the host at Keyway would make them.
 */

let stack: E2EStack;
let tenant: { id: string; issuer: string };
const host = "login.hosted.test";

beforeAll(async () => {
  // The map names the tenant before it exists: a host of an unknown tenant answers 404 until then.
  stack = await startE2EStack({ TENANT_HOSTS: JSON.stringify({ [host]: "hosted-e2e" }) });
  const res = await fetch(`${stack.url}/admin/v1/tenants`, {
    method: "POST",
    headers: { Authorization: `Bearer ${stack.adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify({ id: "hosted-e2e", name: "Hosted" }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
  tenant = (await res.json()) as { id: string; issuer: string };
});

afterAll(async () => {
  await stack?.dispose();
});

/** GET with a Host header of our choosing (fetch does not let a caller set Host). */
function getWithHost(path: string, hostHeader: string): Promise<{ status: number; body: string }> {
  const url = new URL(path, stack.url);
  return new Promise((resolve, reject) => {
    const req = request(
      { hostname: url.hostname, port: url.port, path: url.pathname + url.search, headers: { Host: hostHeader } },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => {
          body += d;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("a tenant's custom host through the dev gateway", () => {
  it("serves the tenant's discovery and keys at the host's root, with the host as issuer", async () => {
    expect(tenant.issuer).toBe(`http://${host}`);
    const discovery = await getWithHost("/.well-known/openid-configuration", host);
    expect(discovery.status).toBe(200);
    const doc = JSON.parse(discovery.body) as Record<string, string>;
    expect(doc.issuer).toBe(`http://${host}`);
    expect(doc.jwks_uri).toBe(`http://${host}/jwks.json`);
    const jwks = await getWithHost("/jwks.json", host);
    expect(jwks.status).toBe(200);
    expect((JSON.parse(jwks.body) as { keys: unknown[] }).keys).toHaveLength(2);
  });

  it("answers 404 for the tenant's /t/ path on the main host, and the main host is still the default tenant", async () => {
    expect((await fetch(`${stack.url}/t/${tenant.id}/.well-known/openid-configuration`)).status).toBe(404);
    const own = (await (await fetch(`${stack.url}/.well-known/openid-configuration`)).json()) as { issuer: string };
    expect(own.issuer).toBe(stack.url);
  });
});
