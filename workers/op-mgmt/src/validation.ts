import type { Context } from "hono";
import { z } from "zod";
import { base64url, base64urlDecode } from "../../../durable-objects/contract/crypto";
import type { AppEnv } from "../../shared/app/app";
import { OAuthError } from "../../shared/platform/errors";
import { parseJsonObject, readBodyText } from "../../shared/platform/http";

/** Parses a JSON body with a strict zod schema: unknown fields and wrong types are 400, nothing stored. */
export async function body<T extends z.ZodType>(c: Context<AppEnv>, schema: T): Promise<z.infer<T>> {
  const type = (c.req.header("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "application/json") throw new OAuthError("invalid_request", "the body must be application/json");
  const parsed = schema.safeParse(parseJsonObject(await readBodyText(c.req.raw)));
  if (!parsed.success)
    throw new OAuthError(
      "invalid_request",
      parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; "),
    );
  return parsed.data;
}

/**
 * A list's `limit` query parameter: `fallback` when absent, else a whole number from 1 to `max`.
 * Checked before any query: a bad LIMIT would reach D1 as a query error, which is not overload.
 */
export function queryLimit(c: Context<AppEnv>, fallback: number, max: number): number {
  const raw = c.req.query("limit");
  const limit = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(limit) || limit < 1 || limit > max)
    throw new OAuthError("invalid_request", `limit must be a whole number from 1 to ${max}`);
  return limit;
}

/** An opaque list cursor: where the previous page ended, as base64url JSON. */
export const writeCursor = (position: unknown): string => base64url(new TextEncoder().encode(JSON.stringify(position)));

/** A cursor `writeCursor` made, if `valid` accepts what it holds; absent, null; anything else is 400. */
export function readCursor<T>(raw: string | undefined, valid: (value: unknown) => value is T): T | null {
  if (raw === undefined) return null;
  try {
    const value: unknown = JSON.parse(new TextDecoder().decode(base64urlDecode(raw)));
    if (valid(value)) return value;
  } catch {
    // fall through
  }
  throw new OAuthError("invalid_request", "cursor is not one this endpoint returned");
}

const FORBIDDEN_SCHEMES = new Set(["javascript:", "data:", "file:", "vbscript:", "blob:", "about:"]);

/**
 * A redirect URI a client may register (RFC 6749 §3.1.2, RFC 8252 §7, RFC 9700 §4.1): absolute, no
 * fragment, no wildcard; https, or http only on a loopback IP, or a private-use scheme of reverse-DNS form.
 */
export function redirectUriProblem(value: string): string | null {
  if (value.includes("*")) return "wildcards are not allowed";
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "must be an absolute URI";
  }
  if (url.hash || value.includes("#")) return "must not contain a fragment";
  if (FORBIDDEN_SCHEMES.has(url.protocol)) return `the ${url.protocol} scheme is not allowed`;
  if (url.protocol === "https:") return url.hostname ? null : "must name a host";
  if (url.protocol === "http:")
    return ["127.0.0.1", "[::1]", "localhost"].includes(url.hostname) ? null : "http is allowed only for loopback";
  if (/^[a-z][a-z0-9+.-]*\.[a-z0-9+.-]+:$/.test(url.protocol)) return null;
  return "must be https, loopback http, or a private-use scheme like com.example.app:";
}

export const redirectUri = z
  .string()
  .max(2000)
  .superRefine((v, ctx) => {
    const problem = redirectUriProblem(v);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });

export const corsOrigin = z
  .string()
  .max(300)
  .superRefine((v, ctx) => {
    let url: URL | null = null;
    try {
      url = new URL(v);
    } catch {}
    if (!url || url.origin !== v || !/^https?:$/.test(url.protocol))
      ctx.addIssue({ code: "custom", message: "must be an origin like https://app.example.com" });
  });
