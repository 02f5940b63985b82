import { env } from "cloudflare:test";
import { expect } from "vitest";

/**
 * Documents on the test's HTTP peer (test/support/global-setup.ts), at a loopback address, which
 * Keyway fetches outside production: a sector identifier document, a JWK Set at a jwks_uri, a
 * request object at a request_uri.
 */
const port = () => (env as unknown as { TEST_MAIL_PEERS: { httpPort: number } }).TEST_MAIL_PEERS.httpPort;

let counter = 0;
/** A name no other test uses. */
export const documentName = (prefix: string) => `${prefix}-${++counter}-${Math.random().toString(36).slice(2, 8)}`;

/** The URL the peer serves `name` at (404 until published). */
export const documentUrl = (name: string) => `http://127.0.0.1:${port()}/documents/${name}`;

/** Publishes (or replaces) `name`: a string as it is, anything else as JSON. Returns its URL. */
export async function publishDocument(name: string, value: unknown, type = "application/json"): Promise<string> {
  const res = await fetch(documentUrl(name), {
    method: "PUT",
    headers: { "Content-Type": type },
    body: typeof value === "string" ? value : JSON.stringify(value),
  });
  expect(res.status).toBe(200);
  return documentUrl(name);
}

/** How many times the peer served `name` (a GET each). */
export async function documentFetches(name: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port()}/document-fetches/${name}`);
  return ((await res.json()) as { fetches: number }).fetches;
}
