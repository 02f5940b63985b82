import { requestIdOf } from "../../durable-objects/contract/log";
import { policySchema } from "../shared/config/policy";
import { errorResponse } from "../shared/platform/errors";
import {
  busy,
  loginEnded,
  loginsBound,
  loginsBurst,
  loginsUnderWay,
  noteRefusal,
  takeLoginPlace,
} from "../shared/request/admission";
import { tenantRouteOf } from "../shared/routing/tenant-route";

/**
 * What the front door reads: whether it is one (`FRONT_DOOR` "1": scripts/stack.mjs sets it where the
 * gateway runs in a process of its own), and the deployment's policy and environment as op-auth has them.
 */
export interface FrontEnv {
  FRONT_DOOR?: string;
  POLICY?: string;
  ENVIRONMENT?: string;
}

/** When Keyway's process last answered a request the gateway forwarded (a refusal's log says how long ago). */
let answeredAt = 0;

/**
 * Notes an answer from behind. A refusal logged long after the last one met a stall of Keyway's thread
 * (nothing answered, places held); one logged just after it met logins that keep arriving faster than
 * they finish (an overload).
 */
export function answered(res: Response): Response {
  answeredAt = Date.now();
  return res;
}

let bounds: { key: string; bound: number; burst: number; slotMs: number } | undefined;

/**
 * `max_logins_under_way`, `login_burst` and `login_slot_seconds` by op-auth's own rules (admission.ts, policy.ts);
 * null for a policy op-auth refuses too (it answers 503 itself, saying why, in its log).
 */
function boundsOf(env: FrontEnv): { bound: number; burst: number; slotMs: number } | null {
  const key = `${env.ENVIRONMENT}\u0000${env.POLICY}`;
  if (bounds?.key !== key) {
    let policy: ReturnType<typeof policySchema.parse>;
    try {
      policy = policySchema.parse(env.POLICY ? JSON.parse(env.POLICY) : {});
    } catch {
      return null;
    }
    const environment = env.ENVIRONMENT ?? "development";
    bounds = {
      key,
      bound: loginsBound(policy.max_logins_under_way, environment),
      burst: loginsBurst(policy.login_burst, environment),
      slotMs: policy.login_slot_seconds * 1000,
    };
  }
  return bounds;
}

/**
 * Admission of new logins at the local front door (issue 44 item 3). The local runtime runs every
 * Worker, Durable Object and database on one thread, and workerd serves that thread's ready work in
 * arrival order: a refusal decided inside op-auth waits behind the admitted logins' work twice, on the
 * way in and on the way out (measured: 105-140 ms at p99 at 3.5 times the sustained rate). In a process
 * of its own the front door has a thread that only reads requests and forwards them, so it answers a
 * refusal at once. It keeps the same count op-auth keeps (admission.ts: a new login takes a place until
 * its `redirect_to` is answered, it began none, or `login_slot_seconds` pass), with the same bound, and
 * answers exactly what op-auth would: 503, `temporarily_unavailable`, `Retry-After: 1`. op-auth still
 * checks every login itself, as it does in production, where there is no such front.
 *
 * Only the requests it can tell by their URL: a new login by GET (`/authorize` with a `client_id`), and
 * the `redirect_to` that ends one (`/authorize` with a `tx` and no `client_id`). A login begun by POST
 * is op-auth's to count. Where the gateway shares op-auth's thread (`npm run dev`, the single-process
 * stack) it is not a front door, and forwards everything.
 */
export async function frontDoor(
  req: Request,
  url: URL,
  env: FrontEnv,
  forward: (req: Request) => Promise<Response>,
): Promise<Response> {
  if (env.FRONT_DOOR !== "1" || req.method !== "GET" || tenantRouteOf(req.url, {}).path !== "/authorize")
    return forward(req);
  const limits = boundsOf(env);
  if (!limits) return forward(req);
  const { bound, burst, slotMs } = limits;
  const q = url.searchParams;
  if (!q.has("client_id")) {
    if (!q.has("tx")) return forward(req);
    try {
      return await forward(req);
    } finally {
      loginEnded();
    }
  }
  const now = Date.now();
  if (!takeLoginPlace(bound, slotMs, now, burst)) {
    noteRefusal(now, {
      logins_under_way: loginsUnderWay(slotMs, now),
      last_answer_ms_ago: answeredAt ? now - answeredAt : null,
      at: "front door",
    });
    const res = errorResponse(busy());
    res.headers.set("X-Request-Id", requestIdOf(req));
    return res;
  }
  let began = false;
  try {
    const res = await forward(req);
    // A login page (200) began a login; a redirect (answered from a session, an error) or a refusal did not.
    began = res.status === 200;
    return res;
  } finally {
    if (!began) loginEnded();
  }
}
