import type { Hono } from "hono";
import { meteredD1, newD1Meter } from "../../../durable-objects/contract/d1-meter";
import { forgetClient } from "../oauth/clients";
import { forgetKeyRing } from "../oauth/keys";
import type { Env } from "../platform/env";
import { json, NO_STORE } from "../platform/http";
import { requireAdmin } from "../request/admin-auth";
import type { AppEnv } from "../request/context";
import { forgetTenant } from "../tenancy/tenants";

/**
 * What one isolate of a Keyway Worker knows about itself and what op-mgmt may ask of it: its D1 query
 * count (a login's budget is "no D1 query" once its client and user are known) and forgetting a client
 * registration it cached. Locally each Worker is one isolate, so these are exact; in production
 * op-mgmt's service binding reaches one isolate of each, so the count is a sample and a forgotten
 * client is forgotten there, the rest holding it for at most `client_cache_seconds`.
 */
export const isolateCounters = {
  /** Requests this isolate served (Workers bill each), but op-mgmt's internal `/__keyway` asks. */
  requests: 0,
  ...newD1Meter(),
};

/** What an isolate reports of itself (`/__keyway/counters`, and op-mgmt's own in its stats). */
export interface IsolateCounters {
  requests: number;
  d1_queries: number;
  d1_rows_read: number;
  d1_rows_written: number;
  d1_size_bytes: number;
}

export function isolateSnapshot(): IsolateCounters {
  const c = isolateCounters;
  return {
    requests: c.requests,
    d1_queries: c.queries,
    d1_rows_read: c.rows_read,
    d1_rows_written: c.rows_written,
    d1_size_bytes: c.size_bytes,
  };
}

const counted = new WeakMap<object, Env>();
const countingEnvs = new WeakSet<object>();

/** The env with its D1 binding metered (d1-meter.ts): statements, rows read and rows written. */
export function countingEnv(env: Env): Env {
  // The console dispatches into op-mgmt's own app with the env it holds: counted once, not twice.
  if (countingEnvs.has(env)) return env;
  const hit = counted.get(env);
  if (hit) return hit;
  const out = { ...env, DB: meteredD1(env.DB, isolateCounters) } as Env;
  counted.set(env, out);
  countingEnvs.add(out);
  return out;
}

/** The internal paths every Keyway Worker answers, for op-mgmt only (the admin token is required). */
export function mountIsolateRoutes(app: Hono<AppEnv>): void {
  app.use("/__keyway/*", requireAdmin);
  app.get("/__keyway/counters", () => json(isolateSnapshot(), 200, NO_STORE));
  app.post("/__keyway/forget-client/:id", (c) => {
    forgetClient(c.req.param("id") ?? "");
    return new Response(null, { status: 204 });
  });
  app.post("/__keyway/forget-tenant/:id", (c) => {
    const id = c.req.param("id") ?? "";
    forgetTenant(id);
    forgetKeyRing(id);
    return new Response(null, { status: 204 });
  });
}

/** op-mgmt's service bindings to the other Workers, when it has them (wrangler.toml [[services]]). */
export interface PeerBindings {
  OP_AUTH?: Fetcher;
  OP_TOKEN?: Fetcher;
}

/** Sends an internal request to op-auth and op-token (where bound); never throws. */
export async function askPeers(
  env: PeerBindings,
  adminToken: string,
  method: string,
  path: string,
): Promise<unknown[]> {
  const peers = [env.OP_AUTH, env.OP_TOKEN].filter((p): p is Fetcher => p !== undefined);
  const answers = await Promise.all(
    peers.map(async (peer) => {
      try {
        const res = await peer.fetch(`https://keyway.internal${path}`, {
          method,
          headers: { Authorization: `Bearer ${adminToken}` },
        });
        return res.headers.get("content-type")?.includes("json") ? await res.json() : null;
      } catch {
        return null;
      }
    }),
  );
  return answers;
}
