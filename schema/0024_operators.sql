-- Issue 43: who may use the operators' web console (`/console`). One row per grant: `tenant` NULL is
-- the whole deployment, else one tenant's id. An address may hold several grants; re-granting one it
-- holds changes nothing (the unique index treats NULL as the deployment).
CREATE TABLE operators (
  email TEXT NOT NULL,
  tenant TEXT,
  created_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX operators_by_grant ON operators (email, COALESCE(tenant, ''));
