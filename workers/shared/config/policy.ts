import { z } from "zod";
import { MAX_SHARDS } from "./shard-plan.ts";

/**
 * POLICY: every policy number a deployment sets, with its default and bounds, and the cross-field
 * checks. A tenant overrides the fields tenants.ts picks from `policyFields`; docs/security.md has
 * the table of what each one guards.
 */

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
  /** Requests one Worker isolate works on at once; beyond it, new work is 503 with Retry-After (load shedding). */
  max_inflight_requests: z.number().int().min(1).max(100_000).default(48),
  /**
   * New logins one isolate has admitted and not yet seen to their `redirect_to` (admission.ts); beyond
   * it, a new login is 503 with Retry-After while the steps of those under way go on (issue 44 item 3).
   * Unset: 16 on the local one-thread runtime (development, test), 512 in production (admission.ts
   * `loginsBound`), where a person's login holds its place for up to `login_slot_seconds`.
   */
  max_logins_under_way: z.number().int().min(1).max(100_000).optional(),
  /**
   * Places past `max_logins_under_way` that a stall may take (admission.ts `takeLoginPlace`): on the
   * one-thread local runtime a pause of a few hundred ms (another process on the cores, a collection)
   * piles logins up to the bound with no overload behind it. Spent one a login admitted past the bound,
   * regained only while fewer than half the bound are under way, so under overload, where the count
   * stays at the bound, they are spent once. Unset: 16 locally (development, test), 0 in production.
   */
  login_burst: z.number().int().min(0).max(100_000).optional(),
  /** The longest a login counts as under way (s): an abandoned one frees its place after this. */
  login_slot_seconds: z.number().int().min(1).max(3_600).default(2),
  /**
   * Estimated queueing in an isolate (ms; admission.ts) past which new work is refused, 503 with a
   * Retry-After from the backlog (issue 27 item 17). 0, the default, leaves it off: the estimate
   * comes after the queue, and rises when another process takes the CPU (issue 44 item 3).
   */
  admission_latency_ms: z
    .number()
    .int()
    .min(0)
    .max(60_000)
    .refine((v) => v === 0 || v >= 10, "0 (off) or at least 10")
    .default(0),
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
   * A new generation's `issue_from` is `shard_config_cache_seconds` plus this ahead of its append:
   * the margin for isolates whose clocks or D1 reads lag. A minute in a deployment; a single-machine
   * test stack (npm run smoke) lowers it so a live change is seen in seconds.
   */
  shard_issue_margin_seconds: z.number().int().min(2).max(3600).default(60),
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
   * RFC 9126: how long a pushed authorization request's request_uri may be used (once). RFC 9126
   * §2.2's example is 60 s; FAPI 2.0 asks for under 600.
   */
  pushed_request_ttl_seconds: z.number().int().min(10).max(599).default(60),
  /** RFC 9126 §5: every authorization request of the tenant must be pushed (a client may ask it for itself). */
  require_pushed_authorization_requests: z.boolean().default(false),
  /**
   * Issue 40: Dynamic Client Registration (RFC 7591) without an initial access token. Off: every
   * `POST <issuer>/register` needs one a tenant admin minted (docs/security.md). A tenant may turn
   * it on for itself (its policy), the default tenant by POLICY.
   */
  open_registration: z.boolean().default(false),
  /**
   * Issue 40: whether a confidential client registered at `<issuer>/register` without saying
   * `require_pkce` must use PKCE (true, the default). False: such a client may sign in without it
   * (OIDC Core's code flow, RFC 9700 §2.1.1), as the OpenID Foundation's dynamic plan does. A public
   * client (`none`) always uses PKCE; the admin API's default stays true.
   */
  registration_require_pkce: z.boolean().default(true),
  /**
   * Whether a private_key_jwt assertion's `aud` may also be the tenant's own token endpoint URL, as
   * its only value (a string or a one-element array), besides the issuer identifier. Off by default:
   * RFC 10070 asks for the issuer identifier alone, because an audience naming an endpoint lets
   * another authorization server the client trusts replay the assertion ("audience injection"). On:
   * what OIDC Core §9 advised ("SHOULD be the URL of the Authorization Server's Token Endpoint") and
   * the OpenID Foundation's suite sends (docs/security.md).
   */
  client_assertion_token_endpoint_audience: z.boolean().default(false),
  /**
   * RFC 9449 §8: whether a DPoP proof must carry a nonce this server issued (`DPoP-Nonce`); without
   * one the answer is `use_dpop_nonce` with a fresh nonce. Off: a nonce is checked only when sent.
   */
  dpop_require_nonce: z.boolean().default(false),
  /**
   * RFC 9449 §11.1: how old a DPoP proof's `iat` may be. Its jti is remembered as long (single use),
   * so a longer window is more storage in the home region's revocation shards.
   */
  dpop_proof_max_age_seconds: z.number().int().min(10).max(300).default(60),
  /**
   * Issue 42: when the pages offer to create a passkey after an email-code sign-in. `after_sign_in`
   * (the default): unless "Not now" was pressed in this browser in the last 30 days; `always`: after
   * every email-code sign-in; `off`: never (a passkey already made still signs in).
   */
  passkey_offer: z.enum(["after_sign_in", "always", "off"]).default("after_sign_in"),
});
export const policySchema = policyFields
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
