import { z } from "zod";
// With their extensions: scripts/deploy.mjs imports config.ts in Node (type stripping), which resolves no bare paths.
import { displayName } from "../branding/display-name.ts";
import { parseVars, secret } from "./vars.ts";

/**
 * The mail settings: the transport and what it needs, checked per transport (and what production
 * refuses). The Workers' configuration includes them; the store Worker reads only these, to retry
 * mail from the MailOutbox.
 */

/** Mail: the transport and its settings. Checked per transport by `checkMail`. */
export const mailFields = {
  /** `dev` (D1 dev mailbox, never in production), `send_email` (Cloudflare binding), `http` (an email API), `smtp`. */
  MAIL_TRANSPORT: z.enum(["dev", "send_email", "http", "smtp"]),
  MAIL_FROM: z.email().default("login@keyway.invalid"),
  /** The display name in From; the issuer's name when unset. */
  MAIL_FROM_NAME: z.string().min(1).max(100).optional(),
  /** Seals a message (with its code) while it waits in the MailOutbox for a retry. */
  MAIL_OUTBOX_SECRET: secret("MAIL_OUTBOX_SECRET"),
  /** `http` transport: which provider's JSON API (Resend's `POST /emails`). */
  MAIL_HTTP_PROVIDER: z.enum(["resend"]).default("resend"),
  /** `http` transport: the API endpoint; the provider's own when unset. */
  MAIL_HTTP_URL: z.url().optional(),
  /** `http` transport: the provider's API key (a secret). */
  MAIL_API_KEY: z.string().min(8).optional(),
  SMTP_HOST: z.string().min(1).max(253).optional(),
  SMTP_PORT: z
    .string()
    .regex(/^[0-9]{1,5}$/, "SMTP_PORT must be a port number")
    .transform(Number)
    .pipe(z.number().int().min(1).max(65535))
    .default(587),
  SMTP_USER: z.string().min(1).max(256).optional(),
  /** A secret. */
  SMTP_PASSWORD: z.string().min(1).max(1024).optional(),
  /** `on`: STARTTLS is required before AUTH and DATA (the default); `off` only for a relay on a private network, never in production. */
  SMTP_STARTTLS: z.enum(["on", "off"]).default("on"),
  /** The name this host gives in EHLO. */
  SMTP_HELO_NAME: z
    .string()
    .regex(/^[A-Za-z0-9.-]{1,253}$/, "SMTP_HELO_NAME must be a host name")
    .optional(),
};

const mailObject = z.object(mailFields);
type MailFields = z.infer<typeof mailObject> & { ENVIRONMENT: string };

/** Per-transport requirements, and what production refuses. Shared by the Workers' config and the outbox's. */
export function checkMail(env: MailFields, ctx: z.core.$RefinementCtx): void {
  const need = (key: keyof MailFields, why: string) => {
    if (env[key] === undefined) ctx.addIssue({ code: "custom", path: [key], message: `${key} is required ${why}` });
  };
  if (env.MAIL_TRANSPORT === "http") need("MAIL_API_KEY", "with MAIL_TRANSPORT=http");
  if (env.MAIL_TRANSPORT === "smtp") {
    need("SMTP_HOST", "with MAIL_TRANSPORT=smtp");
    if ((env.SMTP_USER === undefined) !== (env.SMTP_PASSWORD === undefined))
      ctx.addIssue({ code: "custom", path: ["SMTP_PASSWORD"], message: "SMTP_USER and SMTP_PASSWORD go together" });
  }
  if (env.ENVIRONMENT !== "production") return;
  if (env.MAIL_TRANSPORT === "dev")
    ctx.addIssue({ code: "custom", path: ["MAIL_TRANSPORT"], message: "the dev mailbox is never on in production" });
  if (env.MAIL_FROM.endsWith(".invalid"))
    ctx.addIssue({ code: "custom", path: ["MAIL_FROM"], message: "production needs a real sender address" });
  if (env.MAIL_TRANSPORT === "smtp" && env.SMTP_STARTTLS === "off")
    ctx.addIssue({ code: "custom", path: ["SMTP_STARTTLS"], message: "production never sends mail in the clear" });
  if (env.MAIL_HTTP_URL !== undefined && !env.MAIL_HTTP_URL.startsWith("https://"))
    ctx.addIssue({ code: "custom", path: ["MAIL_HTTP_URL"], message: "production requires an https mail API" });
}

/**
 * What the store Worker needs to retry mail from the MailOutbox: the issuer's name and the mail
 * settings, checked as strictly as the Workers' (production refusals included). Other variables
 * are ignored: the store Worker holds no signing key, admin token or OTP secret.
 */
const mailSchema = z
  .object({
    ENVIRONMENT: z.enum(["development", "test", "production"]),
    ISSUER: z.url(),
    ISSUER_NAME: displayName(100).default("Keyway"),
    ...mailFields,
  })
  .superRefine(checkMail);
export type MailConfig = z.infer<typeof mailSchema>;

const mailCache = new WeakMap<object, MailConfig>();

export function loadMailConfig(env: object): MailConfig {
  const hit = mailCache.get(env);
  if (hit) return hit;
  const data = parseVars(env, mailSchema, "mail configuration");
  mailCache.set(env, data);
  return data;
}
