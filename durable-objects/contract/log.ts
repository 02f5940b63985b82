import { AsyncLocalStorage } from "node:async_hooks";

/**
 * Structured logs: one JSON object per line, with the request id of the request it belongs to
 * (Cloudflare's `CF-Ray` when the request came through the edge, else a random UUID), so a line in
 * Workers Logs or `wrangler tail` is found from the `X-Request-Id` header a client saw. Lines from a
 * Durable Object's alarm belong to no request and carry none. A leaf module: the stores import it too.
 */
interface RequestScope {
  requestId: string;
  /** The path a tenant's endpoints are served under (`/t/<tenant>`), or "" (tenants.ts). */
  pathBase?: string;
  /** Durable Object calls of this request, when it asked for a trace (never in production). */
  trace?: StoreCall[];
  /** Events (a call's start or end) recorded so far: their order tells calls in a row from calls at once. */
  traceEvents?: number;
}
const requestScope = new AsyncLocalStorage<RequestScope>();

/**
 * One Durable Object call: which store and region, and the order in which it began and ended among
 * the request's call events (not times: workerd's clock stands still between I/O, so two calls in a
 * row can share a millisecond). A call that begins after another ended waited for it.
 */
export interface StoreCall {
  store: string;
  region: string;
  verb: string;
  start: number;
  end: number;
}

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

/** Sets where this request's tenant is served: the pages' own links start there. */
export function setPathBase(base: string): void {
  const scope = requestScope.getStore();
  if (scope) scope.pathBase = base;
}

/** The path this request's pages link under: "" at the origin, `/t/<tenant>` for a tenant's path. */
export function pathBase(): string {
  return requestScope.getStore()?.pathBase ?? "";
}

/** Runs `fn` as the request `scope.requestId`: every `log` line inside carries it. */
export function inRequest<T>(scope: RequestScope, fn: () => T): T {
  return requestScope.run(scope, fn);
}

/**
 * Starts recording this request's Durable Object calls (tools/latency-model.mjs reads them from the
 * `X-Keyway-Store-Trace` response header). The caller decides it may: never in production.
 */
export function traceStoreCalls(): void {
  const scope = requestScope.getStore();
  if (!scope) return;
  scope.trace = [];
  scope.traceEvents = 0;
}

/** Whether this request records its Durable Object calls. */
export const tracingStoreCalls = () => requestScope.getStore()?.trace !== undefined;

/** Records a call about to be made, when this request is traced: returns what to call when it ends. */
export function storeCallStarted(store: string, region: string, verb: string): (() => void) | undefined {
  const scope = requestScope.getStore();
  if (!scope?.trace) return undefined;
  const next = () => {
    scope.traceEvents = (scope.traceEvents ?? 0) + 1;
    return scope.traceEvents;
  };
  const call: StoreCall = { store, region, verb, start: next(), end: -1 };
  scope.trace.push(call);
  return () => {
    call.end = next();
  };
}

/** A trace as a header value: `store@region.verb:start-end` per call, in the order they began. */
export function formatTrace(trace: StoreCall[]): string {
  return trace.map((c) => `${c.store}@${c.region}.${c.verb}:${c.start}-${c.end}`).join(", ");
}

/** The id a request is known by: Cloudflare's ray id when it has one. */
export function requestIdOf(req: Request): string {
  const ray = req.headers.get("cf-ray");
  return ray && /^[0-9a-f]{16}(-[A-Z]{3})?$/i.test(ray) ? ray : crypto.randomUUID();
}
