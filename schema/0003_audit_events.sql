-- The audit trail, written in batches by the AuditBuffer Durable Objects (durable-objects/audit-buffer.ts).
-- No row holds a code, token, cookie or email address: an address appears only as email_key, the
-- HMAC under OTP_HMAC_SECRET that the ChallengeStore keys it by.
CREATE TABLE audit_events (
  id TEXT PRIMARY KEY,                 -- random, assigned when the event happens: a repeated flush is ignored
  at INTEGER NOT NULL,                 -- ms since the epoch
  kind TEXT NOT NULL,                  -- sign_in, code_sent, code_failed, mail_failed, lockout, token_issued,
                                       -- refresh_reuse, logout, admin_change, key_rotation
  user_id TEXT,
  email_key TEXT,
  client_id TEXT,
  ip TEXT,
  detail TEXT                          -- JSON
);
-- GET /admin/v1/audit pages newest first by (at, id), filtered by user, email or kind.
CREATE INDEX audit_events_by_at ON audit_events (at, id);
CREATE INDEX audit_events_by_user ON audit_events (user_id, at, id) WHERE user_id IS NOT NULL;
CREATE INDEX audit_events_by_email ON audit_events (email_key, at, id) WHERE email_key IS NOT NULL;
CREATE INDEX audit_events_by_kind ON audit_events (kind, at, id);
