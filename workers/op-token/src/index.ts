import { createApp, methodNotAllowed } from "../../shared/app/app";
import { cors } from "./cors";
import { deviceAuthorization } from "./device-authorization";
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
app.use("/device_authorization", cors("POST"));
app.post("/device_authorization", deviceAuthorization);
app.all("/device_authorization", () => methodNotAllowed("POST"));
app.post("/token", token);
app.all("/token", () => methodNotAllowed("POST"));
app.on(["GET", "POST"], "/userinfo", userinfo);
app.post("/revoke", revoke);
app.all("/revoke", () => methodNotAllowed("POST"));
app.post("/introspect", introspect);
app.all("/introspect", () => methodNotAllowed("POST"));

export default app;
