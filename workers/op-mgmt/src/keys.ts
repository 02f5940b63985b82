import type { Context } from "hono";
import { log } from "../../../durable-objects/contract/log";
import type { Config } from "../../shared/config/config";
import { audit, recordAudit } from "../../shared/events/audit";
import { keyRing, rotateSigningKeys } from "../../shared/oauth/keys";
import type { Env } from "../../shared/platform/env";
import { json } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { type TenantRow, tenantFromRow, tenantView } from "../../shared/tenancy/tenants";

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

/** Tenants rotated per cron run at most: the rest are due at the next run (an hour later). */
export const ROTATIONS_PER_RUN = 100;

/**
 * The cron trigger: rotate the keys older than `key_rotation_days`, the default tenant's and each
 * active tenant's whose newest key is that old (issue 23: per tenant, by the same rotation).
 */
export async function scheduledRotation(env: Env, config: Config, now: number): Promise<void> {
  const olderThan = config.POLICY.key_rotation_days * 86_400_000;
  await rotateTenantKeys(env, config, now, olderThan);
  const { results } = await env.DB.prepare(
    `SELECT t.* FROM tenants t WHERE t.status = 'active' AND
       (SELECT MAX(k.created_at) FROM signing_keys k WHERE k.tenant = t.id AND k.private_jwk_sealed IS NOT NULL) < ?
     ORDER BY t.id LIMIT ?`,
  )
    .bind(now - olderThan, ROTATIONS_PER_RUN)
    .all<TenantRow>();
  for (const row of results)
    await rotateTenantKeys(env, tenantView(config, tenantFromRow(row), "path"), now, olderThan);
}

async function rotateTenantKeys(env: Env, config: Config, now: number, olderThan: number): Promise<void> {
  const result = await rotateSigningKeys(env, config, now, olderThan);
  if (!result.published.length) return;
  log("info", "signing keys rotated", { tenant: config.TENANT, ...result });
  await recordAudit(env, config, { kind: "key_rotation", detail: { trigger: "cron", ...result } });
}
