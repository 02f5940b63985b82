-- RFC 8707 resource indicators (issue 27 item 3): the resources (APIs) a client may ask tokens for,
-- a JSON array of absolute URIs. A token asked for with `resource` has that resource as its `aud`.
ALTER TABLE clients ADD COLUMN resources TEXT NOT NULL DEFAULT '[]';
