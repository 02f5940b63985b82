-- OIDC Registration §2 / RFC 7591 §2: a client's public keys by reference (`jwks_uri`, fetched
-- when its private_key_jwt assertions or signed request objects are verified, cached per isolate),
-- the alternative to `jwks` by value: a client has one or the other, never both. NULL: none.
ALTER TABLE clients ADD COLUMN jwks_uri TEXT;
-- OIDC Registration §2 / RFC 9101 §10.4.1: the request_uri values the client pre-registered, a JSON
-- array of URLs; /authorize fetches a request object only from one of them (compared without the
-- fragment), so Keyway is no open fetcher.
ALTER TABLE clients ADD COLUMN request_uris TEXT NOT NULL DEFAULT '[]';
