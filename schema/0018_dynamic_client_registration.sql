-- Issue 40: Dynamic Client Registration (RFC 7591, OIDC Registration 1.0) and client configuration
-- management (RFC 7592). A dynamically registered client is an ordinary row of `clients`, marked so.

-- 'admin' (the admin API) or 'dynamic' (POST <issuer>/register); the admin API shows it.
ALTER TABLE clients ADD COLUMN registered_via TEXT NOT NULL DEFAULT 'admin';
-- RFC 7592: the SHA-256 of the client's registration access token (the token is shown once); NULL for
-- a client the admin API registered, which has no configuration endpoint.
ALTER TABLE clients ADD COLUMN registration_access_token_hash TEXT;
-- The RFC 7591 / OIDC Registration metadata Keyway keeps only to show back (contacts, logo_uri,
-- client_uri, policy_uri, tos_uri, sector_identifier_uri, application_type, software_*), a JSON object.
ALTER TABLE clients ADD COLUMN registration_metadata TEXT;
-- The initial access token that registered it (registration_tokens.id); NULL for open registration.
ALTER TABLE clients ADD COLUMN registration_token_id TEXT;

-- Initial access tokens (RFC 7591 §3): what a tenant admin hands out so a client may register itself.
-- The SHA-256 of the token only; the token itself is shown once.
CREATE TABLE registration_tokens (
  id TEXT PRIMARY KEY,                 -- krt_<random>
  tenant TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE,
  description TEXT,
  multi_use INTEGER NOT NULL DEFAULT 0, -- 0: spent by its first successful registration
  uses INTEGER NOT NULL DEFAULT 0,      -- successful registrations made with it
  expires_at INTEGER,                   -- ms; NULL: never
  created_at INTEGER NOT NULL,
  last_used_at INTEGER,
  revoked_at INTEGER
);
CREATE INDEX registration_tokens_by_tenant ON registration_tokens (tenant, id);
