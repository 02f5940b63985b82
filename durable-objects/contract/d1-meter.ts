/**
 * What a D1 binding did, as Cloudflare bills it (issue 28): statements, and the rows read and written
 * that each result's `meta` reports (D1 counts an index entry a write adds as a row written). Import-free:
 * the Workers' isolates and the Durable Objects (whose audit flush writes D1) meter their bindings alike.
 */
export interface D1Meter {
  queries: number;
  rows_read: number;
  rows_written: number;
  /** The database's size after the latest statement that reported it (bytes; 0 until one has). */
  size_bytes: number;
}

export const newD1Meter = (): D1Meter => ({ queries: 0, rows_read: 0, rows_written: 0, size_bytes: 0 });

interface Meta {
  rows_read?: number;
  rows_written?: number;
  size_after?: number;
}

function add(meter: D1Meter, meta: Meta | undefined): void {
  meter.rows_read += meta?.rows_read ?? 0;
  meter.rows_written += meta?.rows_written ?? 0;
  if (meta?.size_after) meter.size_bytes = meta.size_after;
}

const originals = new WeakMap<object, D1PreparedStatement>();

function meteredStatement(statement: D1PreparedStatement, meter: D1Meter): D1PreparedStatement {
  const wrapped = new Proxy(statement, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      switch (prop) {
        case "bind":
          return (...args: unknown[]) => meteredStatement(target.bind(...args), meter);
        case "run":
        case "all":
          return async () => {
            const result = await (value as () => Promise<D1Result>).call(target);
            add(meter, result.meta);
            return result;
          };
        // `first` returns no meta: the same query through `all`, its first row (or column) returned.
        case "first":
          return async (column?: string) => {
            const result = await target.all<Record<string, unknown>>();
            add(meter, result.meta);
            const row = result.results[0] ?? null;
            return column === undefined ? row : ((row?.[column] as unknown) ?? null);
          };
        default:
          return (value as (...a: unknown[]) => unknown).bind(target);
      }
    },
  });
  originals.set(wrapped, statement);
  return wrapped;
}

/** The binding, metered: every statement (`prepare`, each of a batch, `exec`) and the rows its results report. */
export function meteredD1(db: D1Database, meter: D1Meter): D1Database {
  return new Proxy(db, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      switch (prop) {
        case "prepare":
          return (query: string) => {
            meter.queries++;
            return meteredStatement(target.prepare(query), meter);
          };
        case "exec":
          return (query: string) => {
            meter.queries++;
            return target.exec(query);
          };
        // The binding's batch takes its own statements, not their meters.
        case "batch":
          return async (statements: D1PreparedStatement[]) => {
            const results = await target.batch(statements.map((s) => originals.get(s) ?? s));
            for (const r of results) add(meter, r.meta);
            return results;
          };
        default:
          return (value as (...a: unknown[]) => unknown).bind(target);
      }
    },
  });
}
