-- private_key_jwt client authentication (RFC 7523 §2.2, issue 14): a client may prove itself with a
-- JWT signed by a key it registered (`jwks`, public keys only). SQLite cannot change a CHECK, so the
-- clients table is rebuilt with the new method allowed and the column added; rows are kept as they are.
CREATE TABLE clients_new (
  client_id TEXT PRIMARY KEY,
  client_name TEXT NOT NULL,
  token_endpoint_auth_method TEXT NOT NULL CHECK (token_endpoint_auth_method IN ('none', 'client_secret_basic', 'client_secret_post', 'private_key_jwt')),
  secret_hash TEXT,                    -- SHA-256 of the secret; NULL for public and private_key_jwt clients
  redirect_uris TEXT NOT NULL,         -- JSON array
  post_logout_redirect_uris TEXT NOT NULL,
  grant_types TEXT NOT NULL,
  scope TEXT NOT NULL,
  id_token_signed_response_alg TEXT NOT NULL CHECK (id_token_signed_response_alg IN ('RS256', 'ES256')),
  allowed_cors_origins TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  jwks TEXT                            -- JSON {keys: [...]}, public keys; private_key_jwt clients only
);
INSERT INTO clients_new (client_id, client_name, token_endpoint_auth_method, secret_hash, redirect_uris,
  post_logout_redirect_uris, grant_types, scope, id_token_signed_response_alg, allowed_cors_origins, created_at, updated_at)
SELECT client_id, client_name, token_endpoint_auth_method, secret_hash, redirect_uris,
  post_logout_redirect_uris, grant_types, scope, id_token_signed_response_alg, allowed_cors_origins, created_at, updated_at
FROM clients;
DROP TABLE clients;
ALTER TABLE clients_new RENAME TO clients;
