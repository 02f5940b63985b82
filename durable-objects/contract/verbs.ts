/**
 * The store boundary: every type a Worker and a Durable Object exchange (RPC arguments as named
 * objects, results, audit events). It imports nothing: the stores import it, and the stores' classes
 * as stub types (namespaces.ts) import the stores, so types flow one way, contract → stores →
 * namespaces → Workers. Workers import from the Durable Object folder only this file and
 * namespaces.ts, type-only (`npm run check` enforces it: tools/check-imports.mjs); the stores import
 * only leaf modules of workers/shared. No runtime code besides AUDIT_KINDS and the table below.
 */

/**
 * Every sharded Durable Object: its binding in each Worker's Env and wrangler config, and its class
 * in the store Worker. `npm run check` fails when a wrangler.toml binding block disagrees with it.
 */
export const STORE_BINDINGS = {
  session: { binding: "SESSIONS", class: "SessionStore" },
  challenge: { binding: "CHALLENGES", class: "ChallengeStore" },
  code: { binding: "AUTH_CODES", class: "AuthCodeStore" },
  revocation: { binding: "REVOCATIONS", class: "RevocationStore" },
  refresh: { binding: "REFRESH_TOKENS", class: "RefreshTokenRotator" },
  mail: { binding: "MAIL_OUTBOX", class: "MailOutbox" },
  audit: { binding: "AUDIT", class: "AuditBuffer" },
  webhook: { binding: "WEBHOOKS", class: "WebhookOutbox" },
  entity: { binding: "ENTITIES", class: "EntityStore" },
} as const;

// ---- The audit trail: events a store writes in its own transaction (audit-outbox.ts) or buffers (AuditBuffer).

/**
 * The audit trail: events land in D1 `audit_events`, written behind the request through an outbox in
 * a Durable Object's SQLite storage, which its alarm flushes to D1 in batches. The events of a
 * successful login (code_sent, sign_in, token_issued) go with the store call the step already makes,
 * in its transaction; any other event goes to an AuditBuffer shard in `waitUntil` (after the
 * response). A code grant's token_issued is therefore written when the code is redeemed: if signing
 * then fails, the code is spent all the same, and the event records that redemption. No event
 * carries a code, token or cookie.
 */
export const AUDIT_KINDS = [
  "sign_in",
  "code_sent",
  "code_failed",
  "mail_failed",
  "lockout",
  "token_issued",
  "refresh_reuse",
  "logout",
  "admin_change",
  "key_rotation",
  "device_decision",
  "shard_change",
  "webhook_disabled",
  "grant_revoked",
  // Issue 40: a client registered, replaced or deleted itself (RFC 7591 / RFC 7592); detail.action.
  "client_registration",
  // Issue 42: a passkey registered or removed (detail.credential_id, detail.via), and an assertion
  // whose signature counter did not rise (refused: a cloned authenticator, or a replay).
  "passkey_created",
  "passkey_deleted",
  "passkey_counter_regression",
] as const;

export type AuditKind = (typeof AUDIT_KINDS)[number];

/** One row of `audit_events`. `id` is random and makes a repeated flush harmless (INSERT OR IGNORE). */
export interface AuditEvent {
  id: string;
  at: number;
  kind: AuditKind;
  user_id: string | null;
  /** HMAC of the normalized email (the ChallengeStore key): which address, without storing it. */
  email_key: string | null;
  client_id: string | null;
  ip: string | null;
  detail: Record<string, unknown> | null;
  /** The tenant (issue 23); absent for the default tenant's events (and every event from before tenants). */
  tenant?: string;
}

// ---- SessionStore: the login's session.

export interface AuthRequest {
  client_id: string;
  redirect_uri: string;
  scope: string;
  state?: string;
  nonce?: string;
  code_challenge: string;
  response_mode?: string;
  max_age?: number;
  prompt?: string;
  /** RFC 8707: the resources the tokens are for, checked against the client's registration. */
  resource?: string[];
  /** A login for a device's request (RFC 8628): it ends on the device page, not at a redirect URI. */
  device_user_code?: string;
  /** Issue 24: the organization the login is for; its id and the user's roles in it go in the tokens. */
  organization?: string;
  /** OIDC Core §5.5: the claims asked for by name, in the ID token and at userinfo (claims-request.ts). */
  requested_claims?: { id_token?: string[]; userinfo?: string[] };
  /** RFC 9449 §10: the JWK thumbprint of the DPoP key the code's tokens must be bound to. */
  dpop_jkt?: string;
}

export interface SessionInfo {
  sub: string;
  email: string;
  sid: string;
  auth_time: number;
  expires_at: number;
}

/** What a verified code makes: a session, born from one login transaction. */
export interface StartSession {
  /** SHA-256 of the login transaction's id: one transaction makes at most one session. */
  txHash: string;
  /** SHA-256 of the session cookie. */
  sessionHash: string;
  session: SessionInfo;
  now: number;
  /** The `sign_in` audit event, written in the same transaction. */
  signIn?: AuditEvent;
  /** Issue 44: the login's earlier events (its `code_sent`), carried by the session's row with `signIn`. */
  carried?: AuditEvent[];
  /**
   * When the session's shard writes its events to D1 itself: once the code it leads to could no
   * longer be redeemed (whose family writes them first), or at once when none follows.
   */
  auditDue?: number;
}

// ---- ChallengeStore: an address's one-time code, its limits, captured mail and known user.

export interface OtpPolicy {
  otp_ttl_seconds: number;
  otp_max_attempts: number;
  /** Wrong codes per hour for one address from one source; then that source is locked out of it. */
  email_failures_per_hour: number;
  /** Wrong codes per hour for one address from every source together; then the address is locked. */
  email_failures_per_hour_all_sources: number;
  email_consecutive_failures: number;
  resend_interval_seconds: number;
  sends_per_email_per_hour: number;
}

export type IssueResult =
  | { ok: true; expires_in: number; resend_after: number }
  | { ok: false; error: "slow_down" | "too_many_requests"; retry_after: number };

/** The user an address belongs to, as D1 said when it was last read (its email is the address itself). */
export interface KnownUser {
  id: string;
  /**
   * The user's entity grants compiled for tokens (issue 24), as the EntityStore last pushed them or a
   * sign-in read them: absent when the shard holds none (no grant, or written before grants existed).
   */
  claims?: ClaimsSnapshot;
}

/**
 * The user a verify found for the address: its id, and its compiled claims as the JSON the shard
 * stores (passed through unparsed: the Worker projects them, the shard has no use for them).
 */
export interface KnownUserFound {
  id: string;
  claims_json?: string;
}

export type VerifyResult =
  /** `spent`: the code as it was, for `restoreCode` should the answer never reach the person. */
  /**
   * `carried`: the login's `code_sent` events (JSON of AuditEvent[]: an RPC result must be
   * serializable, and `detail` is not typed so), for its session and family to carry on (issue 44).
   */
  | { status: "ok"; user: KnownUserFound | null; spent: SpentCode; carried?: string }
  /**
   * `counted`: a wrong code against a live code, counted against the address (false when there was no
   * live code to try); `locks`: that failure locked the address (issue 27 item 10: only these are
   * audit rows, so requests against addresses with no code write nothing).
   */
  | { status: "invalid"; counted?: boolean; locks?: boolean }
  | { status: "locked"; retry_after: number };

/** A code a verify spent: enough to put it back as it was (issue 38 item 12d). */
export interface SpentCode {
  attempts: number;
  expires_at: number;
}

// ---- Passkeys (issue 42): WebAuthn credentials, in the ChallengeStore shard of their address.

/**
 * A passkey sign-in's one store call: the credential is found, the assertion verified against its
 * public key (challenge, origin, RP id, user verification, signature), the login transaction's
 * challenge spent and the signature counter moved, in one call. `txExp` is the transaction's sealed
 * expiry: a credential answers each transaction's challenge once, and never one of a transaction
 * older than the last it answered.
 */
export interface PasskeySignIn {
  credentialId: string;
  emailKey: string;
  tenant: string;
  /** The AuthenticationResponseJSON as the browser sent it. */
  response: unknown;
  challenge: string;
  origin: string;
  rpId: string;
  txExp: number;
  now: number;
  ip: string | null;
}

export type PasskeySignInResult =
  | { status: "ok"; userId: string; sealedEmail: string; user: KnownUserFound | null }
  | { status: "invalid"; reason: "unknown_credential" | "challenge_spent" | "assertion" | "counter_regression" };

/** A verified registration, stored in the address's shard with its `passkey_created` event. */
export interface AddPasskey {
  credentialId: string;
  emailKey: string;
  tenant: string;
  userId: string;
  /** COSE_Key, base64url (WebAuthn §6.5.1.1 credentialPublicKey as the authenticator gave it). */
  publicKey: string;
  counter: number;
  transports: string[];
  aaguid: string;
  backedUp: boolean;
  /** The address, sealed by the Worker (the shard keeps no address in the clear). */
  sealedEmail: string;
  now: number;
  ip: string | null;
}

/** A passkey as the admin API lists it (no key material). */
export interface PasskeyInfo {
  id: string;
  user_id: string;
  aaguid: string;
  transports: string[];
  backed_up: boolean;
  sign_count: number;
  created_at: number;
  last_used_at: number | null;
}

/** Puts back the code a verify spent when its answer could not be delivered (the client had gone). */
export interface RestoreCode {
  emailKey: string;
  txHash: string;
  codeMac: string;
  spent: SpentCode;
  now: number;
}

/** Wrong codes from another region, and whether a sign-in there cleared them, told to the address's home shard (issue 12). */
export interface CountAtHome {
  emailKey: string;
  failures: number;
  /** Where the failures came from: the home counts them per source too (issue 27 item 5). */
  sourceKey?: string | null;
  reset: boolean;
  /** The source that signed in (the reset): its own failures at the home go, as they do where it signed in. */
  resetSourceKey?: string | null;
  /** The home's shards in recent earlier generations, whose counts the home carries on its first failure. */
  carryFrom?: string[] | null;
  now: number;
}

/**
 * How long after a shard count change an address's counts are carried from the shard it had before:
 * as long as any count lives (a run of wrong codes in a row, a day after its last).
 */
export const LIMITS_CARRY_WINDOW_MS = 24 * 3_600_000;

/** An address's failure counts in a shard, handed to its shard in a later generation (issue 27 item 9). */
export interface CarriedLimits {
  /** That shard carried counts from older generations itself: they are in these, so older shards are not read. */
  carried: boolean;
  failures: number;
  failures_reset_at: number;
  consecutive: number;
  consecutive_until: number;
  sources: { source_key: string; failures: number; expires_at: number }[];
}

/** The home's counts for the address: hourly failures and failures in a row, each with when it ends. */
export interface HomeCounts {
  failures: number;
  failures_until: number;
  consecutive: number;
  consecutive_until: number;
  /** The reporting source's failures for the address in every region, and when its hour ends. */
  source_failures?: number;
  source_failures_until?: number;
}

export interface IssueChallenge {
  emailKey: string;
  /** HMAC of where the request came from (an IPv4 address, an IPv6 /48): failures are counted per source. */
  sourceKey: string;
  /** SHA-256 of the login transaction's id: only that transaction can use the code. */
  txHash: string;
  codeMac: string;
  now: number;
  policy: OtpPolicy;
  /** Captured mail (dev transport, load-test addresses): kept with the code if it is issued. */
  captured?: { sealed: string };
  /**
   * The `code_sent` event of a code that goes out (issue 28: kept in this transaction, not sent to an
   * AuditBuffer after the mail); absent for an address that gets no mail.
   */
  sent?: AuditEvent;
}

export interface VerifyChallenge {
  emailKey: string;
  sourceKey: string;
  txHash: string;
  codeMac: string;
  now: number;
  policy: OtpPolicy;
  /**
   * The address's home shard (routing/shard-refs.ts shardAddress), when it is not this one (the login
   * was placed in another region than the home): a wrong code is also counted there, and until it is,
   * no other code of the address is tried here.
   */
  home?: string;
  /**
   * The address's shards in earlier generations that were current within the last day
   * (routing/shard-refs.ts recentEarlierShards): on the first wrong code here, their counts are
   * carried over, so a shard count change resets no limit (issue 27 item 9). `homeCarryFrom` is the
   * same for the home shard.
   */
  carryFrom?: string[];
  homeCarryFrom?: string[];
}

/** A captured message, sealed by the Worker under MAIL_OUTBOX_SECRET (`{to, subject, text, code}`). */
export interface CapturedRow {
  sealed: string;
  sent_at: number;
}

// ---- AuthCodeStore: spent authorization codes.

export interface RedeemCode {
  /** SHA-256 of the code. */
  codeHash: string;
  /**
   * The grant this redemption issues, or null when the presentation is refused (wrong redirect URI,
   * PKCE verifier, or an expired code): the code is spent all the same.
   */
  grantId: string | null;
  /** The login's public session id, so a later replay can revoke the grant in its sid's shard. */
  sid: string;
  /** How long the spent mark is kept: as long as the tokens the code yields live. */
  keepUntil: number;
  /** The `token_issued` audit event of a successful redemption, written in the same transaction. */
  issued?: AuditEvent;
}

export type RedeemResult = { status: "ok" } | { status: "reused"; grant_id: string; sid: string } | { status: "spent" };

/**
 * RevocationStore.redeemCodeForLogin (issue 28): the code's login is checked and the code spent in
 * one call, in the shard the login's sid names. `grantId` is recorded only if the login still stands.
 */
export interface RedeemCodeForLogin extends RedeemCode {
  login: LoginRef;
}

/** What the redemption did, and whether the login had ended (then the code is spent and issues nothing). */
export type RedeemForLoginResult = RedeemResult & { ended: boolean };

// ---- AuthCodeStore, device grants (RFC 8628): a device's request, waiting for a person's decision.

/** Who approved a device: the login of the person who entered its user code. */
export interface DeviceLogin {
  sub: string;
  email: string;
  sid: string;
  auth_time: number;
}

export interface StartDevice {
  /** SHA-256 of the device_code. */
  deviceHash: string;
  /** The user code, normalized (8 letters, no hyphen). */
  userCode: string;
  clientId: string;
  scope: string;
  intervalMs: number;
  expiresAt: number;
}

/** A pending request as the verification page shows it; `throttled` when the shard has seen too many wrong codes. */
export type DeviceView =
  | { status: "pending"; client_id: string; scope: string; expires_at: number }
  | { status: "unknown" }
  | { status: "throttled"; retry_after: number };

export interface DecideDevice {
  userCode: string;
  /** The person's login when they approve; absent when they deny. */
  approvedBy: DeviceLogin | null;
  now: number;
}

export interface PollDevice {
  deviceHash: string;
  clientId: string;
  now: number;
}

/** RFC 8628 §3.5: what a poll of the token endpoint learns. `approved` is answered once. */
export type PollResult =
  | { status: "pending" }
  | { status: "slow_down"; interval_ms: number }
  | { status: "denied" }
  | { status: "expired" }
  | { status: "approved"; login: DeviceLogin; scope: string }
  | { status: "invalid" };

// ---- RefreshTokenRotator: one refresh family per login.

export interface FamilyGrant {
  client_id: string;
  sub: string;
  email: string;
  sid: string;
  scope: string;
  auth_time: number;
  /** RFC 8707: the resources granted; a refresh may ask for some of them, never another. */
  resource?: string[];
  /** Issue 24: what the login's tokens carried from organizations and grants; a refresh recomputes it. */
  claims?: LoginClaims;
  /** OIDC Core §5.5: the claims the authorization request asked for; a refresh's tokens carry them too. */
  requested_claims?: { id_token?: string[]; userinfo?: string[] };
  /**
   * RFC 9449 §5: a public client's family issued with DPoP is bound to the key with this JWK
   * thumbprint; a refresh must prove that key.
   */
  dpop_jkt?: string;
}

/**
 * RefreshTokenRotator.startCodeFamily (issue 28): a login's family, made by its authorization code's
 * redemption and standing as the code's spend. Its id is derived from the code's (op-token), so a
 * second presentation of the code finds it.
 */
export interface StartCodeFamily {
  familyHash: string;
  tokenHash: string;
  grant: FamilyGrant;
  now: number;
  expiresAt: number;
  /** False for a presentation that issues nothing (wrong verifier, expired code): the family is made revoked, only to spend the code. */
  issue: boolean;
  /** The `token_issued` event, written with a family that issues. */
  issued?: AuditEvent;
  /** Issue 44: the login's earlier events (`code_sent`, `sign_in`), carried by the family's row with `issued`. */
  carried?: AuditEvent[];
}

/** `ok`: made (live when it issues). `reused`: it was live and is now revoked (RFC 6749 §4.1.2). `spent`: the code issued nothing before. */
export type StartCodeFamilyResult = { status: "ok" } | { status: "reused" } | { status: "spent" };

export type RotateResult =
  | { status: "rotated"; grant: FamilyGrant; created_at: number }
  | { status: "retry"; sealed: string; grant: FamilyGrant }
  | { status: "invalid_scope" }
  | { status: "invalid_target" }
  | { status: "too_many_rotations"; retry_after: number }
  | { status: "reuse_detected"; grant: FamilyGrant }
  /** RFC 9449 §5: the family is bound to a DPoP key the request did not prove; nothing rotated. */
  | { status: "dpop_key_mismatch" }
  | { status: "invalid" };

/** A rotation's arguments (RFC 9700 §4.14.2). Hashes are SHA-256 of the grant id and of the tokens. */
export interface RotateRefresh {
  familyHash: string;
  /** The token the client presented. */
  presentedHash: string;
  clientId: string;
  /** The token this rotation issues. */
  nextHash: string;
  /** The caller's response to this rotation, sealed under the presented token, for duplicate retries. */
  sealedNext: string;
  now: number;
  graceMs: number;
  requestedScope: string[] | null;
  /** RFC 8707 §2.2: resources the refresh asks for; each must have been granted. */
  requestedResource?: string[] | null;
  /** RFC 9449 §5: the thumbprint of the DPoP key the request proved, if any. */
  dpopJkt?: string | null;
  /** Rotations a family may make in an hour (each keeps a spent-token row for the family's life). */
  maxRotationsPerHour: number;
}

// ---- RevocationStore: what ended, and when.

/** A login, as its tokens and codes name it: for the check that it has not ended since. */
export interface LoginRef {
  sid: string;
  sub: string;
  /** When the person signed in (s, `auth_time`). */
  authTime: number;
  /** When the login's organization claims were read (s): a grant change since ends the login. */
  claimsAt?: number;
}

// ---- MailOutbox: a one-time-code mail waiting for a retry.

/** A one-time-code mail whose first attempt failed, waiting for its next one. */
export interface OutboxItem {
  /** HMAC of the email: one pending mail per address (a newer code replaces an older one). */
  key: string;
  /** The message's id, the same on every attempt (an idempotency key for providers that take one). */
  id: string;
  /** `SealedOtp` as JSON, AES-GCM under MAIL_OUTBOX_SECRET: storage never holds the code in the clear. */
  sealed: string;
  /** Attempts made so far. */
  attempts: number;
  max_attempts: number;
  /** The first retry's delay; the n-th retry waits retry_ms * 3^(n-1). */
  retry_ms: number;
  timeout_ms: number;
  next_at: number;
  /** The code's expiry: no attempt after it. */
  expires_at: number;
  /** The AuditBuffer shard the Worker chose for this email's events. */
  audit_shard: string;
}

// ---- WebhookOutbox: webhook messages waiting for delivery, and what their attempts answered (issue 25).

/** A message to queue: one webhook event for one endpoint. Its key is `<id>:<endpoint_id>`. */
export interface WebhookMessageInput {
  /** `webhook-id`: the same for every endpoint an event goes to, stable across retries and replays. */
  id: string;
  endpoint_id: string;
  tenant: string;
  type: string;
  /** The JSON envelope, fixed when queued: every attempt signs and sends these bytes. */
  body: string;
}

export type WebhookMessageStatus = "pending" | "delivered" | "failed";

export interface WebhookMessageView {
  id: string;
  type: string;
  status: WebhookMessageStatus;
  attempts: number;
  created_at: number;
  next_at: number | null;
  last_status: number | null;
  last_error: string | null;
}

export interface WebhookAttemptView {
  message_id: string;
  type: string;
  at: number;
  /** The receiver's HTTP status; 0 when there was no answer (timeout, refused connection). */
  status: number;
  latency_ms: number;
  error: string | null;
  /** When the message is tried next, if it is still pending. */
  next_at: number | null;
}

export interface WebhookCounts {
  pending: number;
  delivered: number;
  failed: number;
  attempts_ok: number;
  attempts_failed: number;
}

/** A shard's counters since it started (`stats()` of every store; GET /admin/v1/stats sums them). */
export interface ShardStats {
  served: number;
  /** Rows written and read as SQLite counts them for billing (an index entry a write adds is a row). */
  rows_written: number;
  /**
   * Of `rows_written`, those that made tables: expiry buckets (expiry-buckets.ts) and audit outbox
   * generations (audit-outbox.ts). A cost shared by every row such a table takes, not of the request
   * that happened to make it.
   */
  table_rows_written: number;
  rows_read: number;
  alarms_set: number;
  alarm_runs: number;
  d1_queries: number;
  d1_rows_read: number;
  d1_rows_written: number;
  d1_size_bytes: number;
  pending_deletes: number;
  /** Audit events this shard wrote to D1: rows D1's retention deletes later. */
  audit_events_flushed: number;
  storage_bytes: number;
  since: number;
  /** A ChallengeStore shard's passkeys (issue 42): what its verbs did since it started, and what it holds. */
  passkeys?: PasskeyCounters;
}

export interface PasskeyCounters {
  sign_ins: number;
  refused: number;
  counter_regressions: number;
  registered: number;
  removed: number;
  stored: number;
}

// ---- EntityStore: entities, grants and each user's compiled claims (issue 24).

/**
 * What an entity's attributes hold: JSON two levels deep (a value, a list of values, or an object of
 * those). A bound the admin API enforces, and one the RPC types need (a recursive JSON type, or
 * `unknown`, makes the stubs' types too deep to check).
 */
export type JsonLeaf = string | number | boolean | null;
export type AttributeValue = JsonLeaf | JsonLeaf[] | { [key: string]: JsonLeaf | JsonLeaf[] };
export type Attributes = { [key: string]: AttributeValue };

/** One grant as a token's claims see it: the granted entity and what the grant gives. */
export interface SnapshotGrant {
  id: string;
  type: string;
  name: string;
  roles: string[];
  permissions: string[];
  attributes: Attributes;
}

/**
 * A subject's grants compiled when they change, versioned (each change of the subject's grants adds
 * one), and pushed to where a login already reads (the address's ChallengeStore `known_users` row).
 * Organizations come first; `over` says grants were left out to keep it under its size cap.
 */
export interface ClaimsSnapshot {
  v: number;
  grants: SnapshotGrant[];
  over?: true;
}

/** What a login's tokens carry from organizations and grants (workers/shared/oauth/token-claims.ts projects it). */
export interface LoginClaims {
  org_id?: string;
  org_roles?: string[];
  /** The client template's claims, by name. */
  extra?: { [claim: string]: AttributeValue | { [id: string]: string[] } };
  truncated?: true;
  /**
   * When the user's grants were read for these claims (s). A change to the user's grants after it ends
   * the login's code, which would otherwise carry what the change took away (issue 38 item 3).
   */
  at?: number;
}

export interface EntityRow {
  id: string;
  tenant: string;
  type: string;
  name: string;
  external_id: string | null;
  attributes: Attributes;
  created_at: number;
  updated_at: number;
}

/** One entity to create or update in its shard. */
export interface EntityWrite {
  /** An existing entity (an update), or the id a new one gets (issued onto this shard). */
  id: string;
  /** Set: the entity is found by it (upsert), and `id` is used only when none has it. */
  external_id?: string | null;
  type: string;
  name: string;
  attributes: Attributes;
  /** Only update an existing entity (PATCH): never create. */
  mustExist?: boolean;
}

export type EntityWriteResult =
  | { status: "created" | "updated" | "unchanged"; entity: EntityRow; grantees: number }
  | { status: "not_found" | "type_conflict" };

/** A grant stored on its subject's shard, with a copy of what its target is. */
export interface GrantRow {
  subject: string;
  target: string;
  target_type: string;
  target_name: string;
  roles: string[];
  permissions: string[];
  created_at: number;
  updated_at: number;
}

export interface GrantWrite {
  subject: string;
  /** `user` subjects have claims pushed to their address; `entity` subjects do not sign in. */
  subject_kind: "user" | "entity";
  /** HMAC of a user's address (the ChallengeStore key), so snapshots can be pushed without D1. */
  email_key?: string | null;
  target: string;
  target_type: string;
  target_name: string;
  target_attributes: Attributes;
  roles: string[];
  permissions: string[];
}

/** A user subject whose snapshot changed: what the Worker pushes to the address's ChallengeStore shards. */
export interface ChangedClaims {
  subject: string;
  email_key: string;
  claims: ClaimsSnapshot;
}

export interface GrantsChanged {
  /** Per item written or removed: whether it changed anything. */
  changed: boolean[];
  snapshots: ChangedClaims[];
}

/** Who holds grants to an entity: each subject, its shard, and a copy of the roles. */
export interface GranteeRow {
  subject: string;
  subject_shard: string;
  roles: string[];
  permissions: string[];
}

/** A page of a shard's entities (by type, optionally by one attribute's value). */
export interface EntityPage {
  entities: EntityRow[];
  /** Where the next page of this shard starts; null when the shard has no more. */
  next: string | null;
}
