import type {
  AuditBuffer,
  AuthCodeStore,
  ChallengeStore,
  MailOutbox,
  RefreshTokenRotator,
  RevocationStore,
  SessionStore,
} from "../../durable-objects/contract";

/** Bindings every Keyway Worker has; string variables are parsed by `loadConfig`. */
export interface Env {
  DB: D1Database;
  SESSIONS: DurableObjectNamespace<SessionStore>;
  CHALLENGES: DurableObjectNamespace<ChallengeStore>;
  AUTH_CODES: DurableObjectNamespace<AuthCodeStore>;
  REVOCATIONS: DurableObjectNamespace<RevocationStore>;
  REFRESH_TOKENS: DurableObjectNamespace<RefreshTokenRotator>;
  /** Retries of one-time-code mail (workers/shared/mail). */
  MAIL_OUTBOX: DurableObjectNamespace<MailOutbox>;
  /** Write-behind buffers of the audit trail (workers/shared/audit.ts). */
  AUDIT: DurableObjectNamespace<AuditBuffer>;
  /** op-auth's per-IP quotas (Workers Rate Limiting; see workers/op-auth/src/ip-quota.ts). */
  IP_GENERATE_LIMIT?: RateLimit;
  IP_VERIFY_LIMIT?: RateLimit;
  /** op-mgmt only: the other Workers, for their counters and cached clients (workers/shared/isolate.ts). */
  OP_AUTH?: Fetcher;
  OP_TOKEN?: Fetcher;
  /** Cloudflare Email Service, only with MAIL_TRANSPORT=send_email (config checks it is there). */
  SEND_EMAIL?: SendEmail;
}
