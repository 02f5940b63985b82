import { Hono } from "hono";
import { getPath as honoPath } from "hono/utils/url";
import {
  formatTrace,
  inRequest,
  log,
  requestIdOf,
  setPathBase,
  traceStoreCalls,
} from "../../../durable-objects/contract/log";
import { type Config, loadConfig } from "../config/config";
import { ConfigError } from "../config/vars";
import { errorResponse, OAuthError } from "../platform/errors";
import { percentDecodesCleanly, watchBody } from "../platform/http";
import { admitNewWork, finished, isNewWorkByPath, loginEnded, started, tookLoginSlot } from "../request/admission";
import type { AppEnv } from "../request/context";
import { withLiveShards } from "../routing/live-shards";
import { regionFor, requestGeo } from "../routing/placement";
import { adminTenantRouteOf, tenantRouteOf } from "../routing/tenant-route";
import { configForRequest } from "../tenancy/tenants";
import { countingEnv, isolateCounters, mountIsolateRoutes } from "./isolate";

/**
 * Where a Worker finds a request's tenant: an issuer's endpoints under `/t/<tenant>` or a custom host
 * (op-auth, op-token), or the admin API's `/admin/v1/tenants/<tenant>/...` (op-mgmt, which resolves
 * the tenant itself after authenticating the caller).
 */
export type TenantPaths = "issuer" | "admin";

const routeOf = (mode: TenantPaths, url: string, hosts: Readonly<Record<string, string>>) =>
  mode === "admin" ? adminTenantRouteOf(url) : tenantRouteOf(url, hosts);

/**
 * Admission control (admission.ts), called where new work starts. Steps of a login already under way
 * are never shed, so a ramp past capacity turns into fast 503s for new logins instead of timeouts, and
 * the work already done is not wasted.
 */
export { admitNewWork } from "../request/admission";

/**
 * A Keyway Worker app: configuration parsed once per isolate (a broken configuration answers 503
 * and logs why), every error rendered by `errorResponse`, unknown paths 404 in the same shape.
 */
/** Two years, the value the HSTS preload list asks for (hstspreload.org). */
const HSTS = "max-age=63072000";

/** A route by its first two path segments: `/__dev/mailbox/<email>` and `/token` alike. */
const routeKeyOf = (path: string) => path.split("/").slice(0, 3).join("/");

/** Whether a path as hono reads it may carry a tenant's prefix (tenant-route.ts's forms). */
const mayNameTenant = (mode: TenantPaths, path: string) =>
  mode === "admin" ? path.startsWith("/admin/v1/tenants/") : path.startsWith("/t/") || path.startsWith("/.well-known/");

export function createApp(mode: TenantPaths = "issuer"): Hono<AppEnv> {
  // The router sees the path without its tenant prefix: `/t/acme/token` routes as `/token`.
  // Hono's own getPath first (it percent-decodes), then the prefix stripped from what it returns; a
  // path that cannot carry a prefix is returned as it is (most requests: no second parse).
  const app = new Hono<AppEnv>({
    getPath: (req) => {
      const path = honoPath(req);
      return mayNameTenant(mode, path) ? routeOf(mode, `http://path${path}`, {}).path : path;
    },
  });
  // The request pipeline (issue 44 item 2): two middlewares. The first gives every response, errors
  // included, its request's id, and every log line inside it the same id; it is apart from the second
  // so that an error the second throws is rendered (by the app's onError) before the id is set.
  app.use(async (c, next) => {
    const req = c.req.raw;
    // Workers bill every request; op-mgmt's internal asks over the service bindings are not requests.
    if (!c.req.path.startsWith("/__keyway/")) isolateCounters.requests++;
    const requestId = requestIdOf(req);
    const scope: Parameters<typeof inRequest>[0] = { requestId };
    await inRequest(scope, next);
    const headers: [string, string][] = [["X-Request-Id", requestId]];
    // RFC 6797 §7.1: HSTS only on a secure transport (an http response's header is ignored anyway).
    // No includeSubDomains: the issuer's host may share a parent domain with sites Keyway does not run.
    if (req.url.startsWith("https:")) headers.push(["Strict-Transport-Security", HSTS]);
    if ((typeof __KEYWAY_DEV__ === "undefined" || __KEYWAY_DEV__) && scope.trace)
      headers.push(["X-Keyway-Store-Trace", formatTrace(scope.trace)]);
    try {
      for (const [k, v] of headers) c.res.headers.set(k, v);
    } catch {
      // A response with immutable headers (a redirect made by Response.redirect, a fetched one).
      c.res = new Response(c.res.body, c.res);
      for (const [k, v] of headers) c.res.headers.set(k, v);
    }
  });

  // The rest, in this order, each step before the next may await.
  app.use(async (c, next) => {
    const req = c.req.raw;
    let config: Config;
    try {
      config = loadConfig(c.env);
    } catch (err) {
      if (err instanceof ConfigError) {
        log("error", "configuration refused", { error: err.message });
        throw new OAuthError("temporarily_unavailable", "Keyway is not configured", { retryAfter: 30, status: 503 });
      }
      throw err;
    }
    c.env = countingEnv(c.env);
    const route = routeOf(mode, req.url, config.TENANT_HOSTS);
    const url = new URL(req.url);
    // Checklist G3: a path or query that decodes to invalid UTF-8 or a NUL is 400, whatever the endpoint.
    if (!percentDecodesCleanly(url.pathname) || !percentDecodesCleanly(url.search))
      throw new OAuthError("invalid_request", "the URL is not valid UTF-8 or contains a NUL byte");
    // New work is refused before the request awaits anything (issue 27 item 17): on a busy thread each
    // await would queue it behind the backlog it is refused for. The deployment's policy decides; a
    // new authorization request takes a place among the logins under way (issue 44 item 3).
    if (mode === "issuer" && isNewWorkByPath(req.method, route.path, url)) {
      c.set("config", config);
      admitNewWork(c, route.path === "/authorize");
    }
    // With the shard generations appended live (issue 13), read at most every few seconds per isolate.
    const live = await withLiveShards(c.env, config);
    c.set("tenantRoute", route);
    // A custom host is its tenant's only issuer: no other tenant's paths under it.
    if (route.via === "host" && route.path.startsWith("/t/")) throw new OAuthError("not_found", "no such endpoint");
    // The request sees the config as its tenant does (tenants.ts); op-mgmt does this after authentication.
    c.set("config", mode === "issuer" && route.via !== "origin" ? await configForRequest(c.env, live, route) : live);
    if (mode === "issuer" && route.via === "path") setPathBase(`/t/${route.tenant}`);
    c.set("region", regionFor(config.REGIONS, requestGeo(req)));
    // The latency model (tools/latency-model.mjs) asks which Durable Objects a step calls; never in production.
    if (
      (typeof __KEYWAY_DEV__ === "undefined" || __KEYWAY_DEV__) &&
      config.ENVIRONMENT !== "production" &&
      req.headers.get("x-keyway-trace") === "1"
    )
      traceStoreCalls();
    // A request counts as in flight once its body has arrived: a client that sends a body slowly
    // holds its own connection, never a slot new work needs, and its body has a deadline (408).
    let countedAt: number | null = null;
    const count = () => {
      if (countedAt === null) {
        countedAt = Date.now();
        started();
      }
    };
    // Admission is the issuer's (op-auth, op-token): an admin request's time says nothing of their queue.
    // Times are kept only for the estimate of queueing, when the policy turns it on.
    const timed = mode === "issuer" && config.POLICY.admission_latency_ms > 0;
    if (req.body) watchBody(req, { deadlineMs: config.POLICY.body_deadline_seconds * 1000, onRead: count });
    else count();
    try {
      await next();
    } finally {
      // An authorization request admitted as a new login that began none (answered from a session,
      // refused, an error) frees its place at once; one that did frees it at its redirect_to.
      if (tookLoginSlot(req) && c.res.status !== 200) loginEnded();
      if (countedAt !== null)
        finished(Date.now() - countedAt, c.res.status, timed, timed ? `${req.method} ${routeKeyOf(route.path)}` : "");
    }
  });
  mountIsolateRoutes(app);
  app.onError((err) => errorResponse(err));
  app.notFound(() => errorResponse(new OAuthError("not_found", "no such endpoint")));
  return app;
}

/** 405 for a known path with a method it does not take (checklist C8). */
export function methodNotAllowed(allow: string): never {
  throw new OAuthError("invalid_request", "method not allowed", { status: 405, headers: { Allow: allow } });
}
