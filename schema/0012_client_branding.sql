-- Branding per client (issue 26): what a client overrides of its tenant's branding on the pages and
-- mail of its logins (product name, logo URL, primary colour, support link), as a JSON object.
ALTER TABLE clients ADD COLUMN branding TEXT NOT NULL DEFAULT '{}';
