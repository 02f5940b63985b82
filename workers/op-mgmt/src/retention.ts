import type { Config } from "../../shared/config";
import type { Env } from "../../shared/env";

/** Rows one statement deletes: small enough to stay far inside D1's per-query time limit. */
export const RETENTION_BATCH = 5_000;
/** Batches one cron run may delete; what is left waits for the next run (hourly). */
export const RETENTION_MAX_BATCHES = 100;

/**
 * Deletes audit events older than `audit_retention_days`, oldest first, in batches, so the table does
 * not grow toward D1's database size limit. Each batch is one statement (one implicit transaction);
 * a run stops after RETENTION_MAX_BATCHES and reports that more is left.
 */
export async function sweepAuditEvents(
  env: Env,
  config: Config,
  now: number,
): Promise<{ deleted: number; more: boolean }> {
  const cutoff = now - config.POLICY.audit_retention_days * 86_400_000;
  const batch = env.DB.prepare(
    "DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE at < ? ORDER BY at LIMIT ?)",
  );
  let deleted = 0;
  for (let i = 0; i < RETENTION_MAX_BATCHES; i++) {
    const { meta } = await batch.bind(cutoff, RETENTION_BATCH).run();
    deleted += meta.changes;
    if (meta.changes < RETENTION_BATCH) return { deleted, more: false };
  }
  return { deleted, more: true };
}
