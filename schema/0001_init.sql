-- Keyway D1 schema. Times are milliseconds since the epoch.

CREATE TABLE users (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,          -- normalized: NFC, lower-case
  name TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  last_login_at INTEGER,
  revoked_at INTEGER                   -- sessions and tokens from logins at or before this are dead
);

CREATE TABLE clients (
  client_id TEXT PRIMARY KEY,
  client_name TEXT NOT NULL,
  token_endpoint_auth_method TEXT NOT NULL CHECK (token_endpoint_auth_method IN ('none', 'client_secret_basic', 'client_secret_post')),
  secret_hash TEXT,                    -- SHA-256 of the secret; NULL for public clients
  redirect_uris TEXT NOT NULL,         -- JSON array
  post_logout_redirect_uris TEXT NOT NULL,
  grant_types TEXT NOT NULL,
  scope TEXT NOT NULL,
  id_token_signed_response_alg TEXT NOT NULL CHECK (id_token_signed_response_alg IN ('RS256', 'ES256')),
  allowed_cors_origins TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);

-- Written only by the dev mailbox transport (MAIL_TRANSPORT=dev), which production refuses.
CREATE TABLE dev_mailbox (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  email TEXT NOT NULL,
  subject TEXT NOT NULL,
  text TEXT NOT NULL,
  html TEXT NOT NULL,
  code TEXT NOT NULL,
  sent_at INTEGER NOT NULL
);
CREATE INDEX dev_mailbox_by_email ON dev_mailbox (email, id);
