import type { Context } from "hono";
import { hmac } from "../../../durable-objects/contract/crypto";
import { OAuthError } from "../platform/errors";
import { NO_STORE } from "../platform/http";
import type { AppEnv } from "./context";

/**
 * The client's address as Cloudflare reports it (`CF-Connecting-IP`, set by the edge and not
 * forgeable through it), as the bucket a quota counts in. IPv6 clients are grouped by prefix: a /64 by
 * default, since one host usually holds a whole /64; code guessing (verify) by the /48 a site is
 * usually given, so one site cannot spread guesses over its 65,536 /64s. Without the header (local
 * runs) every request shares one bucket.
 */
export function clientAddress(req: Request, ipv6PrefixBits: 48 | 64 = 64): string {
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
  return `${full.slice(0, ipv6PrefixBits / 16).join(":")}::/${ipv6PrefixBits}`;
}

/**
 * The limit every Rate Limiting binding of op-auth declares (`simple.limit` in its wrangler.toml). The
 * binding's limit is fixed at deploy time, so the policy's own number is applied as a weight: each
 * request adds ceil(SCALE / limit), and the binding refuses once the sum reaches SCALE. That admits
 * exactly `limit` requests a window for any limit up to sqrt(SCALE) (31,622), and at most `limit`
 * above it, so POLICY stays the one place the quota is set.
 */
export const RATE_LIMIT_SCALE = 1_000_000_000;
/** The binding's window (`simple.period`): the binding offers 10 or 60 seconds. */
export const RATE_LIMIT_PERIOD_SECONDS = 60;

/**
 * Takes one unit of the caller's per-minute quota for `action` from Cloudflare's Rate Limiting
 * binding (a counter local to the Cloudflare location, no Durable Object); throws 429 with
 * Retry-After when spent. What this bound gives up against a per-IP Durable Object, and what keeps
 * the per-address bounds, is in docs/security.md.
 */
export async function takeIpQuota(
  c: Context<AppEnv>,
  action: "generate" | "verify" | "device" | "device_authorization",
): Promise<void> {
  const config = c.get("config");
  const p = config.POLICY;
  // A device's user code (RFC 8628) is a guess like a one-time code: the verify binding and quota, its
  // own bucket. A device's request for one (op-token) has a binding and quota of its own (issue 27 item 7).
  const [limiter, perMinute] =
    action === "generate"
      ? [c.env.IP_GENERATE_LIMIT, p.ip_generate_per_minute]
      : action === "device_authorization"
        ? [c.env.IP_DEVICE_AUTHORIZATION_LIMIT, p.ip_device_authorization_per_minute]
        : [c.env.IP_VERIFY_LIMIT, p.ip_verify_per_minute];
  if (!limiter) throw new Error(`the Rate Limiting binding for ${action} is missing from the Worker's wrangler.toml`);
  // Cloudflare's edge sets the header on every request it forwards; in production its absence means
  // the request did not come through the edge (another Worker, a misrouted hop), and one shared
  // "unknown" bucket would let it spend everyone's quota. Refused there; local runs share the bucket.
  if (!c.req.header("cf-connecting-ip") && config.ENVIRONMENT === "production")
    throw new OAuthError("invalid_request", "the client address is missing", { headers: NO_STORE });
  const bucket = clientAddress(c.req.raw, action === "generate" || action === "device_authorization" ? 64 : 48);
  const success = await weighedLimit(limiter, `${action}:${bucket}`, perMinute);
  if (!success)
    throw new OAuthError("too_many_requests", "too many requests from this address", {
      // The binding does not say when its window ends; windows are at most this long.
      retryAfter: RATE_LIMIT_PERIOD_SECONDS,
      headers: NO_STORE,
      notice: "error.too_many_tries",
    });
}

/** Set once an isolate's binding has refused `delta` (an emulator that predates it). */
let perCallLimit = false;

/**
 * One weighed request against the binding. Miniflare before 5.20261117 (the one inside
 * @cloudflare/vitest-plugin 1.5.0) rejects `delta` but takes the limit and period per call, which
 * enforces the same quota there; Cloudflare and newer Miniflare take `delta`.
 */
export async function weighedLimit(limiter: RateLimit, key: string, perMinute: number): Promise<boolean> {
  if (!perCallLimit) {
    try {
      return (await limiter.limit({ key, delta: Math.ceil(RATE_LIMIT_SCALE / perMinute) })).success;
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith("bad rate limit options")) throw err;
      perCallLimit = true;
    }
  }
  const options = { key, limit: perMinute, period: RATE_LIMIT_PERIOD_SECONDS } as RateLimitOptions;
  return (await limiter.limit(options)).success;
}

/**
 * Where a guess (an email code, a device's user code) comes from, as the per-address limits in the
 * stores count it: the client's address (an IPv6 /48, as the verify quota groups it), under an HMAC so
 * no store holds an address.
 */
export function sourceKeyOf(c: Context<AppEnv>): Promise<string> {
  const secret = c.get("config").OTP_HMAC_SECRET;
  const address = clientAddress(c.req.raw, 48);
  // A login's generate and verify come from one address, usually to one isolate: its key is made once
  // (an HMAC), kept per secret, the whole map dropped when full. A failed HMAC is not kept.
  let keys = sourceKeys.get(secret);
  if (!keys) {
    keys = new Map();
    sourceKeys.set(secret, keys);
  }
  const hit = keys.get(address);
  if (hit) return hit;
  if (keys.size >= SOURCE_KEYS_MAX) keys.clear();
  const made = hmac(secret, `source:${address}`);
  keys.set(address, made);
  made.catch(() => keys.delete(address));
  return made;
}

const sourceKeys = new Map<string, Map<string, Promise<string>>>();
const SOURCE_KEYS_MAX = 4096;
