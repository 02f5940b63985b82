-- Issue 40: the algorithm a client's request objects (OIDC Core §6.1, RFC 9101) must be signed with
-- (OIDC Registration's `request_object_signing_alg`): RS256 or ES256 with its registered jwks, or
-- `none` for unsigned objects, accepted only from a client registered so. NULL: RS256 or ES256.
ALTER TABLE clients ADD COLUMN request_object_signing_alg TEXT;
