import { z } from "zod";

/**
 * Keyway's configuration: every string variable and secret of a Worker, parsed once per isolate.
 * Unknown variables, missing secrets and insecure values fail loudly at the first request,
 * which answers 503 `server_error` until the deployment is fixed.
 */

export const STORE_NAMES = ["session", "challenge", "code", "revocation", "refresh"] as const;
export type StoreName = (typeof STORE_NAMES)[number];

const shardCount = z.number().int().min(1).max(1024);
/** Each store's shard counts by generation; the last entry is the current generation. */
const shardsSchema = z
  .object(
    Object.fromEntries(STORE_NAMES.map((s) => [s, z.array(shardCount).min(1).max(36)])) as Record<
      StoreName,
      z.ZodArray<typeof shardCount>
    >,
  )
  .strict();
export type ShardConfig = z.infer<typeof shardsSchema>;

const policySchema = z
  .object({
    otp_ttl_seconds: z.number().int().min(60).max(600).default(300),
    otp_max_attempts: z.number().int().min(1).max(10).default(5),
    email_failures_per_hour: z.number().int().min(1).max(100).default(10),
    resend_interval_seconds: z.number().int().min(10).max(600).default(60),
    sends_per_email_per_hour: z.number().int().min(1).max(100).default(10),
    /** Per-IP quotas per minute; raised, never disabled, for load tests. */
    ip_generate_per_minute: z.number().int().min(1).max(1_000_000).default(30),
    ip_verify_per_minute: z.number().int().min(1).max(1_000_000).default(60),
    login_tx_ttl_seconds: z.number().int().min(60).max(3600).default(900),
    code_ttl_seconds: z.number().int().min(10).max(600).default(60),
    session_ttl_seconds: z
      .number()
      .int()
      .min(300)
      .max(30 * 86400)
      .default(86400),
    access_token_ttl_seconds: z.number().int().min(60).max(86400).default(600),
    id_token_ttl_seconds: z.number().int().min(60).max(86400).default(600),
    refresh_token_ttl_seconds: z
      .number()
      .int()
      .min(3600)
      .max(365 * 86400)
      .default(30 * 86400),
    refresh_grace_seconds: z.number().int().min(0).max(60).default(5),
    client_cache_seconds: z.number().int().min(0).max(300).default(30),
    /** A new signing key is in JWKS this long before it signs (longer than any JWKS cache). */
    key_publish_lead_seconds: z
      .number()
      .int()
      .min(0)
      .max(7 * 86400)
      .default(900),
    /** The cron trigger rotates keys older than this. */
    key_rotation_days: z.number().int().min(1).max(365).default(30),
  })
  .strict();
export type Policy = z.infer<typeof policySchema>;

const secret = (name: string) =>
  z
    .string({ error: `${name} is required` })
    .min(32, `${name} must be at least 32 characters of random data`)
    .refine((v) => !/^(changeme|secret|test|example|x+)$/i.test(v), `${name} is a placeholder`);

const json = <T extends z.ZodType>(schema: T) =>
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

const privateJwk = z.object({ kty: z.enum(["RSA", "EC"]), d: z.string().min(1) }).loose();

const envSchema = z
  .object({
    ENVIRONMENT: z.enum(["development", "test", "production"]),
    ISSUER: z.url().refine((u) => !u.endsWith("/"), "ISSUER must not end with /"),
    ISSUER_NAME: z.string().min(1).max(100).default("Keyway"),
    ADMIN_TOKEN: secret("ADMIN_TOKEN"),
    OTP_HMAC_SECRET: secret("OTP_HMAC_SECRET"),
    /** Seals the private halves of rotated signing keys kept in D1. */
    KEY_ENCRYPTION_SECRET: secret("KEY_ENCRYPTION_SECRET"),
    SIGNING_KEY_RS256: json(privateJwk.extend({ kty: z.literal("RSA") })),
    SIGNING_KEY_ES256: json(privateJwk.extend({ kty: z.literal("EC"), crv: z.literal("P-256") })),
    MAIL_TRANSPORT: z.enum(["dev"]),
    MAIL_FROM: z.email().default("login@keyway.invalid"),
    SIGNUP: z.enum(["open", "invite"]).default("open"),
    SHARDS: json(shardsSchema),
    POLICY: json(policySchema).default(policySchema.parse({})),
    DEMO_APP: z.enum(["on", "off"]).default("off"),
  })
  .strict()
  .superRefine((env, ctx) => {
    if (env.ENVIRONMENT !== "production") return;
    if (!env.ISSUER.startsWith("https://"))
      ctx.addIssue({ code: "custom", path: ["ISSUER"], message: "production requires an https issuer" });
    if (env.MAIL_TRANSPORT === "dev")
      ctx.addIssue({ code: "custom", path: ["MAIL_TRANSPORT"], message: "the dev mailbox is never on in production" });
    if (env.DEMO_APP === "on")
      ctx.addIssue({ code: "custom", path: ["DEMO_APP"], message: "the demo app is local-only" });
  });

export type Config = z.infer<typeof envSchema> & { secureCookies: boolean };

export class ConfigError extends Error {
  override name = "ConfigError";
}

const cache = new WeakMap<object, Config>();

/** Parses the string variables of `env` once per isolate (keyed by the env object). */
export function loadConfig(env: object): Config {
  const hit = cache.get(env);
  if (hit) return hit;
  // Bindings are objects; `__`-prefixed strings are the platform's own (e.g. the test pool's).
  const vars = Object.fromEntries(Object.entries(env).filter(([k, v]) => typeof v === "string" && !k.startsWith("__")));
  const parsed = envSchema.safeParse(vars);
  if (!parsed.success) {
    const detail = parsed.error.issues.map((i) => `${i.path.join(".") || "env"}: ${i.message}`).join("; ");
    throw new ConfigError(`invalid Keyway configuration: ${detail}`);
  }
  const config = { ...parsed.data, secureCookies: parsed.data.ISSUER.startsWith("https://") };
  cache.set(env, config);
  return config;
}
