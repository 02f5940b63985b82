import type { Context } from "hono";
import type { AppEnv } from "./app";
import { OAuthError } from "./errors";

/**
 * Admission control for new work (a new authorization request, a refresh, userinfo, introspection,
 * revocation, a device authorization, client credentials), per isolate. Two bounds:
 *
 * - **In flight:** past `max_inflight_requests` requests being worked on, refuse.
 * - **In time** (issue 27 item 17): past `admission_latency_ms` of recent latency, refuse. A count
 *   alone lets the queue grow: on one busy thread every admitted request's awaits wait behind the
 *   others, so 48 in flight at 45 logins a second meant about a second a step, and a refusal waited in
 *   that queue too. Recent latency is an average of admitted requests' times in this isolate (from the
 *   handler's start to its answer), decayed while nothing completes, so an idle isolate admits again.
 *
 * The check runs before any await of the request (createApp calls it by path; the token endpoint once
 * it knows the grant type), so a refusal costs no storage call and does not queue behind the work.
 * Retry-After is the time the backlog should take to clear: about the recent latency, times how far
 * past the bound it is, at least 1 s and at most 30 s.
 */

/** Requests this isolate is working on (all apps in an isolate share it). */
let inflight = 0;
/** Recent latency of admitted requests (ms), and when it was last updated. */
let latencyMs = 0;
let latencyAt = 0;

/** How fast a recent latency fades while no request completes (ms): the backlog it measured has drained. */
const DECAY_MS = 1_000;
/** Weight of the newest completion in the average. */
const ALPHA = 0.2;

/** The recent latency as of `now`: decayed for the time since the last completion. */
export function recentLatencyMs(now = Date.now()): number {
  if (latencyMs === 0) return 0;
  return latencyMs * Math.exp(-Math.max(0, now - latencyAt) / DECAY_MS);
}

/** A request began being worked on (createApp: once its body has arrived). */
export function started(): void {
  inflight++;
}

/**
 * A request was answered after `ms`. Refusals (503) are not counted: they take no time, and counting
 * them would make a backlog look short.
 */
export function finished(ms: number, status: number, now = Date.now()): void {
  inflight--;
  if (status === 503) return;
  latencyMs = recentLatencyMs(now) * (1 - ALPHA) + Math.max(0, ms) * ALPHA;
  latencyAt = now;
}

/** Forgets the recent latency (tests). */
export function resetAdmission(): void {
  latencyMs = 0;
  latencyAt = 0;
}

/** 503 with Retry-After when this isolate is past either bound; nothing otherwise. */
export function admitNewWork(c: Context<AppEnv>): void {
  const p = c.get("config").POLICY;
  const latency = recentLatencyMs();
  const overCount = inflight > p.max_inflight_requests;
  const overTime = latency > p.admission_latency_ms;
  if (!overCount && !overTime) return;
  const pastBound = Math.max(1, latency / p.admission_latency_ms, inflight / p.max_inflight_requests);
  const retryAfter = Math.min(30, Math.max(1, Math.ceil((latency * pastBound) / 1000)));
  throw new OAuthError("temporarily_unavailable", "Keyway is busy, retry shortly", { retryAfter, status: 503 });
}

/**
 * Whether a request is new work by its method and path alone (the tenant prefix already removed), so
 * it can be refused before anything is read: `/authorize` by GET with a `client_id` (a new login, not
 * the `redirect_to` of one under way), userinfo, introspection, revocation, device authorization.
 */
export function isNewWorkByPath(method: string, path: string, url: URL): boolean {
  if (path === "/authorize") return method === "GET" && url.searchParams.has("client_id");
  return (
    (method === "POST" && ["/introspect", "/revoke", "/device_authorization"].includes(path)) ||
    (path === "/userinfo" && (method === "GET" || method === "POST"))
  );
}
