// The bench report (tools/bench.mjs): the verdict, the settings, the table and details of each target's
// ladder, and the targets side by side.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { join, relative } from "node:path";
import { unstable_readConfig as readConfig } from "wrangler";
import { TRENDS } from "./bench-ladder.mjs";
import { K6_VERSION, REPO } from "./k6-stack.mjs";

export const fmtMs = (/** @type {number | undefined} */ v) =>
  v === undefined || !Number.isFinite(v) ? "–" : v >= 100 ? v.toFixed(0) : v.toFixed(1);
export const pct = (/** @type {number} */ v) =>
  v === 0 ? "0 %" : v < 0.001 ? `${(v * 100).toFixed(3)} %` : `${(v * 100).toFixed(2)} %`;
export const mib = (/** @type {number} */ b) => `${(b / 2 ** 20).toFixed(0)} MiB`;
export const cores = (/** @type {number | undefined} */ v) => (v === undefined ? "–" : v.toFixed(2));

/** @typedef {import("./bench-ladder.mjs").Rung} Rung */

/** @param {Rung} r */
export const passes500 = (r) => (r.trends.full_flow?.["p(95)"] ?? Infinity) < 500 && r.errorRate < 0.001;
/** @param {Rung} r */
const passes100 = (r) => (r.trends.full_flow?.["p(95)"] ?? Infinity) < 100 && r.failedLogins === 0;

/** @param {Rung[]} rungs @param {number} rate @param {(r: Rung) => boolean} test @param {string} what */
function targetSentence(rungs, rate, test, what) {
  const at = rungs.filter((r) => r.rate === rate);
  if (!at.length) return `The ${rate}/s target (${what}) was not measured in this run.`;
  const met = at.every(test);
  const detail = at
    .map((r) => `full_flow p95 ${fmtMs(r.trends.full_flow?.["p(95)"])} ms, ${pct(r.errorRate)} errors`)
    .join("; ");
  return `The ${rate}/s target (${what}) was **${met ? "met" : "not met"}** (${detail}).`;
}

/** @param {Rung[]} rungs */
export function verdict(rungs) {
  const passing = rungs.filter(passes500);
  const rates = [...new Set(rungs.map((r) => r.rate))];
  const best = Math.max(...rates.filter((rate) => rungs.filter((r) => r.rate === rate).every(passes500)), -Infinity);
  const first =
    best === -Infinity
      ? "No rate in this run kept full_flow p95 under 500 ms with under 0.1 % failed logins."
      : `The highest offered rate at which full_flow p95 stayed under 500 ms with under 0.1 % failed logins was **${best} logins/s**` +
        (passing.some((r) => r.rate === best && r.droppedIterations > 0)
          ? " (with dropped iterations, see the table)."
          : ".");
  return [
    first,
    targetSentence(rungs, 150, passes100, "p95 < 100 ms, zero errors"),
    targetSentence(rungs, 300, passes500, "p95 < 500 ms, < 0.1 % errors"),
  ].join(" ");
}

/** @param {string} cmd @param {string[]} args */
function tryExec(cmd, args) {
  try {
    return execFileSync(cmd, args, { cwd: REPO, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return "";
  }
}

export function machineInfo() {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  const model = /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1]?.trim() ?? cpus()[0]?.model ?? "unknown";
  return {
    nproc: Number(tryExec("nproc", [])) || cpus().length,
    model,
    memGiB: totalmem() / 2 ** 30,
    kernel: tryExec("uname", ["-sr"]),
  };
}

export function gitInfo(/** @type {string} */ outDir) {
  const commit = tryExec("git", ["rev-parse", "HEAD"]);
  const subject = tryExec("git", ["log", "-1", "--format=%s"]);
  const dirty = tryExec("git", ["diff", "--name-only", "HEAD"])
    .split("\n")
    .filter((f) => f && !f.startsWith(relative(REPO, outDir)));
  return { commit, subject, dirty };
}

/** SHARDS of the op-auth Worker (the same in each op-* config), unless vars override it. */
export function shardSettings(/** @type {Record<string, string>} */ vars) {
  if (vars.SHARDS) return vars.SHARDS;
  const config = readConfig({ config: join(REPO, "workers/op-auth/wrangler.toml") });
  const shards = /** @type {Record<string, unknown> | undefined} */ (config.vars)?.SHARDS;
  return typeof shards === "string" ? shards : JSON.stringify(shards);
}

/**
 * @typedef {{ ramp: number, hold: number, warmup: number, repeat: number }} LadderSettings
 * @typedef {{ target: { name: string, description: string, policy: Record<string, unknown>, vars: Record<string, string> },
 *   rungs: Rung[], stopped: string | null, svgName: string,
 *   split?: import("../bench.mjs").Split | null, mailbox?: import("../bench.mjs").MailboxRead | null }} TargetRun
 */

/**
 * One run's section: its settings and, per target, the verdict, chart, table and rung details.
 * @param {{ runs: TargetRun[], runNo: number, startedAt: Date, finishedAt: Date,
 *   machine: ReturnType<typeof machineInfo>, git: ReturnType<typeof gitInfo>, loadBefore: string,
 *   settings: LadderSettings }} r
 */
export function runSection({ runs, runNo, startedAt, finishedAt, machine, git, loadBefore, settings }) {
  const { ramp, hold, warmup, repeat } = settings;
  const hhmm = (/** @type {Date} */ d) => d.toISOString().slice(11, 16);
  const lines = [];
  lines.push(
    `## Run ${runNo}: ${hhmm(startedAt)}–${hhmm(finishedAt)} UTC`,
    "",
    `- **Commit** \`${git.commit.slice(0, 12)}\` (${git.subject})` +
      (git.dirty.length
        ? `, with uncommitted changes to ${git.dirty.map((f) => `\`${f}\``).join(", ")}`
        : ", clean tree"),
    `- **Machine** ${machine.nproc} × ${machine.model}, ${machine.memGiB.toFixed(1)} GiB RAM, ${machine.kernel}; ` +
      `load average (1/5/15 min) before the run ${loadBefore}; the cores other processes kept busy during each hold are the table's *other CPU*`,
    `- **Load** k6 ${K6_VERSION} on the same machine; each target in turn, alone on the machine, over the same ladder`,
    `- **Rungs** ${ramp} s ramp from 0, then ${hold} s hold at the rate (ramping-arrival-rate); latency, errors and achieved rate ` +
      `are from the iterations that started in the hold, CPU from /proc over the hold (cores: 1.00 = one core busy), ` +
      `RSS the most seen during the rung; dropped_iterations counts the whole rung` +
      (warmup > 0 ? `; a ${warmup} s warm-up at 10/s ran first on each target` : ""),
  );
  for (const { target } of runs) {
    const isKeyway = target.vars.SHARDS !== undefined || Object.keys(target.policy).length > 0;
    lines.push(
      `- **${target.name}** ${target.description}` +
        (isKeyway
          ? `; SHARDS \`${shardSettings(target.vars)}\`; POLICY \`${JSON.stringify(target.policy)}\` (per-IP quotas raised: all requests come from 127.0.0.1); ` +
            `ID tokens ${process.env.ID_TOKEN_ALG || "RS256"} (k6 \`ID_TOKEN_ALG\`)`
          : ""),
    );
  }
  if (process.env.NOTE) lines.push(`- **Note** ${process.env.NOTE}`);
  if (runs.length > 1) lines.push("", comparison(runs));
  for (const { target, rungs, stopped, svgName, split, mailbox } of runs) {
    lines.push("", `### ${target.name}`, "", verdict(rungs), "");
    if (stopped) lines.push(`The ladder stopped early: ${stopped}.`, "");
    if (split) lines.push(splitTable(split), "");
    if (mailbox) lines.push(mailboxSentence(mailbox), "");
    lines.push(`![${target.name}: full_flow latency against offered rate](${svgName})`, "");
    lines.push(
      "| offered /s | achieved /s | ok logins/s | dropped | failed logins | full_flow p50 | p95 | p99 | server req/s | server CPU | CPU ms/login | k6 CPU | other CPU | server RSS | DO calls/login | D1/login | rows/login | load avg before |",
      "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    );
    for (const r of rungs) {
      const f = r.trends.full_flow;
      const pl = r.perLogin;
      lines.push(
        `| ${r.rate}${repeat > 1 ? ` (${r.label.split("-").pop()})` : ""} | ${r.achieved.toFixed(1)} | ${r.okPerSecond.toFixed(1)} | ${r.droppedIterations} | ` +
          `${pct(r.errorRate)} (${r.failedLogins}) | ${fmtMs(f?.med)} | ${fmtMs(f?.["p(95)"])} | ${fmtMs(f?.["p(99)"])} | ` +
          `${r.httpReqsPerSecond.toFixed(0)} | ${cores(r.cpu?.server)} | ${cpuMsPerLogin(r)} | ${cores(r.cpu?.k6)} | ${cores(r.cpu?.other)} | ` +
          `${mib(r.serverRssMax)} | ${pl ? pl.durableObjectCalls.toFixed(2) : "–"} | ${pl ? pl.d1Queries.toFixed(2) : "–"} | ${pl ? pl.rowsWritten.toFixed(1) : "–"} | ${r.loadavgBefore} |`,
      );
    }
    lines.push(
      "",
      "Latencies in ms. *achieved*: iterations started in the hold and finished, per second; *ok logins/s*: the successful ones. " +
        "*server CPU*: the target's own processes (workerd, or the peer's node); *CPU ms/login*: server CPU over the hold divided by the logins that finished in it. " +
        "*DO calls, D1, rows per login*: Keyway's `GET /admin/v1/stats` totals from the end of k6's seeding to the end of the run, divided by every login the run attempted (ramp included; the seeding itself excluded, the client's deletion in teardown included). " +
        "*other CPU*: the whole machine's busy cores minus the server, k6 and the bench's own node process.",
      "",
    );
    for (const r of rungs) lines.push(...rungDetails(r, repeat));
  }
  return lines.join("\n");
}

/** Server CPU per finished login over the hold, in ms; null when the rung measured none. @param {Rung} r */
export function serverMsPerLogin(r) {
  return r.cpu && r.achieved > 0 ? (r.cpu.server * 1000) / r.achieved : null;
}

/** serverMsPerLogin for a table. @param {Rung} r */
export function cpuMsPerLogin(r) {
  return serverMsPerLogin(r)?.toFixed(1) ?? "–";
}

/** The best rate a target passed (full_flow p95 < 500 ms, < 0.1 % failed), every repeat of it. @param {Rung[]} rungs */
export function bestPassingRate(rungs) {
  const rates = [...new Set(rungs.map((r) => r.rate))];
  const passing = rates.filter((rate) => rungs.filter((r) => r.rate === rate).every(passes500));
  return passing.length ? Math.max(...passing) : null;
}

/**
 * The targets side by side: best passing rate, its ratio to the reference's, CPU per login at each rate.
 * The reference is node-oidc-provider in memory when it ran (issue 28 item 3 measures against it), else
 * the other peer, else the last target.
 * @param {TargetRun[]} runs
 */
function comparison(runs) {
  const ref =
    runs.find((r) => r.target.name === "node-oidc-provider") ??
    runs.find((r) => r.target.name.startsWith("node-oidc-provider")) ??
    runs.at(-1);
  const refBest = ref ? bestPassingRate(ref.rungs) : null;
  const rates = [...new Set(runs.flatMap((r) => r.rungs.map((q) => q.rate)))].sort((a, b) => a - b);
  const splitRate = runs.find((r) => r.split)?.split?.rate;
  const splitHead = splitRate
    ? ` local-only isolates' share at ${splitRate}/s | CPU ms/login at ${splitRate}/s less local-only isolates |`
    : "";
  const mailboxRate = runs.find((r) => r.mailbox)?.mailbox?.rate;
  const mailboxHead = mailboxRate
    ? ` CPU ms/login at ${mailboxRate}/s, mailbox pairs | of it, the test's mailbox read | less that read |`
    : "";
  const lines = [
    `### Side by side`,
    "",
    `| target | best passing rate /s | ratio to ${ref?.target.name} | ${rates.map((r) => `CPU ms/login at ${r}/s`).join(" | ")} |${splitHead}${mailboxHead}`,
    `| --- | ---: | ---: | ${rates.map(() => "---:").join(" | ")} |${splitRate ? " ---: | ---: |" : ""}${mailboxRate ? " ---: | ---: | ---: |" : ""}`,
  ];
  for (const { target, rungs, split, mailbox } of runs) {
    const best = bestPassingRate(rungs);
    const ratio = best !== null && refBest ? (best / refBest).toFixed(2) : "–";
    const perRate = rates.map((rate) => {
      const at = rungs.filter((r) => r.rate === rate);
      return at.length ? at.map(cpuMsPerLogin).join(", ") : "–";
    });
    let splitCells = "";
    if (splitRate) {
      const share = split ? split.roles["local-only"] / split.threadMs : null;
      const at = rungs.filter((r) => r.rate === splitRate && r.cpu && r.achieved > 0);
      splitCells =
        share === null
          ? " – | – |"
          : ` ${(share * 100).toFixed(1)} % | ${at.length ? at.map((r) => ((serverMsPerLogin(r) ?? 0) * (1 - share)).toFixed(1)).join(", ") : "–"} |`;
    }
    const mailboxCells = !mailboxRate
      ? ""
      : mailbox
        ? ` ${mailbox.loginMs.toFixed(2)} | ${mailbox.perReadMs.toFixed(2)} | ${(mailbox.loginMs - mailbox.perReadMs).toFixed(2)} |`
        : " – | – | – |";
    lines.push(
      `| ${target.name} | ${best ?? "none"} | ${ratio} | ${perRate.join(" | ")} |${splitCells}${mailboxCells}`,
    );
  }
  lines.push(
    "",
    "A rate *passes* when full_flow p95 stays under 500 ms with under 0.1 % failed logins (every repeat of it); the ladder is the same for every target, so the ratio is as fine as its steps.",
  );
  if (splitRate)
    lines.push(
      "",
      `*Local-only isolates' share*: of workerd's isolate thread over a profiled rung at ${splitRate}/s after the ladder (each Keyway's section has the split), the share spent in the dev gateway and Miniflare's Rate Limiting and D1 isolates; the last column is the ladder's CPU per login at that rate less that share. The runtime's own work on behalf of those isolates (their dispatch, outside any isolate) is not split off, so it is still an upper bound; \`SHAPED=1\` measures the whole of it by its absence.`,
    );
  if (mailboxRate)
    lines.push(
      "",
      `*Mailbox pairs*: after the ladder, pairs of rungs at ${mailboxRate}/s on each target whose k6 script reads the mailbox through k6/lib/mailbox.js, a plain login and one that reads the mailbox again after finding its code (k6 \`MAILBOX_EXTRA_READS\`), in alternating order. The CPU the extra reads add, over their number, is what the test's own mailbox read costs; no production login makes it. The first of the three columns is the plain rungs' mean.`,
    );
  return lines.join("\n");
}

/** One target's mailbox pairs, in a sentence. @param {import("../bench.mjs").MailboxRead} m */
function mailboxSentence(m) {
  const pairs = m.pairs.map((p) => `${p.plainMs.toFixed(2)} plain, ${p.extraMs.toFixed(2)} with ${m.extra} more reads`);
  return (
    `The test's mailbox read, measured at ${m.rate}/s (server CPU ms per login over the hold): ${pairs.join("; ")}. ` +
    `One read costs ${m.perReadMs.toFixed(2)} ms; a login less it, ${(m.loginMs - m.perReadMs).toFixed(2)} ms.`
  );
}

/** @param {Rung} r @param {number} repeat */
function rungDetails(r, repeat) {
  const lines = [
    `#### ${r.rate} logins/s${repeat > 1 ? ` (${r.label.split("-").pop()})` : ""}`,
    "",
    "| metric | avg | p50 | p90 | p95 | p99 | max | count |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const [label] of TRENDS) {
    const t = r.trends[label];
    if (!t) {
      lines.push(`| ${label} | – | – | – | – | – | – | 0 |`);
      continue;
    }
    lines.push(
      `| ${label} | ${fmtMs(t.avg)} | ${fmtMs(t.med)} | ${fmtMs(t["p(90)"])} | ${fmtMs(t["p(95)"])} | ${fmtMs(t["p(99)"])} | ${fmtMs(t.max)} | ${t.count} |`,
    );
  }
  const errs = Object.entries(r.errors)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`);
  const statuses = Object.entries(r.statuses)
    .filter(([, n]) => n > 0)
    .map(([s, n]) => `${s === "0" ? "timeout/no response" : s} ×${n}`);
  const cpu = r.cpu
    ? `server ${cores(r.cpu.server)}, k6 ${cores(r.cpu.k6)}, bench node ${cores(r.cpu.node)}, machine ${cores(r.cpu.machine)} of ${cpus().length} cores` +
      (r.cpu.busiestOthers.length
        ? ` (busiest other processes: ${r.cpu.busiestOthers.map((p) => `${p.name} ${cores(p.cores)}`).join(", ")})`
        : "")
    : "not measured (k6 never reached the hold)";
  lines.push(
    "",
    `- CPU over the hold: ${cpu}; RSS max: server ${mib(r.serverRssMax)}, k6 ${mib(r.k6RssMax)}; ` +
      `load average ${r.loadavgBefore} before, ${r.loadavgAfter} after; k6 exit ${r.k6Status}${r.k6Status === 99 ? " (a threshold failed)" : ""}`,
    `- Failures in the hold: ${errs.length ? errs.join(", ") : "none"}; HTTP statuses of note: ${statuses.length ? statuses.join(", ") : "none"}`,
  );
  for (const s of r.failureSamples) lines.push(`  - ×${s.n} \`${s.text.replace(/`/g, "'")}\``);
  lines.push("");
  return lines;
}

/**
 * A profiled rung's CPU by isolate (tools/bench.mjs SPLIT_RATE).
 * @param {NonNullable<import("../bench.mjs").Split>} split
 */
function splitTable(split) {
  const per = (/** @type {number} */ ms) => (ms / Math.max(1, split.logins)).toFixed(2);
  const share = (/** @type {number} */ ms) => `${((100 * ms) / split.threadMs).toFixed(1)} %`;
  const row = (/** @type {string} */ what, /** @type {number} */ ms) => `| ${what} | ${per(ms)} | ${share(ms)} |`;
  const named = (/** @type {string} */ role) =>
    split.isolates
      .filter((i) => i.role === role)
      .sort((a, b) => b.ms - a.ms)
      .map((i) => `${i.name} ${per(i.ms)}`)
      .join(", ");
  return [
    `CPU by isolate at ${split.rate}/s, a profiled rung after the ladder (V8's profiler on each isolate a login reaches, one sample per ${split.tickUs} µs tick while an isolate is entered; tools/lib/isolate-cpu.mjs). Per login of the hold (${split.logins} logins); the profilers' ticks add to the thread, so these sum to more than the ladder's figure:`,
    "",
    "| where | CPU ms/login | share of the thread |",
    "| --- | ---: | ---: |",
    row("workerd's isolate thread", split.threadMs),
    row(`Keyway Workers' isolates (${named("worker")})`, split.roles.worker),
    row("the Durable Objects' isolate (keyway-stores)", split.roles["durable-object"]),
    row(`local-only isolates (${named("local-only")})`, split.roles["local-only"]),
    row("outside any isolate (the runtime's own work)", split.threadMs - split.inIsolates),
  ].join("\n");
}
