/**
 * Standard Webhooks signatures (standardwebhooks.com; ../shared/CONTRACT.md §8): the secret is
 * `whsec_` and the base64 of its key bytes; each message carries `webhook-id`, `webhook-timestamp`
 * (seconds) and `webhook-signature: v1,<base64 HMAC-SHA-256 over "<id>.<timestamp>.<body>">`, several
 * space-separated while a rotated secret overlaps the new one. Any Standard Webhooks verifier accepts it.
 */

import { base64urlDecode } from "../../../../durable-objects/contract/crypto";

const PREFIX = "whsec_";

const toBase64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));

/** A new signing secret: 32 random bytes (the spec asks for 24 to 64). */
export function newWebhookSecret(): string {
  return `${PREFIX}${toBase64(crypto.getRandomValues(new Uint8Array(32)))}`;
}

/** HMAC keys imported once per isolate (a queue signs every message of an endpoint with the same one). */
const keys = new Map<string, Promise<CryptoKey>>();

function hmacKey(secret: string): Promise<CryptoKey> {
  let key = keys.get(secret);
  if (!key) {
    if (!secret.startsWith(PREFIX)) throw new Error("a webhook secret starts with whsec_");
    key = crypto.subtle.importKey(
      "raw",
      // Standard base64; the decoder takes it as well as base64url.
      base64urlDecode(secret.slice(PREFIX.length)),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
    if (keys.size > 1_000) keys.clear();
    keys.set(secret, key);
  }
  return key;
}

async function webhookSignature(secret: string, id: string, timestamp: number, body: string): Promise<string> {
  const key = await hmacKey(secret);
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${id}.${timestamp}.${body}`));
  return `v1,${toBase64(new Uint8Array(mac))}`;
}

/** The headers of one delivery: one signature per live secret (the new one first). */
export async function webhookHeaders(
  secrets: string[],
  id: string,
  timestamp: number,
  body: string,
): Promise<Record<string, string>> {
  const signatures = await Promise.all(secrets.map((s) => webhookSignature(s, id, timestamp, body)));
  return {
    "content-type": "application/json",
    "user-agent": "Keyway-Webhooks/1",
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": signatures.join(" "),
  };
}
