// A quick throughput probe: N GETs of one URL with C in flight, then req/s and latency percentiles.
//   node scripts/bench.mjs [url] [requests] [concurrency]
// Default: 2000 GETs of http://127.0.0.1:${PORT:-8787}/.well-known/openid-configuration, 50 at a time.
import { issuerFor, parsePort } from "./lib/local.mjs";

const url = process.argv[2] ?? `${issuerFor(parsePort(process.env.PORT))}/.well-known/openid-configuration`;
const total = Number(process.argv[3] ?? 2000);
const concurrency = Number(process.argv[4] ?? 50);

/** @param {number} n */
async function run(n) {
  /** @type {number[]} */
  const latencies = [];
  let next = 0;
  let failures = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) {
        next++;
        const t = performance.now();
        try {
          const res = await fetch(url);
          await res.arrayBuffer();
          if (!res.ok) failures++;
        } catch {
          failures++;
        }
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (/** @type {number} */ p) =>
    (latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0).toFixed(1);
  return { rps: n / seconds, seconds, failures, p50: pct(0.5), p99: pct(0.99) };
}

await run(Math.min(200, total)); // warm-up: isolates, config parsing, connection pool
const r = await run(total);
console.log(
  `${url}: ${total} GETs, concurrency ${concurrency}: ${r.rps.toFixed(0)} req/s in ${r.seconds.toFixed(2)} s, ` +
    `p50 ${r.p50} ms, p99 ${r.p99} ms, ${r.failures} failed`,
);
if (r.failures) process.exitCode = 1;
