-- RFC 9449 §5.2: `dpop_bound_access_tokens`, a client whose token requests must carry a DPoP proof
-- (its access tokens are always bound), and RFC 9126 §6: `require_pushed_authorization_requests`, a
-- client whose authorization requests must be pushed first. Both 0 (false) for every existing client.
ALTER TABLE clients ADD COLUMN dpop_bound_access_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE clients ADD COLUMN require_pushed_authorization_requests INTEGER NOT NULL DEFAULT 0;
