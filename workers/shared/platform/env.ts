import type { StoreNamespaces } from "../../../durable-objects/namespaces";

/**
 * Bindings every Keyway Worker has; string variables are parsed by `loadConfig`. The Durable Object
 * namespaces (SESSIONS, CHALLENGES, AUTH_CODES, REVOCATIONS, REFRESH_TOKENS, MAIL_OUTBOX, AUDIT) come
 * from STORE_BINDINGS in the contract, the same table the wrangler configs are checked against.
 */
export interface Env extends StoreNamespaces {
  DB: D1Database;
  /** op-auth's per-IP quotas (Workers Rate Limiting; see workers/shared/request/ip-quota.ts). */
  IP_GENERATE_LIMIT?: RateLimit;
  IP_VERIFY_LIMIT?: RateLimit;
  /** op-token's per-IP quota on POST /device_authorization (issue 27 item 7). */
  IP_DEVICE_AUTHORIZATION_LIMIT?: RateLimit;
  /** op-token's quota on failed client authentications per client and address (issue 27 item 11). */
  CLIENT_AUTH_FAILURE_LIMIT?: RateLimit;
  /** op-mgmt only: the other Workers, for their counters and cached clients (workers/shared/app/isolate.ts). */
  OP_AUTH?: Fetcher;
  OP_TOKEN?: Fetcher;
  /** Cloudflare Email Service, only with MAIL_TRANSPORT=send_email (config checks it is there). */
  SEND_EMAIL?: SendEmail;
}
