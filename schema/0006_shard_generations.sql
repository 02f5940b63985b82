-- Shard generations appended live through the admin API (issue 13), after the ones SHARDS lists.
-- Every Worker reads them with a short per-isolate cache (POLICY.shard_config_cache_seconds) and
-- routes a generation at once; new ids go into it only from issue_from, which the admin API sets
-- past that cache, so no Worker meets an id of a generation it does not know yet.
CREATE TABLE shard_generations (
  store TEXT NOT NULL,                 -- session, challenge, code, revocation, refresh
  gen INTEGER NOT NULL,                -- its index among the store's generations (SHARDS first)
  shards INTEGER NOT NULL CHECK (shards BETWEEN 1 AND 1024),
  issue_from INTEGER NOT NULL,         -- ms since the epoch
  created_at INTEGER NOT NULL,
  PRIMARY KEY (store, gen)
);
