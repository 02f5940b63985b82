// Process accounting from /proc, shared by tools/bench.mjs and tools/cost-model.mjs.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

export const CLK_TCK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

/** utime + stime of a process, in ticks; null when it is gone. @param {number} pid */
export function cpuTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // fields[0] is field 3 (state): utime is field 14, stime field 15.
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return null;
  }
}

/** Resident set size in bytes; 0 when the process is gone. @param {number} pid */
export function rssBytes(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Descendants of this process whose command is workerd (Miniflare's runtime). */
export function workerdPids() {
  /** @type {Map<number, number[]>} */
  const children = new Map();
  /** @type {Map<number, string>} */
  const comm = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const pid = Number(name);
      comm.set(pid, stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), pid]);
    } catch {
      // gone meanwhile
    }
  }
  const out = [];
  const queue = [process.pid];
  while (queue.length) {
    const pid = /** @type {number} */ (queue.shift());
    for (const child of children.get(pid) ?? []) {
      if (comm.get(child)?.startsWith("workerd")) out.push(child);
      queue.push(child);
    }
  }
  return out;
}

/**
 * utime + stime of each thread of the processes `pids`, in ticks, by thread id, with its name.
 * @param {number[]} pids @returns {Map<number, { name: string, ticks: number }>}
 */
function threadTicks(pids) {
  /** @type {Map<number, { name: string, ticks: number }>} */
  const out = new Map();
  for (const pid of pids) {
    let tids = [];
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        out.set(Number(tid), {
          name: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")),
          ticks: Number(fields[11]) + Number(fields[12]),
        });
      } catch {
        // the thread ended meanwhile
      }
    }
  }
  return out;
}

/**
 * Starts a clock of the CPU of each thread of `pids`. Reading it gives each thread's ms since the
 * start (a thread born since counts from zero), busiest first: workerd runs every isolate on its
 * busiest thread; the others are V8's helpers and, while profiling, the profilers.
 * @param {number[]} pids @returns {() => { tid: number, name: string, ms: number }[]}
 */
export function threadClock(pids) {
  const start = threadTicks(pids);
  return () =>
    [...threadTicks(pids)]
      .map(([tid, t]) => ({ tid, name: t.name, ms: ((t.ticks - (start.get(tid)?.ticks ?? 0)) / CLK_TCK) * 1000 }))
      .sort((a, b) => b.ms - a.ms);
}
