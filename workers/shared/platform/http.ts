import { invalidRequest, OAuthError } from "./errors";

export const MAX_BODY_BYTES = 64 * 1024;

const fatalUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/** What the app asked of a request's body: how long it may take to arrive, and whom to tell when it has. */
interface BodyWatch {
  deadlineMs: number;
  /** Called once the body is read (or refused): the request starts counting as in flight. */
  onRead: () => void;
}
const bodyWatches = new WeakMap<Request, BodyWatch>();

/** Registers `req`'s body with the app's admission control (app.ts). */
export function watchBody(req: Request, watch: BodyWatch): void {
  bodyWatches.set(req, watch);
}

/** A body read a chunk at a time (`streamingBody`): `null` at its end. */
export interface StreamedBody {
  /** The next chunk: valid until the next read (its memory is reused), so copy what must outlive it. */
  read(): Promise<Uint8Array | null>;
  /** Stops reading (what the sender still sends is dropped); harmless once the body has ended. */
  cancel(): Promise<void>;
}

/**
 * For a handler that streams its body instead of reading it whole (an NDJSON import): the request
 * counts as in flight from now, and the handler keeps its own pace between reads. The body is bounded
 * as readBodyText bounds a whole one, scaled to its size:
 * - 413 past `maxBytes`, on Content-Length before reading, and while reading;
 * - 408 when the sender falls behind: every 64 KB (MAX_BODY_BYTES, a whole body elsewhere) must
 *   arrive within the app's deadline, the same as a whole body elsewhere. The time spent waiting for
 *   the sender draws on a budget of one deadline, which each 64 KB received refills pro rata (never
 *   past one deadline); the handler's own work between reads never counts. So no read waits longer
 *   than the deadline, and a sender slower than 64 KB a deadline runs out.
 */
export function streamingBody(req: Request, maxBytes: number): StreamedBody | null {
  const watch = bodyWatches.get(req);
  bodyWatches.delete(req);
  watch?.onRead();
  const declared = req.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) throw tooLarge(maxBytes);
  if (!req.body) return null;
  const reader = chunkReader(req.body);
  const deadlineMs = watch?.deadlineMs ?? Number.POSITIVE_INFINITY;
  let budgetMs = deadlineMs;
  let size = 0;
  const cancel = () => reader.cancel().catch(() => undefined);
  return {
    cancel,
    async read() {
      const started = Date.now();
      let timer: ReturnType<typeof setTimeout> | null = null;
      const late = Number.isFinite(budgetMs)
        ? new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(tooSlow()), Math.max(0, budgetMs));
          })
        : null;
      let next: ReadableStreamReadResult<Uint8Array>;
      try {
        next = await (late ? Promise.race([reader.read(), late]) : reader.read());
      } catch (err) {
        await cancel();
        throw err;
      } finally {
        if (timer !== null) clearTimeout(timer);
      }
      if (next.done) return null;
      size += next.value.byteLength;
      if (size > maxBytes) {
        await cancel();
        throw tooLarge(maxBytes);
      }
      const refill = deadlineMs * (next.value.byteLength / MAX_BODY_BYTES);
      budgetMs = Math.min(deadlineMs, budgetMs - (Date.now() - started) + refill);
      return next.value;
    },
  };
}

/** A streamed body's chunks are read into this much memory, reused from one read to the next. */
const STREAM_CHUNK_BYTES = 64 * 1024;

/**
 * Reads a body into one buffer, reused from read to read (a BYOB reader), where the stream is a byte
 * stream (a request's body in workerd). A fresh chunk per read lives outside the V8 heap until a
 * garbage collection, which V8 schedules by its heap, not by that memory: an 81 MB body read that way
 * grew workerd by about the body's size (issue 38). Another stream is read as it comes.
 */
function chunkReader(body: ReadableStream<Uint8Array>): {
  read(): Promise<ReadableStreamReadResult<Uint8Array>>;
  cancel(): Promise<void>;
} {
  let byob: ReadableStreamBYOBReader;
  try {
    byob = body.getReader({ mode: "byob" });
  } catch {
    const reader = body.getReader();
    return { read: () => reader.read(), cancel: () => reader.cancel() };
  }
  let buffer = new ArrayBuffer(STREAM_CHUNK_BYTES);
  return {
    async read() {
      const next = await byob.read(new Uint8Array(buffer));
      // The read took the buffer over (transferred it); the chunk it returns is that same memory.
      if (next.value) buffer = next.value.buffer as ArrayBuffer;
      return next as ReadableStreamReadResult<Uint8Array>;
    },
    cancel: () => byob.cancel(),
  };
}

/**
 * Reads the request body as text: 413 over 64 KB (checked on Content-Length before reading, and
 * again while reading for chunked bodies), 408 when it has not arrived by the app's deadline, 400 for
 * invalid UTF-8 or NUL bytes.
 */
export async function readBodyText(req: Request): Promise<string> {
  const watch = bodyWatches.get(req);
  bodyWatches.delete(req);
  try {
    return await readBodyWithin(req, watch?.deadlineMs ?? Number.POSITIVE_INFINITY);
  } finally {
    watch?.onRead();
  }
}

async function readBodyWithin(req: Request, deadlineMs: number): Promise<string> {
  const declared = req.headers.get("content-length");
  if (declared !== null && Number(declared) > MAX_BODY_BYTES) throw tooLarge(MAX_BODY_BYTES);
  if (!req.body) return "";
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;
  const late = Number.isFinite(deadlineMs)
    ? new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(tooSlow()), deadlineMs);
      })
    : null;
  try {
    for (;;) {
      const { done, value } = await (late ? Promise.race([reader.read(), late]) : reader.read());
      if (done) break;
      size += value.byteLength;
      if (size > MAX_BODY_BYTES) throw tooLarge(MAX_BODY_BYTES);
      chunks.push(value);
    }
  } catch (err) {
    await reader.cancel().catch(() => undefined);
    throw err;
  } finally {
    if (timer !== null) clearTimeout(timer);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const c of chunks) {
    bytes.set(c, offset);
    offset += c.byteLength;
  }
  let text: string;
  try {
    text = fatalUtf8.decode(bytes);
  } catch {
    throw invalidRequest("the body is not valid UTF-8");
  }
  if (text.includes("\0")) throw invalidRequest("the body contains a NUL byte");
  return text;
}

const tooLarge = (max: number) => new OAuthError("payload_too_large", `the body exceeds ${max} bytes`);
const tooSlow = () => new OAuthError("invalid_request", "the body did not arrive in time", { status: 408 });

const isHex = (b: number | undefined) =>
  b !== undefined && ((b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66));

/**
 * Whether `raw` (a path, a query string or a form body) percent-decodes to valid UTF-8 without a NUL.
 * URL and URLSearchParams decode `%FF` to U+FFFD without complaint; checklist G3 wants a 400 instead.
 */
export function percentDecodesCleanly(raw: string): boolean {
  if (!raw.includes("%")) return !raw.includes("\0");
  const src = new TextEncoder().encode(raw);
  const out = new Uint8Array(src.length);
  let n = 0;
  for (let i = 0; i < src.length; i++) {
    const b = src[i] as number;
    if (b === 0x25 && isHex(src[i + 1]) && isHex(src[i + 2])) {
      out[n++] = Number.parseInt(String.fromCharCode(src[i + 1] as number, src[i + 2] as number), 16);
      i += 2;
    } else out[n++] = b;
  }
  const decoded = out.subarray(0, n);
  if (decoded.includes(0)) return false;
  try {
    fatalUtf8.decode(decoded);
    return true;
  } catch {
    return false;
  }
}

function mediaType(req: Request): string {
  return (req.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

export function isForm(req: Request): boolean {
  return mediaType(req) === "application/x-www-form-urlencoded";
}

/**
 * A form body as a flat record. RFC 6749 §3.1: a parameter sent more than once is an error.
 * Values are checked for NUL and control characters other than tab/CR/LF.
 */
export function parseForm(text: string): Record<string, string> {
  if (!percentDecodesCleanly(text)) throw invalidRequest("the form body is not valid UTF-8 or contains a NUL byte");
  let params: URLSearchParams;
  try {
    params = new URLSearchParams(text);
  } catch {
    throw invalidRequest("malformed form body");
  }
  return paramsToRecord(params);
}

/**
 * RFC 8707 §2: `resource` may be sent more than once. Its values are kept as a JSON array of strings
 * (read by resources.ts), so no value can be mistaken for two.
 */
const REPEATABLE = new Set(["resource"]);

export function paramsToRecord(params: URLSearchParams): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of params) {
    if (v.includes("\0") || k.includes("\0")) throw invalidRequest(`parameter ${k} contains a NUL byte`);
    if (/[\uD800-\uDFFF]/.test(v) && !v.isWellFormed()) throw invalidRequest(`parameter ${k} is not valid UTF-8`);
    if (REPEATABLE.has(k)) {
      out[k] = JSON.stringify([...(Object.hasOwn(out, k) ? (JSON.parse(out[k] as string) as string[]) : []), v]);
      continue;
    }
    if (Object.hasOwn(out, k)) throw invalidRequest(`parameter ${k} is repeated`);
    out[k] = v;
  }
  return out;
}

/** The body of a form-only endpoint (RFC 6749 §3.2: the token endpoint takes form encoding). */
export async function readForm(req: Request): Promise<Record<string, string>> {
  if (!isForm(req)) throw new OAuthError("invalid_request", "the body must be application/x-www-form-urlencoded");
  return parseForm(await readBodyText(req));
}

/** A JSON object body, or the form encoding of the same fields. */
export async function readJsonOrForm(req: Request): Promise<{ body: Record<string, unknown>; form: boolean }> {
  const text = await readBodyText(req);
  if (isForm(req)) return { body: parseForm(text), form: true };
  if (mediaType(req) !== "application/json") throw invalidRequest("the body must be JSON or form encoded");
  return { body: parseJsonObject(text), form: false };
}

class BadJsonString extends Error {}
const cleanString = (s: string) => s.isWellFormed() && !s.includes("\0");

export function parseJsonObject(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    // Escapes can spell what raw bytes cannot: a lone surrogate (`\ud800`) or a NUL (`\u0000`). Both are 400 (G3).
    value = JSON.parse(text, (key, v: unknown) => {
      if (!cleanString(key) || (typeof v === "string" && !cleanString(v))) throw new BadJsonString();
      return v;
    });
  } catch (err) {
    if (err instanceof BadJsonString)
      throw invalidRequest("the body holds a string that is not valid UTF-8 or has a NUL");
    throw invalidRequest("the body is not valid JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw invalidRequest("the body must be a JSON object");
  return value as Record<string, unknown>;
}

export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "Content-Type": "application/json; charset=utf-8", ...headers },
  });
}

export const NO_STORE = { "Cache-Control": "no-store", Pragma: "no-cache" } as const;

/**
 * A cookie's value. A browser may send two of one name: a tenant's, scoped to its `/t/<tenant>` path,
 * and the origin's (RFC 6265 §5.4 puts the longer path first); `accept` picks the first one that is
 * this request's (an id that parses for its tenant).
 */
export function getCookie(req: Request, name: string, accept: (value: string) => boolean = () => true): string | null {
  const header = req.headers.get("cookie");
  if (!header) return null;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    if (accept(value)) return value;
  }
  return null;
}

export interface CookieOptions {
  secure: boolean;
  maxAge?: number;
  /** `/` unless the tenant is served under a path (tenants.ts): then its `/t/<tenant>`. */
  path?: string;
}

/**
 * CONTRACT §2: `__Host-` prefix on https; HttpOnly, SameSite=Lax, Path=/, never a Domain. A tenant
 * served under `/t/<tenant>` scopes its cookies to that path, so one browser holds a session per
 * tenant; `__Host-` requires Path=/, so there the prefix is `__Secure-` (still Secure, no Domain).
 */
export function cookieName(base: string, config: { secureCookies: boolean; cookiePath: string }): string {
  if (!config.secureCookies) return base;
  return config.cookiePath === "/" ? `__Host-${base}` : `__Secure-${base}`;
}

export function setCookie(name: string, value: string, opts: CookieOptions): string {
  const parts = [`${name}=${value}`, `Path=${opts.path ?? "/"}`, "HttpOnly", "SameSite=Lax"];
  if (opts.secure) parts.push("Secure");
  if (opts.maxAge !== undefined) parts.push(`Max-Age=${opts.maxAge}`);
  return parts.join("; ");
}

export function clearCookie(name: string, secure: boolean, path = "/"): string {
  return setCookie(name, "", { secure, maxAge: 0, path });
}

/** Headers for every HTML page: no framing (CSP frame-ancestors), no sniffing, no referrer leaks. */
/**
 * A page's headers: a CSP that runs only the page's own nonce'd style and script and loads images from
 * here or from the origins named (a tenant's or client's branding logo, issue 26; the logo a client
 * registered, OIDC Registration §2). No `form-action`: Chromium applies it to
 * the redirects after a post too, and a verified code's redirect ends at the client's redirect URI.
 */
export function pageSecurityHeaders(
  nonce: string,
  imageOrigins: readonly (string | undefined)[] = [],
): Record<string, string> {
  const img = ["'self' data:", ...new Set(imageOrigins.filter((o) => o !== undefined))].join(" ");
  return {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": `default-src 'none'; style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; img-src ${img}; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'`,
    "X-Content-Type-Options": "nosniff",
    // Not "no-referrer": with it, Chromium sends `Origin: null` on the page's own form posts, which
    // the Origin check must refuse. "same-origin" still never sends a referrer to another site.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
  };
}
