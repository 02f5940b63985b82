import { createExecutionContext, createScheduledController, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import mgmt from "../../workers/op-mgmt/src/index";
import { RETENTION_BATCH } from "../../workers/op-mgmt/src/retention";
import { withVars } from "../support/harness";

/** Runs op-mgmt's scheduled handler, as the Cron Trigger does, and waits for what it started. */
async function runCron(scheduledTime: number, testEnv: object = env) {
  const ctx = createExecutionContext();
  await mgmt.scheduled(createScheduledController({ scheduledTime, cron: "17 * * * *" }), testEnv as never, ctx);
  await waitOnExecutionContext(ctx);
}

const DAY = 86_400_000;

afterEach(() => {
  vi.useRealTimers();
});

describe("op-mgmt's cron (issue 15)", () => {
  it("deletes audit events older than audit_retention_days in batches, and keeps the rest", async () => {
    const now = Date.now();
    const tag = `ret-${now}-${Math.random().toString(36).slice(2, 8)}`;
    // More old events than one batch deletes, so the sweep must loop; one a day short of the bound stays.
    const old = RETENTION_BATCH + 7;
    const insert = env.DB.prepare(
      "INSERT INTO audit_events (id, at, kind, user_id, email_key, client_id, ip, detail) VALUES (?, ?, 'sign_in', ?, NULL, NULL, NULL, NULL)",
    );
    const rows = Array.from({ length: old }, (_, i) => insert.bind(`${tag}-old-${i}`, now - 91 * DAY - i, tag));
    rows.push(insert.bind(`${tag}-recent`, now - 89 * DAY, tag), insert.bind(`${tag}-today`, now - 1000, tag));
    for (let i = 0; i < rows.length; i += 1000) await env.DB.batch(rows.slice(i, i + 1000));

    const count = async () =>
      (
        await env.DB.prepare("SELECT id FROM audit_events WHERE user_id = ? ORDER BY at")
          .bind(tag)
          .all<{ id: string }>()
      ).results;
    expect((await count()).length).toBe(old + 2);
    await runCron(now);
    expect((await count()).map((r) => r.id)).toEqual([`${tag}-recent`, `${tag}-today`]);

    // A shorter retention from the policy takes the next-oldest on the next run.
    await runCron(now, withVars({ POLICY: JSON.stringify({ audit_retention_days: 30 }) }));
    expect((await count()).map((r) => r.id)).toEqual([`${tag}-today`]);
  });

  it("rotates signing keys once they are older than key_rotation_days, and not before", async () => {
    const kids = async () =>
      (await env.DB.prepare("SELECT kid FROM signing_keys ORDER BY created_at").all<{ kid: string }>()).results.map(
        (r) => r.kid,
      );
    const before = await kids();
    const rotated = async () =>
      (
        await env.DB.prepare(
          "SELECT COUNT(*) AS n FROM signing_keys WHERE tenant = 'default' AND private_jwk_sealed IS NOT NULL",
        ).first<{ n: number }>()
      )?.n;
    // A fresh deployment: only the bootstrap keys of the SIGNING_KEY_* secrets.
    expect(await rotated()).toBe(0);
    // The first cron run after the first start finds them young (aged from that first run, issue 27
    // item 19) and rotates nothing; it records when it first saw them.
    await runCron(Date.now());
    expect(await rotated()).toBe(0);
    const ring = await kids();
    expect(ring.length).toBeGreaterThanOrEqual(before.length);
    await runCron(Date.now());
    expect(await kids()).toEqual(ring);
    // 31 days on (key_rotation_days is 30): a new key per algorithm is published, with a key_rotation event.
    const later = Date.now() + 31 * DAY;
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(later);
    await runCron(later);
    const after = await kids();
    expect(after.length).toBe(ring.length + 2);
    const published = await env.DB.prepare(
      "SELECT alg, activates_at FROM signing_keys WHERE kid NOT IN (SELECT value FROM json_each(?)) ORDER BY alg",
    )
      .bind(JSON.stringify(ring))
      .all<{ alg: string; activates_at: number }>();
    expect(published.results.map((r) => r.alg)).toEqual(["ES256", "RS256"]);
    // Published ahead of use (key_publish_lead_seconds, 900 s).
    for (const r of published.results) expect(r.activates_at).toBe(later + 900_000);
    // A second run the same hour publishes nothing more: a key is already waiting.
    await runCron(later + 3_600_000);
    expect((await kids()).length).toBe(after.length);
  });
});
