-- Issue 24: organizations, entities and grants. Entities and grants live in the EntityStore's
-- shards; D1 keeps what is small and per tenant (entity types and their role templates, import jobs)
-- and, per user, the EntityStore shard that holds the user's grants (chosen at the first grant).

ALTER TABLE users ADD COLUMN entity_shard TEXT;

-- A client's declarative template of what its tokens carry from organizations and grants (JSON).
ALTER TABLE clients ADD COLUMN token_claims TEXT;

-- Entity types of a tenant: `organization` is built in (a row only once its template is changed).
-- `roles` is the role template: {"<role>": {"permissions": [...]}, ...}; empty, any role name is taken.
CREATE TABLE entity_types (
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  description TEXT,
  roles TEXT NOT NULL DEFAULT '{}',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (tenant, name)
) WITHOUT ROWID;

-- Bulk import jobs (NDJSON of users, entities or grants): progress and the first errors by line.
CREATE TABLE import_jobs (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  kind TEXT NOT NULL,
  status TEXT NOT NULL,
  lines INTEGER NOT NULL DEFAULT 0,
  created INTEGER NOT NULL DEFAULT 0,
  updated INTEGER NOT NULL DEFAULT 0,
  unchanged INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0,
  errors TEXT NOT NULL DEFAULT '[]',
  started_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  finished_at INTEGER
) WITHOUT ROWID;
CREATE INDEX import_jobs_by_tenant ON import_jobs(tenant, started_at);
