import type { Config } from "../config/config";
import { OAuthError } from "../platform/errors";

/**
 * Resource indicators (RFC 8707): a client names the API a token is for, and the token's `aud` is
 * that API, so a token stolen from one resource server is refused by the others. A client may ask only
 * for the resources registered for it (`clients.resources`); anything else is `invalid_target` (§2).
 */

/** At most this many `resource` values in one request, and registered for one client. */
export const MAX_RESOURCES = 10;

/**
 * RFC 8707 §2: an absolute URI, no fragment. A query is allowed (SHOULD NOT, not MUST NOT). Also used
 * by the admin API to validate what a client registers.
 */
export function isResourceIndicator(value: string): boolean {
  if (value.length === 0 || value.length > 2000 || /\s/.test(value) || value.includes("#")) return false;
  const url = URL.parse(value);
  return url !== null && /^[a-z][a-z0-9+.-]*:$/i.test(url.protocol);
}

const invalidTarget = (description: string, redirect?: { uri: string; state?: string | undefined }) =>
  new OAuthError("invalid_target", description, redirect ? { redirect } : {});

/**
 * The `resource` values of a request (the form parser keeps repeated ones as a JSON array, http.ts),
 * each well formed. null when none was sent.
 */
export function parseResources(
  raw: string | undefined,
  redirect?: { uri: string; state?: string | undefined },
): string[] | null {
  if (raw === undefined) return null;
  const values = JSON.parse(raw) as string[];
  if (values.length > MAX_RESOURCES) throw invalidTarget(`at most ${MAX_RESOURCES} resource values`, redirect);
  for (const v of values)
    if (!isResourceIndicator(v)) throw invalidTarget("resource must be an absolute URI without a fragment", redirect);
  return [...new Set(values)];
}

/** The `resource` values of a request, each one the client (or the grant) may ask for. null when none was sent. */
export function requestedResources(
  raw: string | undefined,
  allowed: readonly string[],
  redirect?: { uri: string; state?: string | undefined },
): string[] | null {
  const values = parseResources(raw, redirect);
  if (!values) return null;
  const notAllowed = values.filter((v) => !allowed.includes(v));
  if (notAllowed.length)
    throw invalidTarget(`the client may not request a token for ${notAllowed.join(" ")}`, redirect);
  return values;
}

/** The userinfo endpoint's audience: where a token for a person, and for nothing else, is used. */
export function userinfoAudience(config: Config): string {
  return `${config.ISSUER}/userinfo`;
}

/**
 * A person's access token: for the resources granted, and for userinfo beside them (the `openid`
 * scope entitles the client to the person's claims there). Without resources, userinfo alone.
 */
export function personTokenAudience(config: Config, resources: readonly string[] | undefined): string | string[] {
  return resources?.length ? [...resources, userinfoAudience(config)] : userinfoAudience(config);
}

/** A client's own token: for the resources asked for; without any, the issuer's userinfo audience as before. */
export function clientTokenAudience(config: Config, resources: readonly string[] | null): string | string[] {
  if (!resources?.length) return userinfoAudience(config);
  return resources.length === 1 ? (resources[0] as string) : [...resources];
}
