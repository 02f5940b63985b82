import { sha256 } from "../../../durable-objects/contract/crypto";
import type { SessionInfo } from "../../../durable-objects/contract/verbs";
import type { Config } from "../../shared/config/config";
import { isRevoked } from "../../shared/oauth/tokens";
import { findUser, type User, userStillValid } from "../../shared/people/users";
import type { Env } from "../../shared/platform/env";
import { cookieName, getCookie } from "../../shared/platform/http";
import { type ParsedId, parseId } from "../../shared/routing/ids";
import { shard } from "../../shared/routing/stores";

export const TX_COOKIE = "kw_tx";
export const SESSION_COOKIE = "kw_session";

export interface BrowserSession extends SessionInfo {
  id: string;
  hash: string;
}

/** The session id the request's cookie carries for this tenant, if one parses (before any storage call). */
export function sessionCookie(config: Config, req: Request): ParsedId | null {
  const value = getCookie(req, cookieName(SESSION_COOKIE, config), (v) => parseId(config, "session", v) !== null);
  return parseId(config, "session", value);
}

/** The session named by the request's session cookie, if it is live. */
export async function currentSession(env: Env, config: Config, req: Request): Promise<BrowserSession | null> {
  const parsed = sessionCookie(config, req);
  if (!parsed) return null;
  const hash = await sha256(parsed.id);
  const info = await shard(env, "session", parsed.ref).session(hash, Date.now());
  return info ? { ...info, id: parsed.id, hash } : null;
}

/**
 * Whether a session still stands beyond its own row: its user neither deleted nor revoked since it
 * began, and its sid not marked by a logout by id_token_hint alone, which marks the sid without the
 * cookie to delete the row (CONTRACT §3 logout; checklist E3).
 */
export async function sessionStillStands(env: Env, config: Config, session: SessionInfo): Promise<boolean> {
  return (await standingUser(env, config, session)) !== null;
}

/** The session's user, when the session still stands (sessionStillStands); null when it does not. */
export async function standingUser(env: Env, config: Config, session: SessionInfo): Promise<User | null> {
  const [user, revoked] = await Promise.all([
    findUser(env, config.TENANT, session.sub),
    isRevoked(env, config, { sid: session.sid }),
  ]);
  return !revoked && userStillValid(user, session.auth_time) ? user : null;
}
