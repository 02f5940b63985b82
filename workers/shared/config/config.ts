import { z } from "zod";
// With their extensions: scripts/deploy.mjs imports config.ts in Node (type stripping), which resolves no bare paths.
import { brandingSchema } from "../branding/branding.ts";
import { displayName } from "../branding/display-name.ts";
import { LOCALE_TAGS } from "../branding/i18n/locales.ts";
import { checkMail, mailFields } from "./mail-settings.ts";
import { policySchema } from "./policy.ts";
import { DEFAULT_REGIONS, regionsSchema } from "./regions.ts";
import { shardsSchema } from "./shards.ts";
import { json, parseVars, secret } from "./vars.ts";

/**
 * Keyway's configuration: every string variable and secret of a Worker, parsed once per isolate.
 * Unknown variables, missing secrets and insecure values fail loudly at the first request,
 * which answers 503 `server_error` until the deployment is fixed.
 */

const privateJwk = z.object({ kty: z.enum(["RSA", "EC"]), d: z.string().min(1) }).loose();

const envSchema = z
  .object({
    ENVIRONMENT: z.enum(["development", "test", "production"]),
    ISSUER: z.url().refine((u) => !u.endsWith("/"), "ISSUER must not end with /"),
    ISSUER_NAME: displayName(100).default("Keyway"),
    /** The default tenant's branding of its pages and mail (issue 26, branding.ts), as JSON. */
    BRANDING: json(brandingSchema).default({}),
    /** The language of pages and mail when neither `ui_locales` nor Accept-Language names one Keyway has. */
    DEFAULT_LOCALE: z.enum(LOCALE_TAGS).default("en"),
    ADMIN_TOKEN: secret("ADMIN_TOKEN"),
    OTP_HMAC_SECRET: secret("OTP_HMAC_SECRET"),
    /** Seals the private halves of rotated signing keys kept in D1. */
    KEY_ENCRYPTION_SECRET: secret("KEY_ENCRYPTION_SECRET"),
    /** Pairwise subject identifiers (OIDC Core §8.1, subjects.ts): changing it changes every pairwise `sub`. */
    PAIRWISE_SECRET: secret("PAIRWISE_SECRET"),
    SIGNING_KEY_RS256: json(privateJwk.extend({ kty: z.literal("RSA") })),
    SIGNING_KEY_ES256: json(privateJwk.extend({ kty: z.literal("EC"), crv: z.literal("P-256") })),
    ...mailFields,
    SIGNUP: z.enum(["open", "invite"]).default("open"),
    SHARDS: json(shardsSchema),
    /** Where logins are placed (issue 12, workers/shared/config/regions.ts); one first-touch region when unset. */
    REGIONS: json(regionsSchema).default(regionsSchema.parse(JSON.parse(DEFAULT_REGIONS))),
    POLICY: json(policySchema).default(policySchema.parse({})),
    /**
     * Load tests (k6, also on k6 Cloud against a deployment): mail to this domain is captured in D1 and
     * served to the admin at `/admin/v1/test-mailbox/{email}` instead of being sent. Only a reserved
     * domain (RFC 2606/6761: .test, .invalid, .example) can be one, so no real address is ever captured.
     */
    /**
     * Custom hosts served as a tenant (issue 23): `{"login.acme.com": "acme"}`. The operator routes the
     * host to Keyway; on it the tenant's issuer is `https://login.acme.com`, and its `/t/<tenant>` paths
     * on the main host answer 404 (one issuer per tenant).
     */
    TENANT_HOSTS: json(
      z.record(
        z.string().regex(/^[a-z0-9.-]{1,253}(:[0-9]{1,5})?$/, "a host name, lower-case, with an optional port"),
        z.string().regex(/^[a-z0-9-]{2,40}$/, "a tenant id"),
      ),
    ).default({}),
    LOADTEST_EMAIL_DOMAIN: z
      .string()
      .regex(/^([a-z0-9-]+\.)+(test|invalid|example)$/, "must be a reserved domain under .test, .invalid or .example")
      .optional(),
  })
  .strict()
  .superRefine((env, ctx) => {
    checkMail(env, ctx);
    for (const region of Object.keys(env.SHARDS.regions))
      if (!(region in env.REGIONS.regions))
        ctx.addIssue({ code: "custom", path: ["SHARDS", "regions", region], message: `${region} is not in REGIONS` });
    if (env.ENVIRONMENT !== "production") return;
    if (!env.ISSUER.startsWith("https://"))
      ctx.addIssue({ code: "custom", path: ["ISSUER"], message: "production requires an https issuer" });
  });

/**
 * The configuration a request sees: the deployment's, as a tenant views it (tenants.ts tenantView
 * sets the tenant's issuer, name, policy and mail; the `default` tenant is the deployment's own).
 */
export type Config = z.infer<typeof envSchema> & {
  secureCookies: boolean;
  /** The tenant this configuration is the view of (`default` for the deployment's own issuer). */
  TENANT: string;
  /** The path cookies are scoped to: `/`, or `/t/<tenant>` for a tenant served under a path. */
  cookiePath: string;
  /** A tenant's Reply-To for its mail, when it has one. */
  MAIL_REPLY_TO?: string | undefined;
};

const cache = new WeakMap<object, Config>();

/** Parses the string variables of `env` once per isolate (keyed by the env object). */
export function loadConfig(env: object): Config {
  const hit = cache.get(env);
  if (hit) return hit;
  const data = parseVars(env, envSchema, "configuration");
  const config: Config = {
    ...data,
    secureCookies: data.ISSUER.startsWith("https://"),
    TENANT: "default",
    cookiePath: "/",
  };
  cache.set(env, config);
  return config;
}
