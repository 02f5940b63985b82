import type { Context } from "hono";
import type { AppEnv } from "../../shared/app";
import { hmac } from "../../shared/crypto";
import { OAuthError } from "../../shared/errors";
import { NO_STORE } from "../../shared/http";
import { routeKey } from "../../shared/sharding";
import { shard } from "../../shared/stores";

/**
 * The client's address as Cloudflare reports it (`CF-Connecting-IP`, set by the edge and not
 * forgeable through it). IPv6 clients are limited per /64, since one host usually holds a whole /64.
 * Without the header (local runs) every request shares one bucket.
 */
export function clientAddress(req: Request): string {
  const ip = req.headers.get("cf-connecting-ip")?.trim() ?? "";
  if (!ip.includes(":")) return ip || "unknown";
  const [head = "", tail = ""] = ip.split("::");
  const groups = [
    ...head.split(":").filter(Boolean),
    ...(ip.includes("::") ? ["::"] : []),
    ...tail.split(":").filter(Boolean),
  ];
  const full: string[] = [];
  for (const g of groups) {
    if (g === "::") for (let i = groups.length - 1; i < 8; i++) full.push("0");
    else full.push(g.toLowerCase());
  }
  return `${full.slice(0, 4).join(":")}::/64`;
}

/** Takes one unit of the caller's per-minute quota for `action`; throws 429 with Retry-After when spent. */
export async function takeIpQuota(c: Context<AppEnv>, action: "generate" | "verify"): Promise<void> {
  const config = c.get("config");
  const ipKey = await hmac(config.OTP_HMAC_SECRET, `ip:${clientAddress(c.req.raw)}`);
  const p = config.POLICY;
  const limits =
    action === "generate"
      ? { perMinute: p.ip_generate_per_minute, perHour: p.ip_generate_per_hour }
      : { perMinute: p.ip_verify_per_minute, perHour: p.ip_verify_per_hour };
  const result = await shard(c.env, "challenge", routeKey(config.SHARDS, "challenge", ipKey)).takeIpQuota(
    ipKey,
    action,
    limits,
    Date.now(),
  );
  if (!result.ok)
    throw new OAuthError("too_many_requests", "too many requests from this address", {
      retryAfter: result.retry_after,
      headers: NO_STORE,
    });
}
