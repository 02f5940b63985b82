import { z } from "zod";

/**
 * Reading a Worker's string variables: the helpers every schema of this folder is built with, and the
 * one parse that names every bad variable at once.
 */

export const secret = (name: string) =>
  z
    .string({ error: `${name} is required` })
    .min(32, `${name} must be at least 32 characters of random data`)
    // A placeholder, or a word repeated to length (`changemechangeme…` has 7 distinct characters; 32
    // random base64url or hex characters have about 25 or 14).
    .refine((v) => !/^(changeme|secret|test|example|x+)$/i.test(v) && new Set(v).size >= 8, `${name} is a placeholder`);

export const json = <T extends z.ZodType>(schema: T) =>
  z
    .string()
    .transform((raw, ctx) => {
      try {
        return JSON.parse(raw) as unknown;
      } catch {
        ctx.addIssue({ code: "custom", message: "not valid JSON" });
        return z.NEVER;
      }
    })
    .pipe(schema);

export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * The string variables of `env` through `schema`, or a ConfigError naming every bad variable. Bindings
 * are objects; `__`-prefixed strings are the platform's own (e.g. the test pool's).
 */
export function parseVars<S extends z.ZodType<{ MAIL_TRANSPORT: string }>>(
  env: object,
  schema: S,
  what: string,
): z.infer<S> {
  const vars = Object.fromEntries(Object.entries(env).filter(([k, v]) => typeof v === "string" && !k.startsWith("__")));
  const parsed = schema.safeParse(vars);
  if (!parsed.success) {
    const detail = parsed.error.issues.map((i) => `${i.path.join(".") || "env"}: ${i.message}`).join("; ");
    throw new ConfigError(`invalid Keyway ${what}: ${detail}`);
  }
  checkMailBinding(env, parsed.data);
  return parsed.data;
}

/** The `send_email` transport needs its binding (an object, so the string schema cannot see it). */
function checkMailBinding(env: object, config: { MAIL_TRANSPORT: string }): void {
  if (config.MAIL_TRANSPORT !== "send_email") return;
  const binding = (env as { SEND_EMAIL?: { send?: unknown } }).SEND_EMAIL;
  if (typeof binding?.send !== "function")
    throw new ConfigError(
      "invalid Keyway configuration: MAIL_TRANSPORT=send_email needs a send_email binding named SEND_EMAIL",
    );
}
