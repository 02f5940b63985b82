-- The shard controller (issue 13): the last sample of each shard's served-call counter, and per store
-- how many consecutive runs found it too hot or too cold, and when it last changed a count.
CREATE TABLE shard_samples (
  store TEXT NOT NULL,
  gen INTEGER NOT NULL,
  shard INTEGER NOT NULL,
  served INTEGER NOT NULL,             -- the shard's counter (calls since its object started)
  since INTEGER NOT NULL,              -- when that object started: a new value means the counter reset
  at INTEGER NOT NULL,                 -- ms since the epoch
  PRIMARY KEY (store, gen, shard)
);
CREATE TABLE shard_controller (
  store TEXT PRIMARY KEY,
  hot_runs INTEGER NOT NULL DEFAULT 0,
  cold_runs INTEGER NOT NULL DEFAULT 0,
  last_change_at INTEGER NOT NULL DEFAULT 0
);
