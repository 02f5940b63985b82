import { hmac, sealDeterministic, unseal } from "../../../durable-objects/contract/crypto";
import type { Config } from "../config/config";
import type { Client } from "./clients";

/**
 * Subject identifiers (OIDC Core §8). A `public` client sees a user's id as `sub`; a `pairwise` one
 * (§8.1) a value of its own sector: an HMAC, under PAIRWISE_SECRET, of the tenant, the sector and the
 * user's id, stable across that user's logins and different at every other sector, so two clients of
 * different sectors cannot tell they see the same person. Everything else inside Keyway keeps the
 * user's id; only what a pairwise client sees is mapped, here.
 */

/** The sector of a pairwise client: its `sector_identifier_uri`'s host, else its redirect URIs' one host (§8.1). */
export function sectorOf(client: Pick<Client, "sector_identifier_uri" | "redirect_uris">): string | null {
  const host = (u: string) => URL.parse(u)?.host ?? null;
  if (client.sector_identifier_uri) return host(client.sector_identifier_uri);
  const hosts = new Set(client.redirect_uris.map(host));
  return hosts.size === 1 && !hosts.has(null) ? ([...hosts][0] as string) : null;
}

/** The `sub` the client sees for the user. */
export async function subjectFor(config: Config, client: Client, userId: string): Promise<string> {
  if (client.subject_type !== "pairwise") return userId;
  const sector = sectorOf(client) ?? client.client_id;
  return hmac(config.PAIRWISE_SECRET, `${config.TENANT}\0${sector}\0${userId}`);
}

/**
 * A pairwise client's access token carries the user's id sealed (`uid`), bound to its `jti`, so
 * userinfo and introspection find the user without a lookup table; deterministic, as a refresh retry
 * must sign the same bytes. Absent for a public client, whose `sub` is the user's id.
 */
export function sealUserId(config: Config, userId: string, jti: string): Promise<string> {
  return sealDeterministic(config.PAIRWISE_SECRET, userId, `uid:${jti}`);
}

/** The user an access token is for: its sealed `uid`, or its `sub`. Null for a `uid` that does not open. */
export async function userIdOf(
  config: Config,
  claims: { sub: string; jti: string; uid?: unknown },
): Promise<string | null> {
  if (claims.uid === undefined) return claims.sub;
  return typeof claims.uid === "string" ? unseal(config.PAIRWISE_SECRET, claims.uid, `uid:${claims.jti}`) : null;
}
