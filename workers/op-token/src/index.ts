import { createApp, methodNotAllowed } from "../../shared/app";
import { cors } from "./cors";
import { introspect } from "./introspect";
import { jwks, jwksPreflight } from "./jwks";
import { revoke } from "./revoke";
import { token } from "./token";
import { userinfo } from "./userinfo";

/** op-token: the token endpoint, userinfo, revocation, introspection and the JWKS. */
export const app = createApp();

app.get("/jwks.json", jwks);
app.on("OPTIONS", "/jwks.json", jwksPreflight);
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
