import { eventsFrom, storedEvents } from "../contract/carried-events";
import type { AuditEvent } from "../contract/verbs";

/**
 * Issue 44: an address's `code_sent` events ride on its `email_limits` row, which every code that goes
 * out writes anyway (its send counts), by login: `audit` = `{ <tx hash>: [events] }`, `audit_due` =
 * when this shard writes them to D1 itself (the newest code's expiry: by then a login that went on has
 * carried them to its session and family, durable-objects/carried-audit.ts). A verify that signs in
 * hands its login's events on, reading them: no row is written for them.
 */

/** A login's events stay on the row this long after its code expired, in case D1 was late taking them. */
const KEEP_MS = 3_600_000;

export type SentEvents = Record<string, AuditEvent[]>;

/** The events a limits row carries, from its `audit` column as `readLimits` read it. */
export function sentEventsOf(audit: string | null | undefined): SentEvents {
  if (!audit) return {};
  const parsed = JSON.parse(audit) as Record<string, unknown>;
  return Object.fromEntries(Object.entries(parsed).map(([tx, stored]) => [tx, eventsFrom(stored)]));
}

/**
 * The row's events with a code's added to its login's, for `saveLimits` to write in its one statement
 * (each login's in their stored form, carried-audit.ts). Logins whose events were due long ago are
 * dropped, once the watermark says they are in D1.
 */
export function withSentEvent(
  audit: string | null | undefined,
  txHash: string,
  event: AuditEvent,
  flushedTo: number,
): string {
  const all = sentEventsOf(audit);
  for (const [tx, events] of Object.entries(all)) {
    const last = Math.max(...events.map((e) => e.at));
    if (last + KEEP_MS < flushedTo) delete all[tx];
  }
  all[txHash] = [...(all[txHash] ?? []), event];
  return JSON.stringify(Object.fromEntries(Object.entries(all).map(([tx, events]) => [tx, storedEvents(events)])));
}
