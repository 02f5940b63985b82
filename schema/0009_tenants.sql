-- Tenants (issue 23): many issuers in one deployment. Every row that belongs to a tenant says which;
-- everything that existed before is the `default` tenant's, unchanged.

CREATE TABLE tenants (
  id TEXT PRIMARY KEY,                 -- [a-z0-9-]{2,40}; never reused, so a deleted tenant's ids stay dead
  name TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('active', 'disabled', 'deleted')),
  settings TEXT NOT NULL DEFAULT '{}', -- JSON: policy overrides, signup, mail, hosts (workers/shared/tenants.ts)
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
-- The admin API lists tenants by id (a cursor), without the tombstones of deleted ones.
CREATE INDEX tenants_live ON tenants (id) WHERE status != 'deleted';

-- Tenant-scoped admin keys: the SHA-256 of the key only; the key itself is shown once.
CREATE TABLE admin_keys (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  key_hash TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
CREATE INDEX admin_keys_by_tenant ON admin_keys (tenant, id);

-- Users: an address is unique per tenant, never across. SQLite cannot change a UNIQUE constraint in
-- place, so the table is rebuilt (ids and every column kept).
CREATE TABLE users_new (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL DEFAULT 'default',
  email TEXT NOT NULL,                 -- normalized: NFC, lower-case
  name TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  last_login_at INTEGER,
  revoked_at INTEGER,                  -- sessions and tokens from logins at or before this are dead
  UNIQUE (tenant, email)
);
INSERT INTO users_new (id, tenant, email, name, created_at, updated_at, last_login_at, revoked_at)
SELECT id, 'default', email, name, created_at, updated_at, last_login_at, revoked_at FROM users;
DROP TABLE users;
ALTER TABLE users_new RENAME TO users;
-- Listing a tenant's users by id (the admin API's cursor).
CREATE INDEX users_by_tenant ON users (tenant, id);

ALTER TABLE clients ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
CREATE INDEX clients_by_tenant ON clients (tenant, client_id);

ALTER TABLE signing_keys ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
CREATE INDEX signing_keys_by_tenant ON signing_keys (tenant, alg, activates_at);

ALTER TABLE audit_events ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
-- A tenant's trail, newest first (one more index row per event: docs/storage.md counts it).
CREATE INDEX audit_events_by_tenant ON audit_events (tenant, at, id);
