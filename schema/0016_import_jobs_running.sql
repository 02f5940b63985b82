-- Issue 38: op-mgmt's cron marks `interrupted` the running import jobs whose heartbeat (`updated_at`)
-- is stale, across tenants. This partial index holds only the running jobs, so the sweep reads those
-- and not every job ever run; a job leaves it when it ends.
CREATE INDEX import_jobs_running ON import_jobs (updated_at) WHERE status = 'running';
