import { createApp, methodNotAllowed } from "../../shared/app/app";
import { workerFor } from "../../shared/app/worker-routes";
import type { Env } from "../../shared/platform/env";
import { authorize } from "./authorize";
import { devMailbox } from "./dev-mailbox";
import { deviceDecision, devicePage } from "./device";
import { discovery } from "./discovery";
import { cancelLogin, generateCode, restartLogin, verifyCode } from "./email-code";
import { renderAuthError } from "./errors";
import { logout } from "./logout";
import { pushAuthorizationRequest } from "./par";
import { passkeyLater, registerPasskey, verifyPasskey } from "./passkey";
import { deleteRegistration, readRegistration, register, replaceRegistration } from "./registration";

/**
 * op-auth: discovery, the authorization endpoint and login page, email codes, logout, the device page,
 * dynamic client registration.
 */
export const app = createApp();
// One error type, rendered as a redirect to the client, a page of Keyway's own, or JSON (errors.ts).
app.onError((err, c) => renderAuthError(err, c));

app.get("/.well-known/openid-configuration", discovery);
app.on(["GET", "POST"], "/authorize", authorize);
// RFC 9126: pushed authorization requests (par.ts).
app.post("/par", pushAuthorizationRequest);
app.all("/par", () => methodNotAllowed("POST"));
app.post("/email-code/generate", generateCode);
app.post("/email-code/verify", verifyCode);
app.post("/email-code/restart", restartLogin);
app.post("/email-code/cancel", cancelLogin);
app.all("/email-code/*", () => methodNotAllowed("POST"));
// Issue 42: passkeys (passkey.ts).
app.post("/passkey/verify", verifyPasskey);
app.post("/passkey/register", registerPasskey);
app.post("/passkey/later", passkeyLater);
app.all("/passkey/*", () => methodNotAllowed("POST"));
app.on(["GET", "POST"], "/logout", logout);
app.on(["GET", "POST"], "/device", devicePage);
app.post("/device/decision", deviceDecision);
// Dynamic Client Registration (RFC 7591) and client configuration (RFC 7592): registration.ts.
app.post("/register", register);
app.all("/register", () => methodNotAllowed("POST"));
app.get("/register/:client_id", readRegistration);
app.put("/register/:client_id", replaceRegistration);
app.delete("/register/:client_id", deleteRegistration);
app.all("/register/:client_id", () => methodNotAllowed("GET, PUT, DELETE"));
app.all("/device/decision", () => methodNotAllowed("POST"));
// CONTRACT §7: local only; a production build leaves the route and its module out (build.d.ts).
if (typeof __KEYWAY_DEV__ === "undefined" || __KEYWAY_DEV__) app.get("/__dev/mailbox/:email", devMailbox);

/**
 * In production op-auth's route takes every path of the issuer's host but op-token's (scripts/lib/
 * routes.mjs), and a route cannot name a path's middle: a tenant's op-token paths (`/t/<tenant>/token`)
 * arrive here and go to op-token over its service binding, unchanged. (Locally the gateway routes
 * them by workerFor already.)
 */
export default {
  fetch(req: Request, env: Env, ctx: ExecutionContext): Response | Promise<Response> {
    if (env.OP_TOKEN && req.url.includes("/t/")) {
      const path = new URL(req.url).pathname;
      if (path.startsWith("/t/") && workerFor(path) === "op-token") return env.OP_TOKEN.fetch(req);
    }
    return app.fetch(req, env, ctx);
  },
};
