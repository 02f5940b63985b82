-- Signing keys published after the bootstrap keys (SIGNING_KEY_RS256 / SIGNING_KEY_ES256).
-- A key is published (in JWKS) from created_at, signs from activates_at, and is dropped at retires_at.
CREATE TABLE signing_keys (
  kid TEXT PRIMARY KEY,
  alg TEXT NOT NULL CHECK (alg IN ('RS256', 'ES256')),
  public_jwk TEXT NOT NULL,
  private_jwk_sealed TEXT,             -- AES-GCM under KEY_ENCRYPTION_SECRET; NULL for a bootstrap key's row
  created_at INTEGER NOT NULL,
  activates_at INTEGER NOT NULL,
  retires_at INTEGER                   -- set when a newer key takes over: its activation + the longest token lifetime
);
CREATE INDEX signing_keys_by_alg ON signing_keys (alg, activates_at);
