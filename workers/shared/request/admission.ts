import type { Context } from "hono";
import { OAuthError } from "../platform/errors";
import type { AppEnv } from "./context";

/**
 * Admission control for new work (a new authorization request, a refresh, userinfo, introspection,
 * revocation, a device authorization, client credentials), per isolate. Two bounds:
 *
 * - **In flight:** past `max_inflight_requests` requests being worked on, refuse.
 * - **In time** (issue 27 item 17): past `admission_latency_ms` of estimated queueing, refuse. A count
 *   alone lets the queue grow: on one busy thread every admitted request's awaits wait behind the
 *   others, so 48 in flight at 45 logins a second meant about a second a step, and a refusal waited in
 *   that queue too. The estimate (`backlogMs`) comes from the times of the isolate's recent requests
 *   (from the handler's start to its answer) over what each route takes when nothing waits; with none
 *   completed lately it is 0, so an idle isolate admits again.
 *
 * The check runs before any await of the request (createApp calls it by path; the token endpoint once
 * it knows the grant type), so a refusal costs no storage call and does not queue behind the work.
 * Retry-After is the time the backlog should take to clear: about the estimated queueing, times how
 * far past the bound it is, at least 1 s and at most 30 s.
 */

/** Requests this isolate is working on (all apps in an isolate share it). */
let inflight = 0;

/**
 * Recent completions of admitted requests: each one's time over its route's floor (the least time that
 * route took in the last FLOOR_MS), so what is measured is queueing, not the work itself (a route that
 * calls far-away Durable Objects is slow without any queue). The backlog is the median of those
 * completed in the last WINDOW_MS: a median, so one slow request (a fan-out, a cold object) sheds
 * nothing, while a queue moves most requests at once. Under overload lasting longer than FLOOR_MS the
 * floors rise with it and the estimate fades; the in-flight bound still holds then.
 */
const SAMPLES = 64;
const WINDOW_MS = 2_000;
const FLOOR_MS = 300_000;
/** Fewer recent completions than this say nothing about a queue. */
const MIN_SAMPLES = 8;
const excesses: { ms: number; at: number }[] = [];
let next = 0;
const floors = new Map<string, { ms: number; at: number }>();

function floorOf(route: string, ms: number, now: number): number {
  const f = floors.get(route);
  if (!f || ms <= f.ms || now - f.at > FLOOR_MS) {
    if (floors.size > 200) floors.clear();
    floors.set(route, { ms, at: now });
    return ms;
  }
  return f.ms;
}

/** The estimated queueing delay as of `now` (ms): 0 with too few recent completions. */
export function backlogMs(now = Date.now()): number {
  const recent = excesses.filter((l) => now - l.at <= WINDOW_MS).map((l) => l.ms);
  if (recent.length < MIN_SAMPLES) return 0;
  recent.sort((a, b) => a - b);
  return recent[Math.floor(recent.length / 2)] as number;
}

/** A request began being worked on (createApp: once its body has arrived). */
export function started(): void {
  inflight++;
}

/**
 * A request on `route` (method and path, ids cut off) was answered after `ms`; `timed` when its time
 * tells of the queue admission watches. Only answers that did the route's work count (below 400): a
 * refusal or an error takes less time than the work, and would set a floor the work never meets.
 */
export function finished(ms: number, status: number, timed = true, route = "", now = Date.now()): void {
  inflight--;
  if (!timed || status >= 400) return;
  const took = Math.max(0, ms);
  excesses[next] = { ms: took - floorOf(route, took, now), at: now };
  next = (next + 1) % SAMPLES;
}

/** Forgets the recent latencies (tests). */
export function resetAdmission(): void {
  excesses.length = 0;
  next = 0;
  floors.clear();
}

/** 503 with Retry-After when this isolate is past either bound; nothing otherwise. */
export function admitNewWork(c: Context<AppEnv>): void {
  const p = c.get("config").POLICY;
  const backlog = backlogMs();
  const overCount = inflight > p.max_inflight_requests;
  const overTime = backlog > p.admission_latency_ms;
  if (!overCount && !overTime) return;
  const pastBound = Math.max(1, backlog / p.admission_latency_ms, inflight / p.max_inflight_requests);
  const retryAfter = Math.min(30, Math.max(1, Math.ceil((backlog * pastBound) / 1000)));
  throw new OAuthError("temporarily_unavailable", "Keyway is busy, retry shortly", { retryAfter, status: 503 });
}

/**
 * Whether a request is new work by its method and path alone (the tenant prefix already removed), so
 * it can be refused before anything is read: `/authorize` by GET with a `client_id` (a new login, not
 * the `redirect_to` of one under way), userinfo, introspection, revocation, device authorization.
 * Those endpoints rely on this check alone; `/authorize` by POST and the token endpoint call
 * `admitNewWork` themselves, once they know.
 */
export function isNewWorkByPath(method: string, path: string, url: URL): boolean {
  if (path === "/authorize") return method === "GET" && url.searchParams.has("client_id");
  return (
    (method === "POST" && ["/introspect", "/revoke", "/device_authorization"].includes(path)) ||
    (path === "/userinfo" && (method === "GET" || method === "POST"))
  );
}
