import type { CarryState } from "./carry";
import type { StoredCode } from "./codes";
import type { HomeReport } from "./home-reports";
import type { KnownRow } from "./known-users";
import { type Limits, limitsOf, type SourceCount } from "./limits";

/**
 * What a send or a check of an address reads before it decides, in one statement (issue 44 item 2):
 * its limits row, this source's failures, what it owes its home, a carry under way and, when asked,
 * its user and a login's code. Each is a primary-key seek of its own table, joined to the address, so
 * the rows read are those of the separate reads; the statements are one instead of five or six.
 * Called inside the verb's transaction.
 */
export interface AddressState {
  limits: Limits;
  source: SourceCount;
  home: HomeReport | null;
  carry: CarryState;
  /** With `known`: the address's user, if the shard knows it (not yet extended: known-users.ts). */
  known: KnownRow | null;
  /** With `txHash`: that login's code, live or not (the caller checks). */
  code: StoredCode | undefined;
}

interface Row extends Record<string, SqlStorageValue> {
  l_key: string | null;
  failures: number | null;
  failures_reset_at: number | null;
  sends: number | null;
  sends_reset_at: number | null;
  last_sent_at: number | null;
  consecutive: number | null;
  consecutive_until: number | null;
  audit: string | null;
  s_failures: number | null;
  s_until: number | null;
  home: string | null;
  unreported: number;
  source: string | null;
  reset: number;
  reset_source: string | null;
  carry_from: string | null;
  home_failures: number;
  home_failures_until: number;
  home_consecutive: number;
  home_consecutive_until: number;
  carry_done: number | null;
  user_id: string | null;
  user_expires_at: number | null;
  user_claims: string | null;
  code_mac: string | null;
  code_attempts: number | null;
  code_expires_at: number | null;
}

// The statement's text per variant, made once: the runtime caches a prepared statement by its text.
const statements = new Map<string, string>();

function statementFor(known: boolean, code: boolean): string {
  const variant = `${known}:${code}`;
  let sql = statements.get(variant);
  if (sql) return sql;
  sql = `SELECT l.email_key AS l_key, l.failures, l.failures_reset_at, l.sends, l.sends_reset_at, l.last_sent_at,
      l.consecutive, l.consecutive_until, l.audit,
      s.failures AS s_failures, s.expires_at AS s_until,
      h.home, h.unreported, h.source, h.reset, h.reset_source, h.carry_from, h.home_failures, h.home_failures_until,
      h.home_consecutive, h.home_consecutive_until,
      c.done AS carry_done${known ? ", u.user_id, u.expires_at AS user_expires_at, u.claims AS user_claims" : ""}${
        code ? ", o.code_mac, o.attempts AS code_attempts, o.expires_at AS code_expires_at" : ""
      }
    FROM (SELECT ? AS k) AS a
    LEFT JOIN email_limits AS l ON l.email_key = a.k
    LEFT JOIN source_failures AS s ON s.email_key = a.k AND s.source_key = ? AND s.expires_at > ?
    LEFT JOIN home_reports AS h ON h.email_key = a.k
    LEFT JOIN carry_pending AS c ON c.email_key = a.k AND c.expires_at > ?${
      known ? "\n    LEFT JOIN known_users AS u ON u.email_key = a.k AND u.expires_at > ?" : ""
    }${code ? "\n    LEFT JOIN otp_codes AS o ON o.email_key = a.k AND o.tx_hash = ?" : ""}`;
  statements.set(variant, sql);
  return sql;
}

export function readAddress(
  sql: SqlStorage,
  emailKey: string,
  sourceKey: string,
  now: number,
  want: { known?: boolean; txHash?: string } = {},
): AddressState {
  const known = want.known === true;
  const code = want.txHash !== undefined;
  const args: SqlStorageValue[] = [emailKey, sourceKey, now, now];
  if (known) args.push(now);
  if (code) args.push(want.txHash as string);
  const r = sql.exec<Row>(statementFor(known, code), ...args).one();
  const limits = limitsOf(
    r.l_key === null
      ? undefined
      : {
          failures: r.failures as number,
          failures_reset_at: r.failures_reset_at as number,
          sends: r.sends as number,
          sends_reset_at: r.sends_reset_at as number,
          last_sent_at: r.last_sent_at as number,
          consecutive: r.consecutive as number,
          consecutive_until: r.consecutive_until as number,
          audit: r.audit,
        },
    now,
  );
  return {
    limits,
    // As limits.ts's readSourceFailures: with no row, no failures until the address's hour ends.
    source:
      r.s_failures === null
        ? { failures: 0, until: limits.failures_reset_at }
        : { failures: r.s_failures, until: r.s_until as number },
    home:
      r.home === null
        ? null
        : {
            home: r.home,
            unreported: r.unreported,
            source: r.source,
            reset: r.reset,
            reset_source: r.reset_source,
            carry_from: r.carry_from,
            home_failures: r.home_failures,
            home_failures_until: r.home_failures_until,
            home_consecutive: r.home_consecutive,
            home_consecutive_until: r.home_consecutive_until,
          },
    carry: r.carry_done === null ? "none" : r.carry_done ? "done" : "pending",
    known:
      known && r.user_id !== null
        ? { user_id: r.user_id, expires_at: r.user_expires_at as number, claims: r.user_claims }
        : null,
    code:
      code && r.code_mac !== null
        ? { code_mac: r.code_mac, attempts: r.code_attempts as number, expires_at: r.code_expires_at as number }
        : undefined,
  };
}
