import { PASSKEY_SCHEMA } from "./passkeys";

/**
 * The ChallengeStore's tables, made at a shard's first use (shard-store.ts), the columns added to
 * shards made before them, and how their rows expire. The SQL is the store's storage: a change here
 * is a migration.
 */

const HOUR = 3_600_000;

export const CHALLENGE_SCHEMA: string[] = [
  // One live code per address and login: a new code voids the older one of the same login, never
  // another login's (someone else's resend must not void a person's own code).
  `CREATE TABLE IF NOT EXISTS otp_codes (
    email_key TEXT NOT NULL,
    tx_hash TEXT NOT NULL,
    code_mac TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (email_key, tx_hash)) WITHOUT ROWID`,
  // No index on expires_at (issue 28: one billed row less per code): the table holds minutes of
  // codes, and the alarm's sweep reads it whole, a few hundred rows at most.
  "DROP INDEX IF EXISTS otp_codes_exp",
  // Codes were one per address before; those in flight at the upgrade are dropped (a resend fixes it).
  "DROP TABLE IF EXISTS challenges",
  `CREATE TABLE IF NOT EXISTS email_limits (
    email_key TEXT PRIMARY KEY,
    failures INTEGER NOT NULL,
    failures_reset_at INTEGER NOT NULL,
    sends INTEGER NOT NULL,
    sends_reset_at INTEGER NOT NULL,
    last_sent_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    consecutive INTEGER NOT NULL DEFAULT 0,
    consecutive_until INTEGER NOT NULL DEFAULT 0,
    audit TEXT,
    audit_due INTEGER) WITHOUT ROWID`,
  // No index on expires_at (issue 28: a send writes one billed row less): swept by a scan, hourly,
  // 90 days after expiry, so a returning address overwrites its row instead of deleting and inserting.
  "DROP INDEX IF EXISTS email_limits_exp",
  // Outside an address's home region: what is owed to, and was last heard from, its home shard.
  `CREATE TABLE IF NOT EXISTS home_reports (
    email_key TEXT PRIMARY KEY,
    home TEXT NOT NULL,
    unreported INTEGER NOT NULL DEFAULT 0,
    source TEXT,
    reset INTEGER NOT NULL DEFAULT 0,
    reset_source TEXT,
    carry_from TEXT,
    home_failures INTEGER NOT NULL DEFAULT 0,
    home_failures_until INTEGER NOT NULL DEFAULT 0,
    home_consecutive INTEGER NOT NULL DEFAULT 0,
    home_consecutive_until INTEGER NOT NULL DEFAULT 0,
    expires_at INTEGER NOT NULL) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS home_reports_exp ON home_reports(expires_at)",
  // Wrong codes per address and source, so that one source cannot lock a person out (issue 15).
  `CREATE TABLE IF NOT EXISTS source_failures (
    email_key TEXT NOT NULL,
    source_key TEXT NOT NULL,
    failures INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (email_key, source_key)) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS source_failures_exp ON source_failures(expires_at)",
  // An address whose counts in earlier generations' shards are carried here (issue 27 item 9): while
  // `done` is 0, no code of the address is tried (as with an unreported failure); once done, the row
  // stays for the carry window so the counts are carried once, never again after a sign-in.
  `CREATE TABLE IF NOT EXISTS carry_pending (
    email_key TEXT PRIMARY KEY,
    sources TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    expires_at INTEGER NOT NULL) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS carry_pending_exp ON carry_pending(expires_at)",
  `CREATE TABLE IF NOT EXISTS captured (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    email_key TEXT NOT NULL,
    sealed TEXT NOT NULL,
    sent_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL)`,
  "CREATE INDEX IF NOT EXISTS captured_key ON captured(email_key, seq)",
  "CREATE INDEX IF NOT EXISTS captured_exp ON captured(expires_at)",
  `CREATE TABLE IF NOT EXISTS known_users (
    email_key TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    claims TEXT,
    claims_version INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID`,
  // No index on expires_at (issue 28: an extension writes one billed row, not two): swept by a daily scan.
  "DROP INDEX IF EXISTS known_users_exp",
  // Per-IP quotas lived here before they moved to the Rate Limiting binding; nothing reads them.
  "DROP TABLE IF EXISTS ip_quota",
  // Issue 42: an address's passkeys (passkeys.ts); kept until removed or the user is deleted.
  ...PASSKEY_SCHEMA,
];

export const CHALLENGE_UPGRADES: Record<string, string[]> = {
  // Shards created before the consecutive-failure cap.
  email_limits: [
    "ALTER TABLE email_limits ADD COLUMN consecutive INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE email_limits ADD COLUMN consecutive_until INTEGER NOT NULL DEFAULT 0",
    // Issue 44: the address's `code_sent` events ride on its row (sent-events.ts).
    "ALTER TABLE email_limits ADD COLUMN audit TEXT",
    "ALTER TABLE email_limits ADD COLUMN audit_due INTEGER",
  ],
  // Shards created before the home counted per source (issue 27 item 5).
  home_reports: [
    "ALTER TABLE home_reports ADD COLUMN source TEXT",
    "ALTER TABLE home_reports ADD COLUMN reset_source TEXT",
    "ALTER TABLE home_reports ADD COLUMN carry_from TEXT",
  ],
  carry_pending: ["ALTER TABLE carry_pending ADD COLUMN done INTEGER NOT NULL DEFAULT 0"],
  // Shards created before entity grants (issue 24): the user's compiled claims, versioned.
  known_users: [
    "ALTER TABLE known_users ADD COLUMN claims TEXT",
    "ALTER TABLE known_users ADD COLUMN claims_version INTEGER NOT NULL DEFAULT 0",
  ],
};

export const CHALLENGE_EXPIRING_TABLES = [
  "otp_codes",
  "email_limits",
  "home_reports",
  "source_failures",
  "carry_pending",
  "captured",
  "known_users",
];

// An address's limits are kept 90 days past their windows, so its next sign-in overwrites them.
export const CHALLENGE_SCAN_SWEPT: Record<string, { everyMs: number; keepExpiredMs: number }> = {
  email_limits: { everyMs: HOUR, keepExpiredMs: 90 * 24 * HOUR },
  known_users: { everyMs: 24 * HOUR, keepExpiredMs: 0 },
};
