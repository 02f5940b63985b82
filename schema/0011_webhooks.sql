-- Webhook endpoints (issue 25): per tenant, the URL, the events it wants, and its signing secret
-- sealed under KEY_ENCRYPTION_SECRET (bound to the id). During a rotation the previous secret signs
-- too, until previous_until. `shard` is the WebhookOutbox shard its messages are queued in, fixed at
-- creation. A run of failed attempts is counted here; past the policy's threshold the endpoint is
-- disabled (enabled = 0, disabled_reason) with a webhook_disabled audit event.
CREATE TABLE webhook_endpoints (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL DEFAULT 'default',
  url TEXT NOT NULL,
  events TEXT NOT NULL,
  description TEXT,
  enabled INTEGER NOT NULL DEFAULT 1,
  secret_sealed TEXT NOT NULL,
  previous_secret_sealed TEXT,
  previous_until INTEGER,
  shard TEXT NOT NULL,
  consecutive_failures INTEGER NOT NULL DEFAULT 0,
  failing_since INTEGER,
  disabled_reason TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX webhook_endpoints_by_tenant ON webhook_endpoints (tenant, enabled);
