import { errorField, log } from "../../durable-objects/contract/log";
import { workerFor } from "../shared/app/worker-routes";
import { errorResponse, OAuthError } from "../shared/platform/errors";
import { type DemoEnv, demo } from "./demo";
import { answered, type FrontEnv, frontDoor } from "./front-door";

interface GatewayEnv extends DemoEnv, FrontEnv {
  OP_AUTH: Fetcher;
  OP_TOKEN: Fetcher;
  OP_MGMT: Fetcher;
}

/**
 * Local only: one origin for three Workers, like production routes on the issuer's host. `npm start`
 * runs it in a workerd process of its own, in front of the one that runs Keyway (scripts/stack.mjs),
 * and it refuses new logins past the bound there, off the busy thread (front-door.ts).
 */
export default {
  async fetch(req: Request, env: GatewayEnv): Promise<Response> {
    const url = new URL(req.url);
    if (url.pathname === "/" || url.pathname === "/demo" || url.pathname.startsWith("/demo/")) return demo(req, env);
    const owner = workerFor(url.pathname);
    const target = { "op-auth": env.OP_AUTH, "op-token": env.OP_TOKEN, "op-mgmt": env.OP_MGMT }[owner];
    const forward = (r: Request) => target.fetch(withDevGeo(r)).then(answered, unreachable);
    return owner === "op-auth" ? frontDoor(req, url, env, forward) : forward(req);
  },
} satisfies ExportedHandler<GatewayEnv>;

/**
 * The front door's own answer when Keyway's process cannot be reached (it is restarting after a crash,
 * say): 503 with Retry-After, as for any overload, not workerd's bare 500.
 */
function unreachable(err: unknown): Response {
  log("error", "gateway: the Worker behind did not answer", { error: errorField(err) });
  return errorResponse(
    new OAuthError("temporarily_unavailable", "Keyway is not reachable, retry shortly", {
      status: 503,
      retryAfter: 1,
      logged: true,
    }),
  );
}

/**
 * Local only (this gateway is never deployed; production routes go straight to the Workers, and
 * Cloudflare sets `request.cf` itself): `X-Keyway-Dev-Country: JP` (and optionally
 * `X-Keyway-Dev-Continent: AS`) says where a request comes from, so tests and k6 can drive logins
 * from several regions. The headers become `request.cf.country`/`continent` for the Worker behind,
 * and are removed; the Workers themselves never read them.
 */
export function withDevGeo(req: Request): Request {
  const country = req.headers.get("x-keyway-dev-country")?.trim().toUpperCase();
  const continent = req.headers.get("x-keyway-dev-continent")?.trim().toUpperCase();
  if (!country && !continent) return req;
  const headers = new Headers(req.headers);
  headers.delete("x-keyway-dev-country");
  headers.delete("x-keyway-dev-continent");
  const cf: Record<string, string> = {};
  if (country && /^[A-Z]{2}$/.test(country)) cf.country = country;
  if (continent && /^[A-Z]{2}$/.test(continent)) cf.continent = continent;
  return new Request(req, { headers, cf });
}
