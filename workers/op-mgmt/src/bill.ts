/**
 * What a login costs on Cloudflare's bill, from the counters of `GET /admin/v1/stats` (docs/cost.md):
 * each billed counter's difference over a window, divided by the logins in it, priced per million
 * logins. The prices are docs/cost.md's table (test/mgmt/bill.test.ts holds the two equal); the
 * lines are `npm run cost`'s (tools/cost.mjs) but Workers CPU, which no counter has, and mail, which
 * a deployment may send through another provider. Pure and import-free.
 */

export const PRICES = {
  worker_requests: { per: 1_000_000, usd: 0.3 },
  durable_object_requests: { per: 1_000_000, usd: 0.15 },
  durable_object_rows_written: { per: 1_000_000, usd: 1.0 },
  durable_object_rows_read: { per: 1_000_000, usd: 0.001 },
  durable_object_storage_gb_month: { per: 1, usd: 0.2 },
  d1_rows_written: { per: 1_000_000, usd: 1.0 },
  d1_rows_read: { per: 1_000_000, usd: 0.001 },
  d1_storage_gb_month: { per: 1, usd: 0.75 },
} as const;
export type PriceKey = keyof typeof PRICES;

/** A login's share of each billed counter (a counter's difference over the window, over the logins in it). */
export interface PerLogin {
  worker_requests: number;
  durable_object_requests: number;
  durable_object_rows_written: number;
  /** Rows a sweep or an outbox flush deletes later, at one billed row each. */
  durable_object_later_deletes: number;
  durable_object_rows_read: number;
  d1_rows_written: number;
  d1_rows_read: number;
  durable_object_storage_bytes: number;
  d1_storage_bytes: number;
}

export interface BillLine {
  /** The line's name (the PerLogin counter it prices). */
  line: keyof PerLogin;
  price: PriceKey;
  /** Per login, in `unit`. */
  quantity: number;
  unit: "requests" | "rows" | "GB-month";
  usd_per_million: number;
}

const GB = 1e9;

/** Each line of the bill per million logins, as `npm run cost` prices it. */
export function billLines(m: PerLogin): BillLine[] {
  const line = (name: keyof PerLogin, quantity: number, price: PriceKey, unit: BillLine["unit"]): BillLine => {
    const p = PRICES[price];
    return { line: name, price, quantity, unit, usd_per_million: ((quantity * 1e6) / p.per) * p.usd };
  };
  return [
    line("worker_requests", m.worker_requests, "worker_requests", "requests"),
    line("durable_object_requests", m.durable_object_requests, "durable_object_requests", "requests"),
    line("durable_object_rows_written", m.durable_object_rows_written, "durable_object_rows_written", "rows"),
    line(
      "durable_object_later_deletes",
      Math.max(0, m.durable_object_later_deletes),
      "durable_object_rows_written",
      "rows",
    ),
    line("durable_object_rows_read", m.durable_object_rows_read, "durable_object_rows_read", "rows"),
    line("d1_rows_written", m.d1_rows_written, "d1_rows_written", "rows"),
    line("d1_rows_read", m.d1_rows_read, "d1_rows_read", "rows"),
    line(
      "durable_object_storage_bytes",
      Math.max(0, m.durable_object_storage_bytes) / GB,
      "durable_object_storage_gb_month",
      "GB-month",
    ),
    line("d1_storage_bytes", Math.max(0, m.d1_storage_bytes) / GB, "d1_storage_gb_month", "GB-month"),
  ];
}
