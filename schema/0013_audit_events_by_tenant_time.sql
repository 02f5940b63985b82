-- Issue 28: an audit event costs 2 or 3 billed rows written instead of 6 or 7. The table becomes
-- WITHOUT ROWID with its key (tenant, at, id): the row is stored in its key's order, so the tenant's
-- trail newest first, a time range and retention read the table itself, and no index is written for
-- them. Only the lookups a support person makes keep an index: by user and by email (HMAC).
-- The kind filter reads the tenant's time range (rows read cost a thousandth of rows written).
-- `id` stays unique per event: a repeated flush of the same event (same tenant, time and id) is ignored.
CREATE TABLE audit_events_v2 (
  tenant TEXT NOT NULL DEFAULT 'default',
  at INTEGER NOT NULL,
  id TEXT NOT NULL,
  kind TEXT NOT NULL,
  user_id TEXT,
  email_key TEXT,
  client_id TEXT,
  ip TEXT,
  detail TEXT,
  PRIMARY KEY (tenant, at, id)
) WITHOUT ROWID;
INSERT OR IGNORE INTO audit_events_v2 (tenant, at, id, kind, user_id, email_key, client_id, ip, detail)
  SELECT tenant, at, id, kind, user_id, email_key, client_id, ip, detail FROM audit_events;
DROP TABLE audit_events;
ALTER TABLE audit_events_v2 RENAME TO audit_events;
CREATE INDEX audit_events_by_user ON audit_events (tenant, user_id, at) WHERE user_id IS NOT NULL;
CREATE INDEX audit_events_by_email ON audit_events (tenant, email_key, at) WHERE email_key IS NOT NULL;
