import type { Context } from "hono";
import type { AppEnv } from "../../shared/app";
import { normalizeEmail } from "../../shared/email";
import { OAuthError } from "../../shared/errors";
import { json, NO_STORE } from "../../shared/http";

/** CONTRACT §7: `GET /__dev/mailbox/{email}`, newest first. Exists only with MAIL_TRANSPORT=dev. */
export async function devMailbox(c: Context<AppEnv>): Promise<Response> {
  if (c.get("config").MAIL_TRANSPORT !== "dev") throw new OAuthError("not_found", "no such endpoint");
  // Hono has already percent-decoded the parameter; decoding again would throw on a literal `%`.
  const email = normalizeEmail(c.req.param("email") ?? "");
  if (!email) throw new OAuthError("invalid_request", "not an email address");
  const { results } = await c.env.DB.prepare(
    "SELECT email, subject, text, code, sent_at FROM dev_mailbox WHERE email = ? ORDER BY id DESC LIMIT 50",
  )
    .bind(email)
    .all<{ email: string; subject: string; text: string; code: string; sent_at: number }>();
  return json(
    {
      messages: results.map((m) => ({
        to: m.email,
        subject: m.subject,
        text: m.text,
        code: m.code,
        sent_at: new Date(m.sent_at).toISOString(),
      })),
    },
    200,
    NO_STORE,
  );
}
