import { AsyncLocalStorage } from "node:async_hooks";

/**
 * Structured logs: one JSON object per line, with the request id of the request it belongs to
 * (Cloudflare's `CF-Ray` when the request came through the edge, else a random UUID), so a line in
 * Workers Logs or `wrangler tail` is found from the `X-Request-Id` header a client saw. Lines from a
 * Durable Object's alarm belong to no request and carry none. A leaf module: the stores import it too.
 */
const requestScope = new AsyncLocalStorage<{ requestId: string }>();

export type LogLevel = "info" | "warn" | "error";

export function log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
  const requestId = requestScope.getStore()?.requestId;
  const line = JSON.stringify({ level, msg, ...(requestId ? { request_id: requestId } : {}), ...fields });
  if (level === "error") console.error(line);
  else if (level === "warn") console.warn(line);
  else console.log(line);
}

/** An error's message (or its stack, for unexpected errors) as a log field. */
export function errorField(err: unknown, stack = false): string {
  if (err instanceof Error) return (stack && err.stack) || err.message;
  return String(err);
}

/** Runs `fn` as the request `requestId`: every `log` line inside carries it. */
export function inRequest<T>(requestId: string, fn: () => T): T {
  return requestScope.run({ requestId }, fn);
}

/** The id a request is known by: Cloudflare's ray id when it has one. */
export function requestIdOf(req: Request): string {
  const ray = req.headers.get("cf-ray");
  return ray && /^[0-9a-f]{16}(-[A-Z]{3})?$/i.test(ray) ? ray : crypto.randomUUID();
}
