import type { Config } from "./config";
import { sha256, timingSafeEqualString } from "./crypto";
import type { Env } from "./env";
import { OAuthError } from "./errors";

export type AuthMethod = "none" | "client_secret_basic" | "client_secret_post";

export interface Client {
  client_id: string;
  client_name: string;
  token_endpoint_auth_method: AuthMethod;
  secret_hash: string | null;
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  grant_types: string[];
  scope: string;
  id_token_signed_response_alg: "RS256" | "ES256";
  allowed_cors_origins: string[];
  created_at: number;
  updated_at: number;
}

interface ClientRow {
  client_id: string;
  client_name: string;
  token_endpoint_auth_method: AuthMethod;
  secret_hash: string | null;
  redirect_uris: string;
  post_logout_redirect_uris: string;
  grant_types: string;
  scope: string;
  id_token_signed_response_alg: "RS256" | "ES256";
  allowed_cors_origins: string;
  created_at: number;
  updated_at: number;
}

export function clientFromRow(row: ClientRow): Client {
  return {
    ...row,
    redirect_uris: JSON.parse(row.redirect_uris) as string[],
    post_logout_redirect_uris: JSON.parse(row.post_logout_redirect_uris) as string[],
    grant_types: JSON.parse(row.grant_types) as string[],
    allowed_cors_origins: JSON.parse(row.allowed_cors_origins) as string[],
  };
}

/**
 * Clients are read from D1, and kept per isolate for `client_cache_seconds` (30 s by default; 0 turns
 * the cache off). op-mgmt forgets a changed client in its own isolate and in the op-auth and op-token
 * isolates its service bindings reach; other isolates' copies last until they expire.
 */
const cache = new Map<string, { client: Client | null; until: number }>();

export async function findClient(env: Env, config: Config, clientId: string): Promise<Client | null> {
  if (!clientId || clientId.length > 128) return null;
  const now = Date.now();
  const hit = cache.get(clientId);
  if (hit && hit.until > now) return hit.client;
  const row = await env.DB.prepare("SELECT * FROM clients WHERE client_id = ?").bind(clientId).first<ClientRow>();
  const client = row ? clientFromRow(row) : null;
  if (config.POLICY.client_cache_seconds > 0) {
    if (cache.size > 10_000) cache.clear();
    cache.set(clientId, { client, until: now + config.POLICY.client_cache_seconds * 1000 });
  }
  return client;
}

export function forgetClient(clientId: string): void {
  cache.delete(clientId);
}

export async function hashClientSecret(secret: string): Promise<string> {
  // Client secrets are 256-bit random values, so a fast hash is enough; no password KDF is needed.
  return sha256(`client-secret:${secret}`);
}

const basicChallenge = 'Basic realm="keyway", charset="UTF-8"';

function invalidClient(description = "client authentication failed"): OAuthError {
  // RFC 6749 §5.2: 401, with the challenge of the scheme the token endpoint takes (Basic), whichever
  // method the client tried.
  return new OAuthError("invalid_client", description, { status: 401, wwwAuthenticate: basicChallenge });
}

/**
 * Authenticates the client of a token, revocation or introspection request (RFC 6749 §2.3).
 * Exactly one method may be used. A confidential client (registered `client_secret_basic` or
 * `client_secret_post`) proves its secret by either method, as RFC 6749 §2.3.1 offers both and
 * OIDC client libraries differ in their default; a public client (`none`) sends no secret.
 */
export async function authenticateClient(
  env: Env,
  config: Config,
  req: Request,
  form: Record<string, string>,
): Promise<Client> {
  const header = req.headers.get("authorization");
  let clientId: string | undefined;
  let secret: string | undefined;
  let method: AuthMethod;
  if (header !== null) {
    const m = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(header.trim());
    if (!m) throw invalidClient("malformed Authorization header");
    let decoded: string;
    try {
      decoded = atob(m[1] as string);
    } catch {
      throw invalidClient("malformed Authorization header");
    }
    const colon = decoded.indexOf(":");
    if (colon < 0) throw invalidClient("malformed Authorization header");
    try {
      // RFC 6749 §2.3.1: id and secret are form-urlencoded before Base64.
      clientId = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, " "));
      secret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, " "));
    } catch {
      throw invalidClient("malformed Authorization header");
    }
    if (form.client_secret !== undefined)
      throw new OAuthError("invalid_request", "use one client authentication method");
    if (form.client_id !== undefined && form.client_id !== clientId) throw invalidClient();
    method = "client_secret_basic";
  } else if (form.client_secret !== undefined) {
    clientId = form.client_id;
    secret = form.client_secret;
    method = "client_secret_post";
  } else {
    clientId = form.client_id;
    method = "none";
  }
  if (!clientId) throw invalidClient("client_id is required");
  let client = await findClient(env, config, clientId);
  if (!client) throw invalidClient();
  if (method !== "none") {
    const presented = await hashClientSecret(secret ?? "");
    const proves = (c: Client) => c.secret_hash !== null && timingSafeEqualString(presented, c.secret_hash);
    // A cached registration may predate a new secret: a secret that does not match is checked
    // against D1 once more, so a rotated secret works at once in every isolate.
    if (!proves(client) && config.POLICY.client_cache_seconds > 0) {
      forgetClient(clientId);
      client = await findClient(env, config, clientId);
      if (!client) throw invalidClient();
    }
    if (!proves(client)) throw invalidClient();
  }
  if ((client.token_endpoint_auth_method === "none") !== (method === "none")) throw invalidClient();
  return client;
}

/** RFC 8252 §7.3: for loopback IP redirect URIs any port is allowed; everything else matches exactly. */
export function redirectUriAllowed(client: Client, uri: string): boolean {
  if (client.redirect_uris.includes(uri)) return true;
  const presented = loopbackParts(uri);
  if (!presented) return false;
  return client.redirect_uris.some((registered) => {
    const r = loopbackParts(registered);
    return r !== null && r.rest === presented.rest && r.host === presented.host;
  });
}

function loopbackParts(uri: string): { host: string; rest: string } | null {
  const m = /^http:\/\/(127\.0\.0\.1|\[::1\])(?::(\d{1,5}))?(\/[^#]*)?$/.exec(uri);
  // A port past 65535 is no URL at all (URL parsing would throw later): not a loopback redirect.
  if (!m || Number(m[2] ?? 0) > 65_535) return null;
  return { host: m[1] as string, rest: m[3] ?? "" };
}
