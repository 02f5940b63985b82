/**
 * Expiry by whole tables (issue 28). A row that only expires goes into a "bucket": a table of the same
 * layout named for the end of the period its `expires_at` falls in. Once that end has passed, every
 * row in it has expired and the table is dropped. On Cloudflare's bill `DROP TABLE` writes no row,
 * where a sweep's `DELETE` writes one per row, and no `expires_at` index is needed to find the rows:
 * a row costs one billed row, once. Making a bucket costs two (its `sqlite_master` entry), shared by
 * every row it takes.
 *
 * A bucket's width is about a quarter of the rows' lifetime, from a fixed ladder, so a row outlives
 * its expiry by at most that much and a lookup probes about five to nine tables (each a primary-key seek).
 * The table the bucketed layout replaced keeps its older rows, is read like a bucket, and is swept
 * the old way until it is empty.
 */

/** Bucket widths, smallest first: the widest at most a quarter of a row's lifetime is used. */
const WIDTHS_MS = [300_000, 3_600_000, 6 * 3_600_000, 86_400_000, 4 * 86_400_000, 16 * 86_400_000];

export function bucketWidth(lifetimeMs: number): number {
  let width = WIDTHS_MS[0] as number;
  for (const w of WIDTHS_MS) if (w <= lifetimeMs / 4) width = w;
  return width;
}

/** `<base>__e<end, seconds>`: the period's end is in the name, so no row says it. */
const BUCKET_RE = /^(\w+?)__e(\d+)$/;

export class ExpiryBuckets {
  /** Rows written making buckets' tables (their `sqlite_master` entries): shared by the rows they take. */
  madeRows = 0;
  /** By base table: its buckets' ends (ms), ascending. Read from `sqlite_master` at first use. */
  #ends: Map<string, number[]> | null = null;

  /**
   * @param creates each bucketed base table's `CREATE TABLE IF NOT EXISTS <base> (...)` statement;
   * a bucket is made from it under its own name, without the base's indexes.
   */
  constructor(
    private readonly sql: SqlStorage,
    private readonly creates: Record<string, string>,
  ) {}

  #load(): Map<string, number[]> {
    if (this.#ends) return this.#ends;
    const ends = new Map<string, number[]>(Object.keys(this.creates).map((base) => [base, []]));
    for (const { name } of this.sql
      .exec<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%\\_\\_e%' ESCAPE '\\'",
      )
      .toArray()) {
      const m = BUCKET_RE.exec(name);
      if (m) ends.get(m[1] as string)?.push(Number(m[2]) * 1000);
    }
    for (const list of ends.values()) list.sort((a, b) => a - b);
    this.#ends = ends;
    return ends;
  }

  /** The table a row of `base` expiring at `expiresAt` goes into, made if it is not there yet. */
  tableFor(base: string, expiresAt: number, now: number): { table: string; end: number } {
    const width = bucketWidth(expiresAt - now);
    const end = Math.ceil(expiresAt / width) * width;
    const ends = this.#load().get(base);
    if (!ends) throw new Error(`${base} is not a bucketed table`);
    const name = `${base}__e${Math.floor(end / 1000)}`;
    if (!ends.includes(end)) {
      const create = this.creates[base] as string;
      const made = this.sql.exec(
        create.replace(/CREATE TABLE IF NOT EXISTS \w+/i, `CREATE TABLE IF NOT EXISTS ${name}`),
      );
      this.madeRows += made.rowsWritten;
      ends.push(end);
      ends.sort((a, b) => a - b);
    }
    return { table: name, end };
  }

  /**
   * Every table of `base`, latest bucket first, then the base table (rows from before buckets). A
   * bucket whose end has passed is listed until the alarm drops it: its rows have expired, but a key
   * written there late (a row past its expiry when written) must still be found.
   */
  tables(base: string): string[] {
    const ends = this.#load().get(base) ?? [];
    return [...ends.map((end) => `${base}__e${Math.floor(end / 1000)}`).reverse(), base];
  }

  /**
   * Drops every bucket whose end is at or before `now`, but those of `keep` (rows whose audit events
   * are not in D1 yet). Returns the earliest end still ahead, if any.
   */
  dropEnded(now: number, keep: string[] = []): number | null {
    let next: number | null = null;
    for (const [base, ends] of this.#load()) {
      if (keep.includes(base)) {
        if (ends.length) next = Math.min(next ?? Number.POSITIVE_INFINITY, Math.max(ends[0] as number, now + 60_000));
        continue;
      }
      while (ends.length && (ends[0] as number) <= now) {
        const end = ends.shift() as number;
        this.sql.exec(`DROP TABLE IF EXISTS ${base}__e${Math.floor(end / 1000)}`);
      }
      if (ends.length) next = Math.min(next ?? Number.POSITIVE_INFINITY, ends[0] as number);
    }
    return next;
  }
}
