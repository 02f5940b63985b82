-- Captured mail (the dev transport and the load-test domain) now lives, sealed, in the email's
-- MailOutbox shard with a one-hour lifetime (docs/storage.md). D1 holds no code any more.
DROP INDEX IF EXISTS dev_mailbox_by_email;
DROP TABLE IF EXISTS dev_mailbox;
