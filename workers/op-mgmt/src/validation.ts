import type { Context } from "hono";
import type { z } from "zod";
import { base64url, base64urlDecode } from "../../../durable-objects/contract/crypto";
import { OAuthError } from "../../shared/platform/errors";
import { parseJsonObject, readBodyText } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";

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
