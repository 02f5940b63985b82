import type { AuditEvent } from "./verbs";

/**
 * Issue 44: how a store keeps a login's audit events on the records the login writes anyway
 * (durable-objects/carried-audit.ts; the ChallengeStore's limits rows, challenge/sent-events.ts).
 * Here because the stores and the challenge's own folder both read and write it.
 */

/** What a login's events share: stored once per row, not once per event. */
const SHARED = ["user_id", "email_key", "client_id", "ip", "tenant"] as const;

/** A login's events as a carrier row stores them: the shared fields once, then each event's own. */
interface StoredEvents {
  s: Partial<Pick<AuditEvent, (typeof SHARED)[number]>>;
  /** `[id, at, kind, detail, fields that differ from s]` per event, in the login's order. */
  e: [string, number, string, Record<string, unknown> | null, Record<string, unknown>?][];
}

/**
 * A row's events in their stored form (issue 44). Each event written out whole made a refresh
 * family's row (its grant, hashes and three events) longer than a b-tree page keeps in place (about
 * 1,000 bytes for a WITHOUT ROWID row), so each family took an overflow page: the shared fields once
 * keep the row in its page.
 */
export function storedEvents(events: AuditEvent[]): StoredEvents {
  const first = events[0];
  const shared: Record<string, unknown> = {};
  // A field absent is null (`eventsFrom`): nulls are not written, in `s` or in an event's own.
  if (first) for (const k of SHARED) if (first[k] !== undefined && first[k] !== null) shared[k] = first[k];
  return {
    s: shared,
    e: events.map((ev) => {
      const own: Record<string, unknown> = {};
      for (const k of SHARED) if ((ev[k] ?? null) !== (shared[k] ?? null)) own[k] = ev[k] ?? null;
      const row: StoredEvents["e"][number] = [ev.id, ev.at, ev.kind, ev.detail];
      if (Object.keys(own).length) row.push(own);
      return row;
    }),
  };
}

export const isStored = (v: unknown): v is StoredEvents =>
  typeof v === "object" && v !== null && !Array.isArray(v) && Array.isArray((v as StoredEvents).e);

/** Events from their stored form (or from a row written before it: the events whole). */
export function eventsFrom(value: unknown): AuditEvent[] {
  if (Array.isArray(value)) return value as AuditEvent[];
  if (!isStored(value)) return [];
  return value.e.map(([id, at, kind, detail, own]) => {
    const ev = { ...value.s, ...(own ?? {}), id, at, kind, detail } as AuditEvent & { tenant?: string | null };
    for (const k of ["user_id", "email_key", "client_id", "ip"] as const) if (ev[k] === undefined) ev[k] = null;
    if (ev.tenant === null || ev.tenant === undefined) delete ev.tenant;
    return ev as AuditEvent;
  });
}
