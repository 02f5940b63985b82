import { z } from "zod";
// With its extension: scripts/deploy.mjs imports config.ts in Node (type stripping), which resolves no bare paths.
import { brandingSchema } from "../branding/branding.ts";
import { displayName } from "../branding/display-name.ts";
import { LOCALE_TAGS } from "../branding/i18n/locales.ts";
import { DEFAULT_REGIONS, regionsSchema } from "./regions.ts";
import { MAX_SHARDS } from "./shard-plan.ts";

/**
 * Keyway's configuration: every string variable and secret of a Worker, parsed once per isolate.
 * Unknown variables, missing secrets and insecure values fail loudly at the first request,
 * which answers 503 `server_error` until the deployment is fixed.
 */

export const STORE_NAMES = ["session", "challenge", "code", "revocation", "refresh"] as const;
export type StoreName = (typeof STORE_NAMES)[number];
/** Stores whose generations can be appended live (POST /admin/v1/shards): the login's five and the entity store. */
export const LIVE_STORES = [...STORE_NAMES, "entity"] as const;
export type LiveStoreName = (typeof LIVE_STORES)[number];

const shardCount = z.number().int().min(1).max(1024);
/**
 * One generation: its shard count, or `{shards, from}` for a generation appended to a running
 * deployment. Every Worker routes ids of a listed generation at once; new ids are issued into it only
 * from `from` on. A rollout (or a live config change) that reaches every Worker before `from` never
 * meets an id a Worker does not know yet (accept before issue).
 */
const generation = z.union([
  shardCount,
  z.object({ shards: shardCount, from: z.iso.datetime({ offset: true }) }).strict(),
]);
const generations = z
  .array(generation)
  .min(1)
  .max(36)
  .transform((list) => ({
    counts: list.map((g) => (typeof g === "number" ? g : g.shards)),
    from: list.map((g) => (typeof g === "number" ? 0 : Date.parse(g.from))),
  }))
  .refine((g) => g.from.every((t, i) => i === 0 || t >= (g.from[i - 1] as number)), {
    message: "a generation's `from` may not be earlier than the one before it",
  });

const storeGenerations = Object.fromEntries(STORE_NAMES.map((s) => [s, generations])) as Record<
  StoreName,
  typeof generations
>;

/** Each store's shard counts by generation; the last entry is the newest generation. */
const rawShardsSchema = z
  .object(storeGenerations)
  .extend({
    /**
     * Shard counts of the two write-behind objects, MailOutbox and AuditBuffer. Optional: they hold
     * only transient rows (a mail waiting for a retry, audit events waiting for the next D1 flush)
     * whose alarms run wherever they are, so a count can change at any time.
     */
    mail: generations.default({ counts: [4], from: [0] }),
    audit: generations.default({ counts: [4], from: [0] }),
    /** Webhook queues (issue 25): an endpoint's messages stay in the shard chosen when it was created. */
    webhook: generations.default({ counts: [4], from: [0] }),
    /**
     * Entities and grants (issue 24): sized by what they hold, not by logins (a login never calls
     * them). An entity stays in the shard its id names; a generation appended when a shard grows past
     * `entity_shard_split_bytes` takes the new ones (docs/storage.md).
     */
    entity: generations.default({ counts: [16], from: [0] }),
    /**
     * A region's own counts (issue 12), for the stores it lists; the others follow the counts above.
     * A region's list is its own history: it only ever grows at the end, like the default's.
     */
    regions: z
      .record(
        z.string().regex(/^[a-z][a-z0-9]{1,7}$/),
        z
          .object(storeGenerations)
          .extend({ mail: generations, audit: generations, webhook: generations, entity: generations })
          .partial()
          .strict(),
      )
      .default({}),
  })
  .strict();

export type ShardedName = Exclude<keyof z.infer<typeof rawShardsSchema>, "regions">;
export type Generations = { counts: number[]; from: number[] };

/**
 * The parsed SHARDS: each store's shard count by generation (`SHARDS.session[gen]`), and, apart,
 * from when each generation may be issued into (`issueFrom`, epoch ms; 0 for at once) and each
 * region's own lists (`regions`; see shardsIn).
 */
export type ShardConfig = Record<ShardedName, number[]> & {
  readonly issueFrom: Readonly<Record<ShardedName, readonly number[]>>;
  readonly regions: Readonly<Record<string, Partial<Record<ShardedName, Generations>>>>;
};

/** A ShardConfig from its lists (the parsed SHARDS; the router builds the per-region and live ones the same way). */
export function shardConfig(
  lists: Record<ShardedName, Generations>,
  regions: Record<string, Partial<Record<ShardedName, Generations>>>,
): ShardConfig {
  const names = Object.keys(lists) as ShardedName[];
  const counts = Object.fromEntries(names.map((n) => [n, lists[n].counts])) as Record<ShardedName, number[]>;
  const issueFrom = Object.fromEntries(names.map((n) => [n, lists[n].from])) as Record<ShardedName, number[]>;
  // Not enumerable: code that walks the stores (Object.keys, JSON) sees only the stores.
  Object.defineProperty(counts, "issueFrom", { value: issueFrom, enumerable: false });
  return Object.defineProperty(counts, "regions", { value: regions, enumerable: false }) as ShardConfig;
}

const shardsSchema = rawShardsSchema.transform((raw): ShardConfig => {
  const { regions, ...lists } = raw;
  return shardConfig(lists, regions as Record<string, Partial<Record<ShardedName, Generations>>>);
});

/** The policy's fields, before the cross-field checks (tenants.ts picks the ones a tenant may set). */
export const policyFields = z.object({
  otp_ttl_seconds: z.number().int().min(60).max(600).default(300),
  otp_max_attempts: z.number().int().min(1).max(10).default(5),
  /**
   * Wrong codes per hour for one address from one source (an IPv4 address, an IPv6 /48); then that
   * source is refused for the address until its hour ends. Per source, so one source cannot lock a
   * person out (issue 15); the bound on guessing is the all-sources number and the consecutive cap.
   */
  email_failures_per_hour: z.number().int().min(1).max(100).default(10),
  /** Wrong codes per hour for one address from every source together; then the address is locked. */
  email_failures_per_hour_all_sources: z.number().int().min(1).max(100).default(30),
  /**
   * Wrong codes in a row for an address, across hours, before it is locked until a day after the
   * last one (a success resets the count). NIST SP 800-63B §5.2.2 allows at most 100.
   */
  email_consecutive_failures: z.number().int().min(10).max(100).default(100),
  resend_interval_seconds: z.number().int().min(10).max(600).default(60),
  sends_per_email_per_hour: z.number().int().min(1).max(100).default(10),
  /**
   * Per-IP quotas a minute, per Cloudflare location (the Workers Rate Limiting binding); raised,
   * never disabled, for load tests. The per-email limits above guard each address; these cap what
   * one address (an office behind NAT, a test suite on one machine) can spread over many, so they
   * sit well above one person's logins.
   */
  ip_generate_per_minute: z.number().int().min(1).max(1_000_000).default(100),
  ip_verify_per_minute: z.number().int().min(1).max(1_000_000).default(200),
  /**
   * POST /device_authorization per client address a minute (op-token's Rate Limiting binding): each
   * request stores a pending device request for `device_code_ttl_seconds`, so it is bounded like a
   * code sent (issue 27 item 7).
   */
  ip_device_authorization_per_minute: z.number().int().min(1).max(1_000_000).default(30),
  /**
   * Failed client authentications (a wrong secret, a refused assertion) per client id and client
   * address a minute, op-token's Rate Limiting binding; then 429 (issue 27 item 11).
   */
  client_auth_failures_per_minute: z.number().int().min(1).max(1_000_000).default(20),
  /** Requests one Worker isolate works on at once; beyond it, 503 with Retry-After (load shedding). */
  max_inflight_requests: z.number().int().min(1).max(100_000).default(48),
  /**
   * Estimated queueing in an isolate (ms; admission.ts) past which new work is refused, 503 with a
   * Retry-After from the backlog (issue 27 item 17): a bound in time, not only in flight.
   */
  admission_latency_ms: z.number().int().min(10).max(60_000).default(150),
  /**
   * Webhook delivery (docs/webhooks.md): how long a message is retried, after how many failed attempts
   * in a row over how long an endpoint is disabled, and how long an attempt may take. The store Worker
   * reads them from the same POLICY (workers/shared/events/webhooks/endpoints.ts).
   */
  webhook_retry_window_seconds: z
    .number()
    .int()
    .min(60)
    .max(7 * 86_400)
    .default(86_400),
  webhook_disable_after_failures: z.number().int().min(1).max(100_000).default(50),
  webhook_disable_after_seconds: z
    .number()
    .int()
    .min(0)
    .max(30 * 86_400)
    .default(3 * 86_400),
  webhook_timeout_ms: z.number().int().min(1_000).max(30_000).default(10_000),
  /**
   * Webhook endpoints one tenant may have (issue 38 item 5): each subscribed endpoint is a delivery of
   * every event, so a tenant's fan-out is bounded; over it, `POST /webhooks` is 409.
   */
  webhook_endpoints_per_tenant: z.number().int().min(1).max(1_000).default(50),
  /** How long a request body may take to arrive; then 408 (a slow sender is not in flight till it has). */
  body_deadline_seconds: z.number().int().min(1).max(60).default(10),
  /**
   * Issue 38: a running import job refreshes its row's `updated_at` (its heartbeat) after each batch
   * and every few seconds while it reads; one whose heartbeat is older than this died with its Worker
   * (a crash, a deploy, a kill) and is marked `interrupted` by op-mgmt's cron and by a read of the
   * jobs. It must exceed body_deadline_seconds (a read waits at most that long) and a batch's writes.
   */
  import_stale_after_seconds: z.number().int().min(5).max(3600).default(120),
  login_tx_ttl_seconds: z.number().int().min(60).max(3600).default(900),
  /** RFC 8628: how long a device's request waits for a person (`expires_in`), and its first polling `interval`. */
  device_code_ttl_seconds: z.number().int().min(60).max(1800).default(600),
  device_poll_interval_seconds: z.number().int().min(1).max(60).default(5),
  code_ttl_seconds: z.number().int().min(10).max(600).default(60),
  session_ttl_seconds: z
    .number()
    .int()
    .min(300)
    .max(30 * 86400)
    .default(86400),
  access_token_ttl_seconds: z.number().int().min(60).max(86400).default(600),
  /**
   * How access tokens are signed. RS256, the default, is what RFC 9068 §2.1 has every resource server
   * support; ES256 costs about a thirtieth of the CPU (docs/performance.md) for deployments whose
   * resource servers verify it. Both keys are in JWKS either way. An ES256 signature is not
   * deterministic, so a refresh retried within the grace window then gets equal claims, not equal bytes.
   */
  access_token_signing_alg: z.enum(["RS256", "ES256"]).default("RS256"),
  id_token_ttl_seconds: z.number().int().min(60).max(86400).default(600),
  refresh_token_ttl_seconds: z
    .number()
    .int()
    .min(3600)
    .max(365 * 86400)
    .default(30 * 86400),
  refresh_grace_seconds: z.number().int().min(0).max(60).default(5),
  /**
   * Rotations one refresh family may make in an hour; then 429 with Retry-After. Every rotation
   * keeps a spent-token row for the family's life (reuse detection), so an unlimited loop would
   * grow storage without bound. A client refreshing at each access-token expiry needs 6.
   */
  refresh_rotations_per_hour: z.number().int().min(6).max(3600).default(60),
  /**
   * How long an isolate may keep a client registration (and a CORS origin check) it read from D1,
   * which saves a D1 read per authorize and token request. An admin change (a deleted client, a new
   * secret, new redirect URIs) holds at once in the isolate that made it and in those op-mgmt
   * reaches by its service bindings, and within this bound everywhere (docs/security.md). A new
   * secret is also accepted at once everywhere (a cached client whose secret does not match is read
   * again). 0 reads D1 every time.
   */
  client_cache_seconds: z.number().int().min(0).max(300).default(30),
  /** A new signing key is in JWKS this long before it signs (longer than any JWKS cache). */
  key_publish_lead_seconds: z
    .number()
    .int()
    .min(0)
    .max(7 * 86400)
    .default(900),
  /**
   * Ids issued before they carried a MAC (a 43-character secret) are accepted until this time. Set
   * it, to the upgrade plus the longest id lifetime (refresh_token_ttl_seconds), when upgrading a
   * deployment that ran before; unset, they are refused like any made-up id.
   */
  legacy_ids_until: z.iso.datetime({ offset: true }).optional(),
  /**
   * How long an isolate keeps the shard generations appended through the admin API (issue 13)
   * before it reads them from D1 again. A new generation is issued into only after this (plus a
   * minute), so every isolate routes it first.
   */
  shard_config_cache_seconds: z.number().int().min(1).max(300).default(30),
  /**
   * Issue 24: when an entity shard of the current generation holds more than this (bytes of SQLite),
   * op-mgmt's cron appends an entity generation with twice the shards (new entities go there; existing
   * ones stay), or, with the shard controller off, logs an error at every run. A Durable Object's
   * SQLite stops at 10 GB; a shard refuses new writes at 9 GiB.
   */
  entity_shard_split_bytes: z
    .number()
    .int()
    .min(16 * 1024 ** 2)
    .max(8 * 1024 ** 3)
    .default(4 * 1024 ** 3),
  /**
   * The shard controller (op-mgmt's cron, issue 13): appends a generation with twice the shards when
   * a store's busiest shard stays above `ceiling_per_shard` calls/s, or with half when every shard
   * stays below `floor_per_shard`, for `runs` runs in a row, at most every `min_interval_minutes`,
   * never above `max_shards`. Off by default: an operator turns it on after reading docs/sharding.md.
   */
  shard_controller: z
    .object({
      enabled: z.boolean().default(false),
      ceiling_per_shard: z.number().positive().max(1000).default(300),
      floor_per_shard: z.number().min(0).max(100).default(3),
      runs: z.number().int().min(1).max(12).default(2),
      min_interval_minutes: z.number().int().min(1).max(1440).default(30),
      max_shards: z.number().int().min(1).max(MAX_SHARDS).default(64),
    })
    .strict()
    .default({
      enabled: false,
      ceiling_per_shard: 300,
      floor_per_shard: 3,
      runs: 2,
      min_interval_minutes: 30,
      max_shards: 64,
    }),
  /** Audit events older than this are deleted by op-mgmt's cron, in batches (docs/storage.md). */
  audit_retention_days: z.number().int().min(1).max(3650).default(90),
  /** The cron trigger rotates keys older than this. */
  key_rotation_days: z.number().int().min(1).max(365).default(30),
  /** Delivery attempts per one-time-code mail (the first included), retried by the MailOutbox alarm. */
  mail_attempts: z.number().int().min(1).max(10).default(5),
  /** The first retry's delay; each later one waits three times longer (10 s, 30 s, 90 s, ...). */
  mail_retry_seconds: z.number().int().min(1).max(300).default(10),
  /** How long the first attempt, in the Worker after the response, may take before the outbox takes over. */
  mail_timeout_seconds: z.number().int().min(1).max(20).default(8),
  /**
   * How long an isolate keeps a tenant's record (name, status, policy, mail) it read from D1. A
   * change holds at once where op-mgmt reaches, within this bound everywhere (tenants.ts).
   */
  tenant_cache_seconds: z.number().int().min(1).max(300).default(30),
  /**
   * Issue 40: Dynamic Client Registration (RFC 7591) without an initial access token. Off: every
   * `POST <issuer>/register` needs one a tenant admin minted (docs/security.md). A tenant may turn
   * it on for itself (its policy), the default tenant by POLICY.
   */
  open_registration: z.boolean().default(false),
});
const policySchema = policyFields
  .strict()
  .refine((p) => p.email_failures_per_hour_all_sources >= p.email_failures_per_hour, {
    message: "email_failures_per_hour_all_sources must be at least email_failures_per_hour",
    path: ["email_failures_per_hour_all_sources"],
  })
  .refine((p) => p.import_stale_after_seconds > p.body_deadline_seconds, {
    message: "import_stale_after_seconds must exceed body_deadline_seconds (an import's read waits that long)",
    path: ["import_stale_after_seconds"],
  });
export type Policy = z.infer<typeof policySchema>;

const secret = (name: string) =>
  z
    .string({ error: `${name} is required` })
    .min(32, `${name} must be at least 32 characters of random data`)
    // A placeholder, or a word repeated to length (`changemechangeme…` has 7 distinct characters; 32
    // random base64url or hex characters have about 25 or 14).
    .refine((v) => !/^(changeme|secret|test|example|x+)$/i.test(v) && new Set(v).size >= 8, `${name} is a placeholder`);

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

/** Mail: the transport and its settings. Checked per transport by `checkMail`. */
const mailFields = {
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
function checkMail(env: MailFields, ctx: z.core.$RefinementCtx): void {
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

export class ConfigError extends Error {
  override name = "ConfigError";
}

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

/**
 * The string variables of `env` through `schema`, or a ConfigError naming every bad variable. Bindings
 * are objects; `__`-prefixed strings are the platform's own (e.g. the test pool's).
 */
function parseVars<S extends z.ZodType<{ MAIL_TRANSPORT: string }>>(env: object, schema: S, what: string): z.infer<S> {
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
