-- Issue 40: pairwise subject identifiers (OIDC Core §8.1). A client sees a user's id as `sub`
-- (`public`, the default) or a value of its sector (`pairwise`): its sector_identifier_uri's host, or
-- its redirect URIs' one host.
ALTER TABLE clients ADD COLUMN subject_type TEXT NOT NULL DEFAULT 'public';
ALTER TABLE clients ADD COLUMN sector_identifier_uri TEXT;
