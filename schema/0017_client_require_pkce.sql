-- Issue 40: PKCE stays required by default and for every public client; a confidential client may be
-- registered without it (RFC 9700 §2.1.1: it may rely on the nonce against code injection instead, as
-- OIDC Core's code flow allows), which the OpenID Foundation's certification plans expect.
ALTER TABLE clients ADD COLUMN require_pkce INTEGER NOT NULL DEFAULT 1;
