import type { Context } from "hono";
import { capturedMail } from "../../shared/events/captured-mail";
import { normalizeEmail } from "../../shared/people/email";
import { OAuthError } from "../../shared/platform/errors";
import { json, NO_STORE } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";

/** CONTRACT §7: `GET /__dev/mailbox/{email}`, newest first. Exists only with MAIL_TRANSPORT=dev. */
export async function devMailbox(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  if (config.MAIL_TRANSPORT !== "dev") throw new OAuthError("not_found", "no such endpoint");
  // Hono has already percent-decoded the parameter; decoding again would throw on a literal `%`.
  const email = normalizeEmail(c.req.param("email") ?? "");
  if (!email) throw new OAuthError("invalid_request", "not an email address");
  return json({ messages: await capturedMail(c.env, config, email) }, 200, NO_STORE);
}
