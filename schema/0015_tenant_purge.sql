-- Issue 38 item 12c: when a deleted tenant's data was all purged. A tombstone (status 'deleted')
-- without it is a purge that has not finished (a crash, a limit hit): op-mgmt's cron resumes it.
-- Tombstones made before this migration have none, and are purged once more by the cron (harmless:
-- the deletes find nothing, or what an interrupted purge left).
ALTER TABLE tenants ADD COLUMN purged_at INTEGER;
CREATE INDEX tenants_unpurged ON tenants (id) WHERE status = 'deleted' AND purged_at IS NULL;
