import type { Context } from "hono";
import { capturedMail, isLoadTestAddress } from "../../shared/events/captured-mail";
import { normalizeEmail } from "../../shared/people/email";
import { OAuthError } from "../../shared/platform/errors";
import { json, NO_STORE } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";

/**
 * `GET /admin/v1/test-mailbox/{email}`: the codes mailed to a load-test address, for k6 runs against
 * a deployment (k6 Cloud). Admin token required; only addresses under LOADTEST_EMAIL_DOMAIN exist here.
 */
export async function testMailbox(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  // Hono has already percent-decoded the parameter; decoding again would throw on a literal `%`.
  const email = normalizeEmail(c.req.param("email") ?? "");
  if (!email || !isLoadTestAddress(config, email))
    throw new OAuthError("not_found", "no test mailbox for this address", { headers: NO_STORE });
  return json({ messages: await capturedMail(c.env, config, email) }, 200, NO_STORE);
}
