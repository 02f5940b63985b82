import { env } from "cloudflare:test";
import { expect } from "vitest";
import { admin, call, type TestClient } from "./harness";

/**
 * Dynamic Client Registration (RFC 7591) from a test: an initial access token minted by the admin
 * API, and `POST <issuer>/register`.
 */

/** A multi-use initial access token of the default tenant (or `tenant`). */
export async function mintRegistrationToken(tenant?: string): Promise<string> {
  const res = await admin(`${tenant ? `/tenants/${tenant}` : ""}/registration-tokens`, {
    method: "POST",
    json: { multi_use: true },
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return ((await res.json()) as { token: string }).token;
}

export interface DynamicClient extends TestClient {
  registration_access_token: string;
  registration_client_uri: string;
}

/** `POST <base>/register` with `metadata`; with `token` as the initial access token when given. */
export function registerAt(
  metadata: Record<string, unknown>,
  opts: { token?: string; env?: object; base?: string } = {},
): Promise<Response> {
  return call(
    `${opts.base ?? ""}/register`,
    {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        ...(opts.token ? { Authorization: `Bearer ${opts.token}` } : {}),
      },
      body: JSON.stringify(metadata),
    },
    opts.env ?? env,
  );
}

/** A registration that must succeed: the 201's body. */
export async function registerDynamic(
  metadata: Record<string, unknown>,
  opts: { token?: string; env?: object; base?: string } = {},
): Promise<DynamicClient> {
  const res = await registerAt(metadata, { ...opts, token: opts.token ?? (await mintRegistrationToken()) });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as DynamicClient;
}

/** `GET registration_client_uri` (RFC 7592 §2.1) with the client's registration access token. */
export async function readRegistration(client: DynamicClient): Promise<Record<string, unknown>> {
  const res = await call(new URL(client.registration_client_uri).pathname, {
    headers: { Authorization: `Bearer ${client.registration_access_token}` },
  });
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

/** The client's row in D1, as stored. */
export async function clientRow(clientId: string): Promise<Record<string, unknown>> {
  const row = await env.DB.prepare("SELECT * FROM clients WHERE client_id = ?").bind(clientId).first();
  expect(row).not.toBeNull();
  return row as Record<string, unknown>;
}
