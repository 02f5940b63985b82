import type { Context } from "hono";
import { keyRing } from "../../shared/oauth/keys";
import type { AppEnv } from "../../shared/request/context";

/**
 * `GET /jwks.json` (OIDC Discovery `jwks_uri`): the public keys, current and next, each with kid, alg
 * and use. Public and cacheable for five minutes: a new key is published `key_publish_lead_seconds`
 * (15 min) before it signs, longer than any cache here.
 */
export async function jwks(c: Context<AppEnv>): Promise<Response> {
  const ring = await keyRing(c.env, c.get("config"));
  return new Response(JSON.stringify(ring.jwks), {
    headers: {
      "Content-Type": "application/jwk-set+json",
      "Access-Control-Allow-Origin": "*",
      "Cache-Control": "public, max-age=300",
    },
  });
}

/** Any origin may read the keys (CONTRACT §1). */
export function jwksPreflight(): Response {
  return new Response(null, {
    status: 204,
    headers: { "Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET" },
  });
}
