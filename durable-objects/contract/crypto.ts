/** Small crypto helpers over WebCrypto. Keys are imported once per isolate and cached. */

const encoder = new TextEncoder();

/** `Uint8Array.prototype.toBase64` (TC39 Uint8Array to/from base64; in workerd's V8, not yet in TypeScript's lib). */
type Base64Bytes = Uint8Array & { toBase64(options: { alphabet: "base64url"; omitPadding: boolean }): string };

export function base64url(bytes: ArrayBuffer | Uint8Array): string {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  // The runtime's encoder: about four times faster than building a binary string for btoa, and every
  // seal, id and hash a login makes passes through here.
  return (u8 as Base64Bytes).toBase64({ alphabet: "base64url", omitPadding: true });
}

/** `Uint8Array.fromBase64` (the same TC39 proposal as `toBase64`). */
const fromBase64 = (
  Uint8Array as unknown as {
    fromBase64(value: string, options: { alphabet: "base64" | "base64url"; lastChunkHandling: "loose" }): Uint8Array;
  }
).fromBase64;

/**
 * base64url, padded or not; the standard alphabet's `+` and `/` are taken too, as `atob` took them.
 * Throws on anything else, as `atob` did (callers treat a throw as a malformed value). The runtime's
 * decoder: no binary string, no loop over it.
 */
export function base64urlDecode(value: string): Uint8Array {
  if (!value.includes("+") && !value.includes("/"))
    return fromBase64(value, { alphabet: "base64url", lastChunkHandling: "loose" });
  return fromBase64(value.replace(/-/g, "+").replace(/_/g, "/"), { alphabet: "base64", lastChunkHandling: "loose" });
}

/** `bytes` of CSPRNG output, base64url. 32 bytes gives 256 bits. */
export function randomToken(bytes = 32): string {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

/** The base64url characters in ASCII order, so strings of them sort as the numbers they encode. */
const SORTED_64 = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";

/**
 * 22 base64url characters that sort by creation time (like UUIDv7): the time in milliseconds in 8
 * characters, then 84 random bits. Ids made from it are appended at the end of their shard's key
 * order instead of at random places, which keeps a large table's inserts cheap (issue 24: entities).
 * The time it was made can be read from it.
 */
export function timeOrderedToken(now = Date.now()): string {
  let out = "";
  let t = Math.floor(now);
  for (let i = 0; i < 8; i++) {
    out = (SORTED_64[t % 64] as string) + out;
    t = Math.floor(t / 64);
  }
  for (const b of crypto.getRandomValues(new Uint8Array(14))) out += SORTED_64[b & 63];
  return out;
}

/** A uniformly distributed string of `digits` decimal digits (rejection sampling, no modulo bias). */
export function randomDigits(digits: number): string {
  const limit = 10 ** digits;
  const ceiling = Math.floor(0x1_0000_0000 / limit) * limit;
  const buf = new Uint32Array(1);
  for (;;) {
    crypto.getRandomValues(buf);
    const v = buf[0] as number;
    if (v < ceiling) return String(v % limit).padStart(digits, "0");
  }
}

export async function sha256(value: string): Promise<string> {
  return base64url(await crypto.subtle.digest("SHA-256", encoder.encode(value)));
}

const hmacKeys = new Map<string, Promise<CryptoKey>>();

function hmacKey(secret: string): Promise<CryptoKey> {
  let key = hmacKeys.get(secret);
  if (!key) {
    key = crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    hmacKeys.set(secret, key);
  }
  return key;
}

export async function hmac(secret: string, message: string): Promise<string> {
  return base64url(await crypto.subtle.sign("HMAC", await hmacKey(secret), encoder.encode(message)));
}

/** Constant-time comparison of two strings (workerd's timingSafeEqual needs equal lengths). */
export function timingSafeEqualString(a: string, b: string): boolean {
  const ab = encoder.encode(a);
  const bb = encoder.encode(b);
  if (ab.byteLength !== bb.byteLength) return false;
  return crypto.subtle.timingSafeEqual(ab, bb);
}

const aesKeys = new Map<string, Promise<CryptoKey>>();

/** The AES-GCM key of `material`, derived and imported once per isolate (sealing is on every login step). */
function aesKey(material: string): Promise<CryptoKey> {
  let key = aesKeys.get(material);
  if (!key) {
    key = crypto.subtle
      .digest("SHA-256", encoder.encode(`keyway-seal:${material}`))
      .then((raw) => crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]));
    // Materials are server secrets (a few per isolate) or one-off refresh tokens: bound the map.
    if (aesKeys.size > 1_000) aesKeys.clear();
    aesKeys.set(material, key);
  }
  return key;
}

/**
 * Seals `plaintext` under a key derived from `material` (a high-entropy secret or token). `boundTo`,
 * when given, is authenticated but not encrypted (AES-GCM additional data): the sealed value opens only
 * next to the same string, e.g. the id it travels with.
 */
export async function seal(material: string, plaintext: string, boundTo?: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ct = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, ...(boundTo !== undefined ? { additionalData: encoder.encode(boundTo) } : {}) },
    await aesKey(material),
    encoder.encode(plaintext),
  );
  return `${base64url(iv)}.${base64url(ct)}`;
}

/**
 * `seal`, deterministic: the IV is a MAC of `boundTo` and the plaintext under a key apart from the
 * cipher's (the SIV construction), so the same input seals to the same bytes, as a token a retry must
 * reproduce needs, and two different plaintexts never share an IV.
 */
export async function sealDeterministic(material: string, plaintext: string, boundTo: string): Promise<string> {
  const iv = base64urlDecode(await hmac(`keyway-siv:${material}`, `${boundTo}\0${plaintext}`)).slice(0, 12);
  const ct = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: encoder.encode(boundTo) },
    await aesKey(material),
    encoder.encode(plaintext),
  );
  return `${base64url(iv)}.${base64url(ct)}`;
}

export async function unseal(material: string, sealed: string, boundTo?: string): Promise<string | null> {
  const [iv, ct, extra] = sealed.split(".");
  if (!iv || !ct || extra !== undefined) return null;
  try {
    const pt = await crypto.subtle.decrypt(
      {
        name: "AES-GCM",
        iv: base64urlDecode(iv),
        ...(boundTo !== undefined ? { additionalData: encoder.encode(boundTo) } : {}),
      },
      await aesKey(material),
      base64urlDecode(ct),
    );
    return new TextDecoder().decode(pt);
  } catch {
    return null;
  }
}
