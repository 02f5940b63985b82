import { dropMonthsBefore } from "../../../durable-objects/contract/audit-trail";
import type { Config } from "../../shared/config/config";
import type { Env } from "../../shared/platform/env";
import { DEFAULT_TENANT } from "../../shared/routing/tenant-route";

/** Rows one statement deletes: small enough to stay far inside D1's per-query time limit. */
export const RETENTION_BATCH = 5_000;
/** Batches one cron run may delete; what is left waits for the next run (hourly). */
export const RETENTION_MAX_BATCHES = 100;

/** Tenants whose first batch runs in one D1 batch call (one round trip, one transaction). */
const TENANTS_PER_CALL = 100;

/**
 * Audit retention, so the trail does not grow toward D1's database size limit. A month's tables
 * (durable-objects/contract/audit-trail.ts) are dropped whole once the month has passed `audit_retention_days`:
 * no row is deleted, so none is billed (issue 28). Until then the trail's reads leave out what is past
 * retention. Then the table from before the months: its events older than retention, oldest first,
 * tenant by tenant, in batches. That table is keyed by (tenant, at, id) (schema/0013), so each batch
 * reads only the tenant's old rows. Every tenant's first batch goes in chunks of D1 batch calls; a
 * tenant with more than a batch left goes on alone. A run stops after RETENTION_MAX_BATCHES full
 * batches and reports that more is left; the next (hourly) run goes on.
 */
export async function sweepAuditEvents(
  env: Env,
  config: Config,
  now: number,
): Promise<{ deleted: number; months_dropped: string[]; more: boolean }> {
  const cutoff = now - config.POLICY.audit_retention_days * 86_400_000;
  const dropped = await dropMonthsBefore(env.DB, cutoff);
  const batch = env.DB.prepare(
    `DELETE FROM audit_events WHERE (tenant, at, id) IN
       (SELECT tenant, at, id FROM audit_events WHERE tenant = ? AND at < ? ORDER BY at LIMIT ?)`,
  );
  // Deleted tenants keep their trail until retention takes it, like everyone else's.
  const { results } = await env.DB.prepare("SELECT id FROM tenants").all<{ id: string }>();
  const tenants = [DEFAULT_TENANT, ...results.map((r) => r.id)];
  let deleted = 0;
  let full = 0;
  const fullTenants: string[] = [];
  for (let i = 0; i < tenants.length; i += TENANTS_PER_CALL) {
    const chunk = tenants.slice(i, i + TENANTS_PER_CALL);
    const answers = await env.DB.batch(chunk.map((t) => batch.bind(t, cutoff, RETENTION_BATCH)));
    answers.forEach((a, j) => {
      deleted += a.meta.changes;
      if (a.meta.changes >= RETENTION_BATCH) fullTenants.push(chunk[j] as string);
    });
  }
  for (const tenant of fullTenants) {
    for (;;) {
      if (++full > RETENTION_MAX_BATCHES) return { deleted, months_dropped: dropped, more: true };
      const { meta } = await batch.bind(tenant, cutoff, RETENTION_BATCH).run();
      deleted += meta.changes;
      if (meta.changes < RETENTION_BATCH) break;
    }
  }
  return { deleted, months_dropped: dropped, more: false };
}
