-- Regions (issue 12): the controller samples every region that follows the default counts, so a sample
-- is per store, region, generation and shard. Samples only feed the next run's rates: dropping them
-- costs the controller one run.
DROP TABLE shard_samples;
CREATE TABLE shard_samples (
  store TEXT NOT NULL,
  region TEXT NOT NULL,
  gen INTEGER NOT NULL,
  shard INTEGER NOT NULL,
  served INTEGER NOT NULL,             -- the shard's counter (calls since its object started)
  since INTEGER NOT NULL,              -- when that object started: a new value means the counter reset
  at INTEGER NOT NULL,                 -- ms since the epoch
  PRIMARY KEY (store, region, gen, shard)
);
