// The bench report's chart (tools/bench.mjs): a hand-written SVG, no dependency.
import { fmtMs } from "./bench-report.mjs";

/** @typedef {import("./bench-ladder.mjs").Rung} Rung */

/** A hand-written SVG: full_flow p50/p95/p99 (log scale) against the offered rate, failed logins as bars. */
export function chartSvg(/** @type {Rung[]} */ rungs, /** @type {string} */ title) {
  const W = 760;
  const H = 440;
  const L = 70;
  const R = 70;
  const T = 50;
  const B = 60;
  const pw = W - L - R;
  const ph = H - T - B;
  const rates = [...new Set(rungs.map((r) => r.rate))].sort((a, b) => a - b);
  const xMax = Math.max(...rates) * 1.08;
  const x = (/** @type {number} */ v) => L + (v / xMax) * pw;
  const values = rungs.flatMap((r) =>
    ["med", "p(95)", "p(99)"].map((k) => r.trends.full_flow?.[/** @type {"med"} */ (k)] ?? NaN),
  );
  const finite = values.filter((v) => Number.isFinite(v) && v > 0);
  const ticks = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000];
  const lo = ticks.filter((t) => t <= Math.min(...finite, 100)).pop() ?? 1;
  const hi = ticks.find((t) => t >= Math.max(...finite) * 1.2 && t >= 1000) ?? 50000;
  const y = (/** @type {number} */ v) =>
    T + ph - ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * ph;
  const worst = Math.max(...rungs.map((r) => r.errorRate * 100));
  const errMax = [1, 2, 5, 10, 20, 40, 60, 80, 100].find((v) => v >= worst) ?? 100;
  const yErr = (/** @type {number} */ p) => T + ph - (p / errMax) * ph;
  const out = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(title)}</text>`,
  );
  // error bars first, behind the lines
  const bw = Math.max(6, Math.min(24, pw / (rates.length * 3)));
  for (const r of rungs) {
    const reps = rungs.filter((q) => q.rate === r.rate);
    const i = reps.indexOf(r);
    const cx = x(r.rate) + (i - (reps.length - 1) / 2) * (bw + 2);
    const h = T + ph - yErr(r.errorRate * 100);
    if (h > 0)
      out.push(
        `<rect x="${(cx - bw / 2).toFixed(1)}" y="${yErr(r.errorRate * 100).toFixed(1)}" width="${bw}" height="${h.toFixed(1)}" fill="#d62728" fill-opacity="0.18" stroke="#d62728" stroke-opacity="0.5"/>`,
      );
  }
  // grid and left axis
  for (const t of ticks.filter((t) => t >= lo && t <= hi)) {
    out.push(
      `<line x1="${L}" x2="${L + pw}" y1="${y(t).toFixed(1)}" y2="${y(t).toFixed(1)}" stroke="#e5e5e5"/>`,
      `<text x="${L - 8}" y="${(y(t) + 4).toFixed(1)}" text-anchor="end">${t >= 1000 ? `${t / 1000} s` : `${t}`}</text>`,
    );
  }
  for (const [ms, label] of /** @type {const} */ ([
    [100, "100 ms (150/s target)"],
    [500, "500 ms (300/s target)"],
  ])) {
    if (ms < lo || ms > hi) continue;
    out.push(
      `<line x1="${L}" x2="${L + pw}" y1="${y(ms).toFixed(1)}" y2="${y(ms).toFixed(1)}" stroke="#555" stroke-dasharray="6 4"/>`,
      `<text x="${L + pw - 4}" y="${(y(ms) - 5).toFixed(1)}" text-anchor="end" fill="#555">${label}</text>`,
    );
  }
  out.push(
    `<line x1="${L}" x2="${L}" y1="${T}" y2="${T + ph}" stroke="#000"/>`,
    `<line x1="${L}" x2="${L + pw}" y1="${T + ph}" y2="${T + ph}" stroke="#000"/>`,
    `<line x1="${L + pw}" x2="${L + pw}" y1="${T}" y2="${T + ph}" stroke="#d62728"/>`,
    `<text transform="translate(18 ${T + ph / 2}) rotate(-90)" text-anchor="middle">full_flow latency, ms (log scale)</text>`,
    `<text transform="translate(${W - 16} ${T + ph / 2}) rotate(90)" text-anchor="middle" fill="#d62728">failed logins, % (bars)</text>`,
    `<text x="${L + pw / 2}" y="${H - 18}" text-anchor="middle">offered rate, logins/s</text>`,
  );
  for (const rate of rates)
    out.push(
      `<line x1="${x(rate).toFixed(1)}" x2="${x(rate).toFixed(1)}" y1="${T + ph}" y2="${T + ph + 5}" stroke="#000"/>`,
      `<text x="${x(rate).toFixed(1)}" y="${T + ph + 19}" text-anchor="middle">${rate}</text>`,
    );
  for (let i = 0; i <= 4; i++) {
    const p = (errMax * i) / 4;
    out.push(`<text x="${L + pw + 8}" y="${(yErr(p) + 4).toFixed(1)}" fill="#d62728">${Number(p.toFixed(2))}</text>`);
  }
  // lines through the mean of each rate's runs, a marker per run
  const series = /** @type {const} */ ([
    ["med", "p50", "#1f77b4"],
    ["p(95)", "p95", "#ff7f0e"],
    ["p(99)", "p99", "#9467bd"],
  ]);
  series.forEach(([key, name, color], si) => {
    const pts = rates
      .map((rate) => {
        const vs = rungs.filter((r) => r.rate === rate).map((r) => r.trends.full_flow?.[key] ?? NaN);
        const ok = vs.filter((v) => Number.isFinite(v) && v > 0);
        return ok.length ? [x(rate), y(ok.reduce((a, b) => a + b, 0) / ok.length)] : null;
      })
      .filter((p) => p !== null);
    if (pts.length > 1)
      out.push(
        `<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" ")}"/>`,
      );
    for (const r of rungs) {
      const v = r.trends.full_flow?.[key];
      if (v === undefined || !(v > 0)) continue;
      out.push(
        `<circle cx="${x(r.rate).toFixed(1)}" cy="${y(v).toFixed(1)}" r="4" fill="${color}" stroke="#fff"><title>${r.rate}/s ${name}: ${fmtMs(v)} ms</title></circle>`,
      );
    }
    const lx = L + 12 + si * 90;
    out.push(
      `<line x1="${lx}" x2="${lx + 22}" y1="${T + 12}" y2="${T + 12}" stroke="${color}" stroke-width="2"/>`,
      `<circle cx="${lx + 11}" cy="${T + 12}" r="4" fill="${color}"/>`,
      `<text x="${lx + 28}" y="${T + 16}">${name}</text>`,
    );
  });
  out.push(
    `<rect x="${L + 12 + 3 * 90}" y="${T + 6}" width="14" height="12" fill="#d62728" fill-opacity="0.18" stroke="#d62728" stroke-opacity="0.5"/>`,
    `<text x="${L + 12 + 3 * 90 + 20}" y="${T + 16}">failed logins %</text>`,
    "</svg>",
  );
  return `${out.join("\n")}\n`;
}

/** @param {string} date @param {number} runNo @param {string} commit @param {string} [target] */
export function chartTitle(date, runNo, commit, target = "Keyway") {
  return `${target} full login: full_flow latency vs rate (${date}, run ${runNo}, ${commit.slice(0, 7)})`;
}

/** @param {string} s */
export function esc(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
