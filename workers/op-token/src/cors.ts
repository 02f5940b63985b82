import type { Context, Next } from "hono";
import type { Config } from "../../shared/config/config";
import type { Client } from "../../shared/oauth/clients";
import type { Env } from "../../shared/platform/env";
import type { AppEnv } from "../../shared/request/context";

/**
 * CORS for the token, userinfo, revocation and introspection endpoints: only origins a client
 * registered (`allowed_cors_origins`), never with credentials (tokens travel in headers and bodies,
 * never in cookies). A preflight names no client, so it passes when some client registered the
 * origin; the actual response carries `Access-Control-Allow-Origin` only if the client that made the
 * request registered it.
 */
export function cors(methods: string) {
  return async (c: Context<AppEnv>, next: Next): Promise<Response | undefined> => {
    const origin = c.req.header("origin");
    if (c.req.method === "OPTIONS") {
      if (!origin || !(await originRegistered(c.env, c.get("config"), origin)))
        return new Response(null, { status: 403, headers: { Vary: "Origin", "Cache-Control": "no-store" } });
      return new Response(null, {
        status: 204,
        headers: {
          "Access-Control-Allow-Origin": origin,
          "Access-Control-Allow-Methods": methods,
          // RFC 9449 §4.1: a browser client sends its proof in the DPoP header.
          "Access-Control-Allow-Headers": "Authorization, Content-Type, DPoP",
          "Access-Control-Max-Age": "600",
          Vary: "Origin",
          // CONTRACT §2: every answer of these endpoints is no-store (the preflight cache is Max-Age's).
          "Cache-Control": "no-store",
        },
      });
    }
    await next();
    c.res.headers.append("Vary", "Origin");
    if (origin && c.get("corsOrigins")?.includes(origin)) {
      c.res.headers.set("Access-Control-Allow-Origin", origin);
      c.res.headers.set("Access-Control-Expose-Headers", "WWW-Authenticate, Retry-After, DPoP-Nonce");
    }
    return undefined;
  };
}

/** Marks the client of this request, whose registered origins may read the response. */
export function corsClient(c: Context<AppEnv>, client: Client): void {
  c.set("corsOrigins", client.allowed_cors_origins);
}

const registered = new Map<string, { ok: boolean; until: number }>();

async function originRegistered(env: Env, config: Config, origin: string): Promise<boolean> {
  if (origin.length > 300) return false;
  const now = Date.now();
  // An origin is registered per tenant: a client of another tenant does not open this one (issue 23).
  const key = `${config.TENANT} ${origin}`;
  const hit = registered.get(key);
  if (hit && hit.until > now) return hit.ok;
  const row = await env.DB.prepare(
    "SELECT 1 AS ok FROM clients, json_each(clients.allowed_cors_origins) AS o WHERE clients.tenant = ? AND o.value = ? LIMIT 1",
  )
    .bind(config.TENANT, origin)
    .first();
  const ok = row !== null;
  if (config.POLICY.client_cache_seconds > 0) {
    if (registered.size > 10_000) registered.clear();
    registered.set(key, { ok, until: now + config.POLICY.client_cache_seconds * 1000 });
  }
  return ok;
}
