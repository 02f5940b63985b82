import type { Context } from "hono";
import { askPeers } from "../../shared/app/isolate";
import {
  authProof,
  createSchema,
  insertClient,
  newClientSecret,
  PROOF_FIXED,
  patchSchema,
  registrationProblems,
  updateClient,
} from "../../shared/oauth/client-registration";
import { type Client, clientFromRow, forgetClient, hashClientSecret } from "../../shared/oauth/clients";
import { OAuthError } from "../../shared/platform/errors";
import { json } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { body } from "./validation";

/** A client as the admin API shows it: no secret hash, no registration access token hash. */
export function publicClient(client: Client): Omit<Client, "secret_hash" | "registration_access_token_hash"> {
  const { secret_hash: _, registration_access_token_hash: __, ...rest } = client;
  return rest;
}

async function loadClient(c: Context<AppEnv>, id: string): Promise<Client> {
  const row = await c.env.DB.prepare("SELECT * FROM clients WHERE client_id = ? AND tenant = ?")
    .bind(id, c.get("config").TENANT)
    .first();
  if (!row) throw new OAuthError("not_found", "no such client");
  return clientFromRow(row as never);
}

export async function createClient(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, createSchema);
  const { clientId, secret } = await insertClient(c.env.DB, c.get("config").TENANT, input);
  const client = publicClient(await loadClient(c, clientId));
  // The secret is shown once; only its hash is stored.
  return json(secret ? { ...client, client_secret: secret } : client, 201, { "Cache-Control": "no-store" });
}

export async function listClients(c: Context<AppEnv>): Promise<Response> {
  const { results } = await c.env.DB.prepare(
    "SELECT * FROM clients WHERE tenant = ? ORDER BY created_at, client_id LIMIT 1000",
  )
    .bind(c.get("config").TENANT)
    .all();
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
    authProof(patch.token_endpoint_auth_method) !== authProof(current.token_endpoint_auth_method)
  )
    throw new OAuthError("invalid_request", PROOF_FIXED);
  const next = { ...current, ...patch, updated_at: Date.now() };
  // Checked as a whole when the PATCH changes what the rules are about; a client registered under
  // older rules can still be renamed or given new CORS origins.
  const shaping = [
    "redirect_uris",
    "token_endpoint_auth_method",
    "grant_types",
    "scope",
    "jwks",
    "jwks_uri",
    "require_pkce",
    "subject_type",
    "sector_identifier_uri",
    "request_object_signing_alg",
  ] as const;
  const problems = shaping.some((f) => f in patch) ? registrationProblems(next) : [];
  if (problems.length) throw new OAuthError("invalid_request", problems.join("; "));
  await updateClient(c.env.DB, next);
  await forgetEverywhere(c, id);
  return json(publicClient(await loadClient(c, id)));
}

/**
 * `POST /clients/{id}/rotate-secret`: a new secret, shown once; the old one stops working at once (a
 * client has one secret hash). Only for a client that authenticates with a secret.
 */
export async function rotateClientSecret(c: Context<AppEnv>): Promise<Response> {
  const current = await loadClient(c, c.req.param("id") ?? "");
  if (authProof(current.token_endpoint_auth_method) !== "secret")
    throw new OAuthError(
      "invalid_request",
      `a ${current.token_endpoint_auth_method} client has no secret to rotate; only client_secret_basic and client_secret_post have one`,
    );
  const secret = newClientSecret();
  await c.env.DB.prepare("UPDATE clients SET secret_hash = ?, updated_at = ? WHERE client_id = ? AND tenant = ?")
    .bind(await hashClientSecret(secret), Date.now(), current.client_id, current.tenant)
    .run();
  await forgetEverywhere(c, current.client_id);
  return json({ ...publicClient(await loadClient(c, current.client_id)), client_secret: secret }, 200, {
    "Cache-Control": "no-store",
  });
}

export async function deleteClient(c: Context<AppEnv>): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const { meta } = await c.env.DB.prepare("DELETE FROM clients WHERE client_id = ? AND tenant = ?")
    .bind(id, c.get("config").TENANT)
    .run();
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
