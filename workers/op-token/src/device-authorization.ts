import type { Context } from "hono";
import { sha256 } from "../../../durable-objects/contract/crypto";
import { authenticateClient, type Client } from "../../shared/oauth/clients";
import { DEVICE_GRANT, deviceShard, formatUserCode, newUserCode } from "../../shared/oauth/device";
import { OAuthError } from "../../shared/platform/errors";
import { json, NO_STORE, readForm } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { takeIpQuota } from "../../shared/request/ip-quota";
import { issueId } from "../../shared/routing/ids";
import { shard } from "../../shared/routing/stores";
import { tenantScoped } from "../../shared/routing/tenant-route";
import { corsClient } from "./cors";

const OIDC_SCOPES = ["openid", "email", "profile", "offline_access"];

/**
 * `POST /device_authorization` (RFC 8628 §3.1, §3.2): a device (a CLI, a TV) asks to be signed in.
 * Client authentication as at the token endpoint (a public client sends its client_id). The request is
 * one row in the AuthCodeStore shard its user code hashes to; the device_code is an id placed on the
 * same shard, so the person's user code and the device's polls find the same row.
 */
export async function deviceAuthorization(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  // Each request stores a pending device request: bounded per client address first (issue 27 item 7).
  await takeIpQuota(c, "device_authorization");
  const form = await readForm(c.req.raw);
  const client = await authenticateClient(c.env, config, c.req.raw, form);
  corsClient(c, client);
  if (!client.grant_types.includes(DEVICE_GRANT))
    throw new OAuthError("unauthorized_client", "the client may not use the device authorization grant");
  const scope = deviceScope(client, form.scope);
  const p = config.POLICY;
  const now = Date.now();
  // A user code already pending on its shard is drawn again (about 1 in 10^10 per live request).
  for (let attempt = 0; attempt < 3; attempt++) {
    // Placed in the device's region; its first letter tells where (device.ts), wherever it is typed.
    const region = c.get("region");
    const userCode = newUserCode(config, region);
    const ref = deviceShard(config, userCode, region);
    const { id: deviceCode } = issueId(config, "device", { onto: ref });
    const stored = await shard(c.env, "code", ref).startDevice({
      deviceHash: await sha256(deviceCode),
      userCode: tenantScoped(config, userCode),
      clientId: client.client_id,
      scope,
      intervalMs: p.device_poll_interval_seconds * 1000,
      expiresAt: now + p.device_code_ttl_seconds * 1000,
    });
    if (!stored) continue;
    const shown = formatUserCode(userCode);
    return json(
      {
        device_code: deviceCode,
        user_code: shown,
        verification_uri: `${config.ISSUER}/device`,
        verification_uri_complete: `${config.ISSUER}/device?user_code=${shown}`,
        expires_in: p.device_code_ttl_seconds,
        interval: p.device_poll_interval_seconds,
      },
      200,
      NO_STORE,
    );
  }
  throw new OAuthError("temporarily_unavailable", "no free user code, retry", { retryAfter: 1, status: 503 });
}

/**
 * The scope asked for (RFC 8628 §3.1; without one, every scope the client registered), within the
 * OIDC scopes the client registered; `openid` is required.
 */
function deviceScope(client: Client, asked: string | undefined): string {
  const allowed = new Set(client.scope.split(" "));
  const requested = (asked ?? client.scope).split(" ").filter(Boolean);
  if (!requested.includes("openid")) throw new OAuthError("invalid_scope", "scope must include openid");
  const scopes = [...new Set(requested)].filter((s) => OIDC_SCOPES.includes(s) && allowed.has(s));
  if (!scopes.includes("openid")) throw new OAuthError("invalid_scope", "the client may not request openid");
  // OIDC Core §11: offline_access only for a client that may refresh.
  return scopes.filter((s) => s !== "offline_access" || client.grant_types.includes("refresh_token")).join(" ");
}
