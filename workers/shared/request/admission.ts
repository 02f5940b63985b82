import type { Context } from "hono";
import { log } from "../../../durable-objects/contract/log";
import { OAuthError } from "../platform/errors";
import type { AppEnv } from "./context";

/**
 * Admission control for new work, per isolate (issue 44 item 3; docs/performance.md "Refusals at
 * once"). New work is a new login (an authorization request with a `client_id`), a pushed request, a
 * refresh, userinfo, introspection, revocation, a device authorization, client credentials. The steps
 * of a login already admitted (the code sent and checked, `redirect_to`, the code redeemed) are never
 * refused: the work done for them is not wasted, and a person who got in finishes.
 *
 * Bounds, each a count the isolate keeps itself, read at the moment a request arrives:
 *
 * - **Logins under way** (`max_logins_under_way`): a new login admitted commits the isolate to the
 *   four requests that follow it, most of them store writes. It is counted from its admission until
 *   its `redirect_to` is answered (or it is cancelled, or it did not begin a login after all), and at
 *   most `login_slot_seconds`, so an abandoned login frees its place. Past the bound, new logins are
 *   refused. Every request an admitted login makes belongs to one of these, so the work queued on the
 *   isolate's thread is bounded by the bound, and a refusal, which waits for that thread like
 *   everything else, waits behind at most that much. Counting requests in flight instead does not do
 *   this: a new login is one short request, and the work it commits arrives after it has left, so a
 *   burst of them finds few requests in flight and is admitted whole (measured, docs/performance.md).
 * - **In flight** (`max_inflight_requests`): requests this isolate is working on; past it, any new
 *   work is refused. It bounds the single-request kinds of new work (a refresh, userinfo).
 * - **Estimated queueing** (`admission_latency_ms`, off unless set; issue 27 item 17): the median,
 *   over the requests answered in the last 2 s, of each one's time over its route's floor. A signal
 *   that comes after the queue it measures, and that rises when another process takes the CPU
 *   (service time, not queueing): it refused 19 % of logins at 50/s beside a busy process. Kept for
 *   a deployment that set it.
 *
 * Neither count depends on how fast the thread runs: a slower CPU with no queue leaves them low, and
 * only work admitted and not finished raises them. The check runs before the request awaits anything
 * (createApp calls it by path; a POST to /authorize, /par and the token endpoint once they know), so
 * a refusal makes no storage call, costs about a bare request, and is answered 503 with Retry-After.
 */

/** Requests this isolate is working on (all apps in an isolate share it). */
let inflight = 0;

/**
 * Admission times of the logins under way, oldest first (a queue in an array, `head` its start). A
 * login's end frees the oldest place: which login ended does not matter to a count, and the oldest
 * would expire first anyway.
 */
const slots: number[] = [];
let head = 0;

/** Logins admitted and not yet ended, as of `now` (expired places dropped). */
export function loginsUnderWay(slotMs: number, now = Date.now()): number {
  while (head < slots.length && now - (slots[head] as number) >= slotMs) head++;
  if (head > 1024 && head * 2 > slots.length) {
    slots.splice(0, head);
    head = 0;
  }
  return slots.length - head;
}

/** A login admitted earlier ended (its `redirect_to` answered, cancelled, or it began none). */
export function loginEnded(): void {
  if (head < slots.length) head++;
}

/** Refusals since the last log line: one line a second at most, whatever the rate of refusals. */
let refusedSince = 0;
let loggedAt = 0;

/** Counts a refusal for the log (one line a second), with the counts that decided it. */
export function noteRefusal(now: number, fields: Record<string, unknown>): void {
  refusedSince++;
  if (now - loggedAt < 1000) return;
  log("warn", "requests refused: busy", { refused: refusedSince, ...fields });
  refusedSince = 0;
  loggedAt = now;
}

// ------------------------------------------------------------------ the estimate of queueing (opt-in)

/**
 * Recent completions of admitted requests: each one's time over its route's floor (the least time that
 * route took in the last FLOOR_MS). The backlog is the median of those completed in the last WINDOW_MS.
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

// ------------------------------------------------------------------------------------- the counts

/** A request began being worked on (createApp: once its body has arrived). */
export function started(): void {
  inflight++;
}

/**
 * A request on `route` (method and path, ids cut off) was answered after `ms`; `timed` when its time
 * feeds the estimate of queueing (only when `admission_latency_ms` is set). Only answers that did the
 * route's work count there (below 400).
 */
export function finished(ms: number, status: number, timed = true, route = "", now = Date.now()): void {
  inflight--;
  if (!timed || status >= 400) return;
  const took = Math.max(0, ms);
  excesses[next] = { ms: took - floorOf(route, took, now), at: now };
  next = (next + 1) % SAMPLES;
}

/** Forgets the recent latencies and the logins under way (tests). */
export function resetAdmission(): void {
  excesses.length = 0;
  next = 0;
  floors.clear();
  slots.length = 0;
  head = 0;
  spare = undefined;
}

/** Requests whose admission took a login's place: createApp frees it when the request began no login. */
const tookSlot = new WeakSet<Request>();

/** Whether this request took a login's place (createApp: a login that did not begin frees it). */
export function tookLoginSlot(req: Request): boolean {
  return tookSlot.has(req);
}

/** Requests already admitted: a handler that checks again (a GET /authorize) is not counted twice. */
const admitted = new WeakSet<Request>();

/**
 * `max_logins_under_way`, or its default by runtime. On the local runtime every Worker, object and
 * database shares one thread, a login is machine-fast under load, and 16 keeps the queue a refusal
 * waits in short (docs/performance.md; 8 kept it shorter but refused 0.3 % of logins at 50/s on an
 * idle machine, and 8.7 % at 25/s beside a busy process). In production an isolate only runs its Worker's code, and a
 * person's login holds a place for up to `login_slot_seconds`: 512 lets an isolate take about 256
 * people's new logins a second before it refuses, well past what its CPU needs for them.
 */
export function loginsBound(set: number | undefined, environment: string): number {
  return set ?? (environment === "production" ? 512 : 16);
}

/**
 * `login_burst`, or its default by runtime: 16 on the local runtime, where one thread serves every
 * Worker, object and database and a pause of a few hundred ms beside another process piles logins up
 * to the bound with no overload behind it (0.2 % of logins at 50/s beside a process spinning half a
 * core, 6.3 % beside a compile: docs/performance.md); 0 in production, whose bound is far from a
 * login's CPU.
 */
export function loginsBurst(set: number | undefined, environment: string): number {
  return set ?? (environment === "production" ? 0 : 16);
}

/**
 * The full set of spare places comes back over this much time spent below half the bound: stalls a few
 * seconds apart each find them (measured: 26 logins under way at a refusal at 50/s, the spares spent
 * by a stall shortly before, with 10 s).
 */
const SPARE_REFILL_MS = 2_000;
/** Places past the bound not yet spent (undefined: all of them), as of `spareAt`. */
let spare: number | undefined;
let spareAt = 0;

/**
 * A new login takes a place among those under way, if one is free: the whole check of the bound, for
 * createApp and for the local front door (workers/dev-gateway), which runs it before a request reaches
 * the runtime's busy thread. Past the bound it may take one of `burst` spare places. They come back
 * only while fewer than half the bound are under way: a stall fills the bound and drains, and then
 * they return; an overload keeps the count at the bound, so it spends them once and is refused at the
 * bound from then on. The front door and op-auth keep the same count and spares over the same logins,
 * op-auth seeing each one after the front door, so op-auth admits whatever the front door let through.
 */
export function takeLoginPlace(bound: number, slotMs: number, now = Date.now(), burst = 0): boolean {
  const underWay = loginsUnderWay(slotMs, now);
  if (spare === undefined || spare > burst) spare = burst;
  else if (underWay < bound / 2) spare = Math.min(burst, spare + ((now - spareAt) * burst) / SPARE_REFILL_MS);
  spareAt = now;
  if (underWay >= bound) {
    if (spare < 1 || underWay >= bound + burst) return false;
    spare -= 1;
  }
  slots.push(now);
  return true;
}

/** The refusal, 503 with Retry-After, rendered by `errorResponse` like every other error. */
export function busy(retryAfter = 1): OAuthError {
  return new OAuthError("temporarily_unavailable", "Keyway is busy, retry shortly", {
    retryAfter,
    status: 503,
    logged: true,
  });
}

/**
 * 503 with Retry-After when this isolate is past a bound; otherwise the request is admitted, and a new
 * login (`login`: an authorization request that may begin one) takes a place among those under way.
 */
export function admitNewWork(c: Context<AppEnv>, login = false): void {
  const req = c.req.raw;
  if (admitted.has(req)) return;
  const config = c.get("config");
  const p = config.POLICY;
  const now = Date.now();
  const overCount = inflight > p.max_inflight_requests;
  const backlog = p.admission_latency_ms > 0 ? backlogMs(now) : 0;
  const overTime = p.admission_latency_ms > 0 && backlog > p.admission_latency_ms;
  const placed =
    !overCount &&
    !overTime &&
    (!login ||
      takeLoginPlace(
        loginsBound(p.max_logins_under_way, config.ENVIRONMENT),
        p.login_slot_seconds * 1000,
        now,
        loginsBurst(p.login_burst, config.ENVIRONMENT),
      ));
  if (placed) {
    admitted.add(req);
    if (login) tookSlot.add(req);
    return;
  }
  // A place frees within about a login's time (well under a second at the bound); past the estimate
  // of queueing, about that estimate times how far past it is.
  const pastBound = overTime ? Math.max(1, backlog / p.admission_latency_ms) : 1;
  const retryAfter = Math.min(30, Math.max(1, Math.ceil((backlog * pastBound) / 1000)));
  noteRefusal(now, { logins_under_way: login ? loginsUnderWay(p.login_slot_seconds * 1000, now) : 0, inflight });
  throw busy(retryAfter);
}

/**
 * Whether a request is new work by its method and path alone (the tenant prefix already removed), so
 * it can be refused before anything is read: `/authorize` by GET with a `client_id` (a new login, not
 * the `redirect_to` of one under way), userinfo, introspection, revocation, device authorization.
 * Those endpoints rely on this check alone; `/authorize` by POST, /par and the token endpoint call
 * `admitNewWork` themselves, once they know.
 */
export function isNewWorkByPath(method: string, path: string, url: URL): boolean {
  if (path === "/authorize") return method === "GET" && url.searchParams.has("client_id");
  return (
    (method === "POST" && ["/introspect", "/revoke", "/device_authorization"].includes(path)) ||
    (path === "/userinfo" && (method === "GET" || method === "POST"))
  );
}
