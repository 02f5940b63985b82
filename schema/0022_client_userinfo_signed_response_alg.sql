-- OIDC Registration §2 / OIDC Core §5.3.2: the algorithm a client's userinfo responses are signed
-- with (`userinfo_signed_response_alg`), RS256 or ES256, the algorithms of the tenant's key ring;
-- userinfo then answers `application/jwt`. NULL: plain JSON.
ALTER TABLE clients ADD COLUMN userinfo_signed_response_alg TEXT;
