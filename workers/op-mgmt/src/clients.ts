import type { Context } from "hono";
import { z } from "zod";
import type { AppEnv } from "../../shared/app";
import { type Client, clientFromRow, forgetClient, hashClientSecret } from "../../shared/clients";
import { randomToken } from "../../shared/crypto";
import { OAuthError } from "../../shared/errors";
import { json } from "../../shared/http";
import { askPeers } from "../../shared/isolate";
import { body, corsOrigin, redirectUri } from "./validation";

const SCOPES = ["openid", "email", "profile", "offline_access"] as const;

const clientFields = {
  client_name: z.string().trim().min(1).max(200),
  redirect_uris: z.array(redirectUri).min(1).max(50),
  post_logout_redirect_uris: z.array(redirectUri).max(50),
  token_endpoint_auth_method: z.enum(["none", "client_secret_basic", "client_secret_post"]),
  grant_types: z.array(z.enum(["authorization_code", "refresh_token"])).min(1),
  scope: z
    .string()
    .refine((s) => s.split(" ").every((p) => (SCOPES as readonly string[]).includes(p)), "unsupported scope")
    .refine((s) => s.split(" ").includes("openid"), "scope must include openid"),
  id_token_signed_response_alg: z.enum(["RS256", "ES256"]),
  allowed_cors_origins: z.array(corsOrigin).max(50),
};

export const createSchema = z
  .object({
    ...clientFields,
    post_logout_redirect_uris: clientFields.post_logout_redirect_uris.default([]),
    grant_types: clientFields.grant_types.default(["authorization_code", "refresh_token"]),
    scope: clientFields.scope.default(SCOPES.join(" ")),
    id_token_signed_response_alg: clientFields.id_token_signed_response_alg.default("RS256"),
    allowed_cors_origins: clientFields.allowed_cors_origins.default([]),
  })
  .strict();

export const patchSchema = z.object(clientFields).partial().strict();

export function publicClient(client: Client): Omit<Client, "secret_hash"> {
  const { secret_hash: _, ...rest } = client;
  return rest;
}

async function loadClient(c: Context<AppEnv>, id: string): Promise<Client> {
  const row = await c.env.DB.prepare("SELECT * FROM clients WHERE client_id = ?").bind(id).first();
  if (!row) throw new OAuthError("not_found", "no such client");
  return clientFromRow(row as never);
}

export async function createClient(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, createSchema);
  const now = Date.now();
  const clientId = `kwc_${randomToken(16)}`;
  const secret = input.token_endpoint_auth_method === "none" ? undefined : `kws_${randomToken(32)}`;
  await c.env.DB.prepare(
    `INSERT INTO clients (client_id, client_name, token_endpoint_auth_method, secret_hash, redirect_uris,
      post_logout_redirect_uris, grant_types, scope, id_token_signed_response_alg, allowed_cors_origins, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  )
    .bind(
      clientId,
      input.client_name,
      input.token_endpoint_auth_method,
      secret ? await hashClientSecret(secret) : null,
      JSON.stringify(input.redirect_uris),
      JSON.stringify(input.post_logout_redirect_uris),
      JSON.stringify([...new Set(input.grant_types)]),
      [...new Set(input.scope.split(" "))].join(" "),
      input.id_token_signed_response_alg,
      JSON.stringify(input.allowed_cors_origins),
      now,
      now,
    )
    .run();
  const client = publicClient(await loadClient(c, clientId));
  // The secret is shown once; only its hash is stored.
  return json(secret ? { ...client, client_secret: secret } : client, 201, { "Cache-Control": "no-store" });
}

export async function listClients(c: Context<AppEnv>): Promise<Response> {
  const { results } = await c.env.DB.prepare("SELECT * FROM clients ORDER BY created_at, client_id LIMIT 1000").all();
  return json({ clients: results.map((r) => publicClient(clientFromRow(r as never))) });
}

export async function getClient(c: Context<AppEnv>): Promise<Response> {
  return json(publicClient(await loadClient(c, c.req.param("id") ?? "")));
}

export async function patchClient(c: Context<AppEnv>): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const patch = await body(c, patchSchema);
  const current = await loadClient(c, id);
  if (
    patch.token_endpoint_auth_method &&
    (patch.token_endpoint_auth_method === "none") !== (current.token_endpoint_auth_method === "none")
  )
    throw new OAuthError(
      "invalid_request",
      "a client cannot switch between public and confidential; register a new one",
    );
  const next = { ...current, ...patch, updated_at: Date.now() };
  await c.env.DB.prepare(
    `UPDATE clients SET client_name = ?, token_endpoint_auth_method = ?, redirect_uris = ?, post_logout_redirect_uris = ?,
      grant_types = ?, scope = ?, id_token_signed_response_alg = ?, allowed_cors_origins = ?, updated_at = ? WHERE client_id = ?`,
  )
    .bind(
      next.client_name,
      next.token_endpoint_auth_method,
      JSON.stringify(next.redirect_uris),
      JSON.stringify(next.post_logout_redirect_uris),
      JSON.stringify(next.grant_types),
      next.scope,
      next.id_token_signed_response_alg,
      JSON.stringify(next.allowed_cors_origins),
      next.updated_at,
      id,
    )
    .run();
  await forgetEverywhere(c, id);
  return json(publicClient(await loadClient(c, id)));
}

export async function deleteClient(c: Context<AppEnv>): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const { meta } = await c.env.DB.prepare("DELETE FROM clients WHERE client_id = ?").bind(id).run();
  if (!meta.changes) throw new OAuthError("not_found", "no such client");
  await forgetEverywhere(c, id);
  return new Response(null, { status: 204 });
}

/**
 * A changed or deleted client is forgotten by this isolate and by the op-auth and op-token isolates
 * op-mgmt's service bindings reach; any other isolate holds it for at most `client_cache_seconds`.
 */
async function forgetEverywhere(c: Context<AppEnv>, id: string): Promise<void> {
  forgetClient(id);
  await askPeers(c.env, c.get("config").ADMIN_TOKEN, "POST", `/__keyway/forget-client/${encodeURIComponent(id)}`);
}
