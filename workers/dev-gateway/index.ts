import { workerFor } from "../routes";
import { type DemoEnv, demo } from "./demo";

interface GatewayEnv extends DemoEnv {
  OP_AUTH: Fetcher;
  OP_TOKEN: Fetcher;
  OP_MGMT: Fetcher;
}

/** Local only: one origin for three Workers, like production routes on the issuer's host. */
export default {
  async fetch(req: Request, env: GatewayEnv): Promise<Response> {
    const url = new URL(req.url);
    if (url.pathname === "/" || url.pathname === "/demo" || url.pathname.startsWith("/demo/")) return demo(req, env);
    const target = { "op-auth": env.OP_AUTH, "op-token": env.OP_TOKEN, "op-mgmt": env.OP_MGMT }[
      workerFor(url.pathname)
    ];
    return target.fetch(req);
  },
} satisfies ExportedHandler<GatewayEnv>;
