import type { z } from "zod";
import { seal, unseal } from "../../../../durable-objects/contract/crypto";
import { policyFields } from "../../config/policy";

/**
 * Webhook endpoints as D1 `webhook_endpoints` holds them (schema/0011), read by op-mgmt and by the
 * stores that hand events over and deliver them. The signing secrets are sealed at rest under
 * KEY_ENCRYPTION_SECRET, bound to the endpoint's id.
 */
export interface WebhookEndpointRow {
  id: string;
  tenant: string;
  url: string;
  events: string;
  description: string | null;
  enabled: number;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_until: number | null;
  shard: string;
  consecutive_failures: number;
  failing_since: number | null;
  disabled_reason: string | null;
  created_at: number;
  updated_at: number;
}

const material = (keyEncryptionSecret: string) => `webhook-secret:${keyEncryptionSecret}`;

export const sealWebhookSecret = (keyEncryptionSecret: string, endpointId: string, secret: string) =>
  seal(material(keyEncryptionSecret), secret, endpointId);

/** The secrets a delivery is signed with now: the current one, and the previous one while it overlaps. */
export async function liveSecrets(
  keyEncryptionSecret: string,
  row: WebhookEndpointRow,
  now: number,
): Promise<string[]> {
  const current = await unseal(material(keyEncryptionSecret), row.secret_sealed, row.id);
  if (!current)
    throw new Error(`the secret of webhook endpoint ${row.id} cannot be unsealed with KEY_ENCRYPTION_SECRET`);
  const out = [current];
  if (row.previous_secret_sealed && (row.previous_until ?? 0) > now) {
    const previous = await unseal(material(keyEncryptionSecret), row.previous_secret_sealed, row.id);
    if (previous) out.push(previous);
  }
  return out;
}

/**
 * Why a URL may not receive webhooks, or null. `https` only in production (`http` to a loopback
 * address is allowed elsewhere, for local receivers); no credentials in it; no private, link-local or
 * otherwise internal address written as an IP literal (Workers cannot reach private networks, and
 * a name that resolves to one is refused by the platform), no `localhost` names in production.
 */
export function webhookUrlProblem(value: string, production: boolean): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "url must be an absolute URL";
  }
  if (value.length > 2000) return "url is too long";
  if (url.username || url.password) return "url must not carry credentials";
  if (url.hash) return "url must not have a fragment";
  const host = url.hostname
    .toLowerCase()
    .replace(/^\[|\]$/g, "")
    .replace(/\.$/, "");
  const loopback = host === "localhost" || host.endsWith(".localhost") || isLoopback(host);
  if (url.protocol === "http:") {
    if (production || !loopback) return "url must be https (http only to a loopback address outside production)";
  } else if (url.protocol !== "https:") return "url must be https";
  if (loopback) return production ? "url must not be a loopback address" : null;
  if (isInternal(host)) return "url must not be a private, link-local or reserved address";
  return null;
}

function ipv4(host: string): number[] | null {
  const parts = host.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return null;
  return parts.map(Number);
}

function isLoopback(host: string): boolean {
  const v4 = ipv4(host);
  return (v4 !== null && v4[0] === 127) || host === "::1";
}

function isInternal(host: string): boolean {
  const v4 = ipv4(host);
  if (v4) {
    const [a, b] = v4 as [number, number, number, number];
    return (
      a === 0 ||
      a === 10 ||
      (a === 100 && b >= 64 && b <= 127) ||
      (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      (a === 198 && (b === 18 || b === 19)) ||
      a >= 224
    );
  }
  if (!host.includes(":")) return false;
  const first = Number.parseInt(host.split(":")[0] || "0", 16);
  return (
    host.startsWith("::") || // unspecified, IPv4-mapped (::ffff:) and IPv4-compatible (::a.b.c.d) forms
    (first & 0xfe00) === 0xfc00 || // unique local fc00::/7
    (first & 0xffc0) === 0xfe80 || // link-local fe80::/10
    (first & 0xff00) === 0xff00 || // multicast ff00::/8
    host.startsWith("64:ff9b:") || // NAT64, an IPv4 address inside
    host.startsWith("2002:") // 6to4, an IPv4 address inside
  );
}

/** The delivery policy, from POLICY (validated by the Workers' config; read here without it). */
export interface WebhookPolicy {
  /** How long a message is retried before it is marked failed (s). */
  retry_window_seconds: number;
  /** Consecutive failed attempts after which an endpoint is disabled ... */
  disable_after_failures: number;
  /** ... once it has been failing at least this long (s). */
  disable_after_seconds: number;
  /** How long a delivery may take (ms). */
  timeout_ms: number;
}

/** The webhook keys of the policy, with their bounds and defaults as the Workers' config has them. */
const webhookPolicyFields = policyFields.pick({
  webhook_retry_window_seconds: true,
  webhook_disable_after_failures: true,
  webhook_disable_after_seconds: true,
  webhook_timeout_ms: true,
});

/** Parsed once per POLICY value (the store's env does not change while the object lives). */
const parsed = new Map<string, WebhookPolicy>();

export function webhookPolicy(env: { POLICY?: unknown }): WebhookPolicy {
  const text = typeof env.POLICY === "string" ? env.POLICY : "{}";
  const hit = parsed.get(text);
  if (hit) return hit;
  let p: z.output<typeof webhookPolicyFields>;
  try {
    p = webhookPolicyFields.parse(JSON.parse(text));
  } catch {
    // The Workers refuse a broken POLICY at start-up; the store keeps the defaults meanwhile.
    p = webhookPolicyFields.parse({});
  }
  const policy: WebhookPolicy = {
    retry_window_seconds: p.webhook_retry_window_seconds,
    disable_after_failures: p.webhook_disable_after_failures,
    disable_after_seconds: p.webhook_disable_after_seconds,
    timeout_ms: p.webhook_timeout_ms,
  };
  if (parsed.size > 16) parsed.clear();
  parsed.set(text, policy);
  return policy;
}
