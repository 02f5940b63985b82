import type { Context } from "hono";
import { type AppEnv, createApp, methodNotAllowed } from "../../shared/app";
import { keyRing } from "../../shared/keys";
import { cors } from "./cors";
import { introspect } from "./introspect";
import { revoke } from "./revoke";
import { token } from "./token";
import { userinfo } from "./userinfo";

/** op-token: the token endpoint, userinfo, revocation, introspection and the JWKS. */
export const app = createApp();

async function jwks(c: Context<AppEnv>): Promise<Response> {
  const ring = await keyRing(c.env, c.get("config"));
  return new Response(JSON.stringify(ring.jwks), {
    headers: {
      "Content-Type": "application/jwk-set+json",
      "Access-Control-Allow-Origin": "*",
      "Cache-Control": "public, max-age=300",
    },
  });
}

app.get("/jwks.json", jwks);
app.on(
  "OPTIONS",
  "/jwks.json",
  () =>
    new Response(null, {
      status: 204,
      headers: { "Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET" },
    }),
);
app.use("/token", cors("POST"));
app.use("/revoke", cors("POST"));
app.use("/introspect", cors("POST"));
app.use("/userinfo", cors("GET, POST"));
app.post("/token", token);
app.all("/token", () => methodNotAllowed("POST"));
app.on(["GET", "POST"], "/userinfo", userinfo);
app.post("/revoke", revoke);
app.all("/revoke", () => methodNotAllowed("POST"));
app.post("/introspect", introspect);
app.all("/introspect", () => methodNotAllowed("POST"));

export default app;
