import type { Context } from "hono";
import type { AppEnv } from "../../shared/app";
import { audit, recordAudit } from "../../shared/audit";
import type { Config } from "../../shared/config";
import type { Env } from "../../shared/env";
import { json } from "../../shared/http";
import { keyRing, rotateSigningKeys } from "../../shared/keys";
import { log } from "../../shared/log";

/** `GET /admin/v1/keys`: the published keys and which one signs, per algorithm. */
export async function listKeys(c: Context<AppEnv>): Promise<Response> {
  const ring = await keyRing(c.env, c.get("config"));
  return json({
    signing: { RS256: ring.signing.RS256.kid, ES256: ring.signing.ES256.kid },
    keys: ring.jwks.keys,
  });
}

/** `POST /admin/v1/keys/rotate`: publish the next key now; it signs after the publish lead. */
export async function rotateKeys(c: Context<AppEnv>): Promise<Response> {
  const result = await rotateSigningKeys(c.env, c.get("config"), Date.now());
  audit(c, { kind: "key_rotation", detail: { trigger: "admin", ...result } });
  return json(result);
}

/** The cron trigger: rotate keys older than `key_rotation_days`. */
export async function scheduledRotation(env: Env, config: Config, now: number): Promise<void> {
  const result = await rotateSigningKeys(env, config, now, config.POLICY.key_rotation_days * 86_400_000);
  if (result.published.length) log("info", "signing keys rotated", { ...result });
  if (result.published.length)
    await recordAudit(env, config, { kind: "key_rotation", detail: { trigger: "cron", ...result } });
}
