import type { Context, Next } from "hono";
import { timingSafeEqualString } from "../../../durable-objects/contract/crypto";
import { OAuthError } from "../platform/errors";
import type { AppEnv } from "./context";

/** Middleware: the request carries `Authorization: Bearer <ADMIN_TOKEN>` (CONTRACT §5), else 401. */
export async function requireAdmin(c: Context<AppEnv>, next: Next): Promise<void> {
  const m = /^Bearer (.+)$/.exec(c.req.header("authorization") ?? "");
  if (!m || !timingSafeEqualString(m[1] as string, c.get("config").ADMIN_TOKEN))
    throw new OAuthError("unauthorized", "a valid admin token is required", {
      wwwAuthenticate: 'Bearer realm="keyway-admin"',
    });
  await next();
}
