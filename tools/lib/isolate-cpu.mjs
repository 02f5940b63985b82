// CPU per isolate of the local workerd process, measured with V8's sampling profiler through the
// inspector (scripts/stack.mjs `inspectorPort`). Shared by tools/cost.mjs, tools/bench.mjs and
// tools/profile.mjs.
//
// Why samples measure CPU here: workerd runs every isolate on one thread, and V8 records a sample for
// an isolate only while that isolate is entered (its lock held: its JavaScript and the native work it
// calls, such as WebCrypto or a Durable Object's SQLite). Each profiler ticks every `interval` µs, so
// an isolate's non-idle samples times the tick the profiles actually kept is the time the thread spent
// in it. The tick is the interval plus the sampler's own delay: the shortest gaps between the busiest
// isolate's samples (their 5th percentile), the gaps while it stayed entered from one tick to the
// next. What no isolate holds is the runtime's own work (the event loop, HTTP parsing, RPC between
// isolates, the kernel): the thread's CPU less the isolates'.

/**
 * What an isolate is in production, by the title workerd gives its inspector target.
 * - `worker`: a Keyway Worker (op-auth, op-token, op-mgmt): the CPU Workers pricing bills.
 * - `durable-object`: the stores Worker, whose Durable Objects are billed by request and duration.
 * - `local-only`: what exists only in the local runtime: the dev gateway (production routes by path on
 *   the issuer's host), Miniflare's Rate Limiting emulation (a Durable Object with SQLite; in
 *   production the binding is a counter in the location), Miniflare's D1 (its entry Worker and object;
 *   in production D1 runs elsewhere and bills rows), and Miniflare's own helpers.
 * @param {string} title @returns {"worker" | "durable-object" | "local-only"}
 */
export function isolateRole(title) {
  if (/keyway-op-(auth|token|mgmt)\b|floor-(auth|token)\b/.test(title)) return "worker";
  if (/keyway-stores\b|floor-stores\b/.test(title)) return "durable-object";
  return "local-only";
}

/** A short name for a target's title: `core:user:keyway-op-auth` → `keyway-op-auth`. @param {string} title */
export function isolateName(title) {
  return title.replace(/^workerd: worker /, "").replace(/^core:user:/, "");
}

/**
 * Opens an inspector session on each isolate at `inspectorPort` a login reaches, ready to profile.
 * @param {number} inspectorPort
 */
export async function openIsolateProfiler(inspectorPort, intervalUs = 1000) {
  // Each profiler interrupts workerd's one thread at every tick, so only the isolates a login can
  // reach are profiled (Miniflare's idle helpers, its cache and outbound Workers, are left alone), and
  // the default tick is coarse: the interrupts are then a small share of the thread's time.
  const targets = /** @type {{ title: string, webSocketDebuggerUrl: string }[]} */ (
    await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()
  ).filter((t) => /keyway-|floor-|ratelimit:|d1:/.test(t.title));
  const sessions = await Promise.all(targets.map((t) => openSession(t.title, t.webSocketDebuggerUrl)));
  await Promise.all(
    sessions.map((s) =>
      s.send("Profiler.enable").then(() => s.send("Profiler.setSamplingInterval", { interval: intervalUs })),
    ),
  );
  return {
    /** Starts every profiler. */
    start: () => Promise.all(sessions.map((s) => s.send("Profiler.start"))),
    /** Stops every profiler: each isolate's measured CPU (ms) and its raw profile. @returns {Promise<IsolateCpu[]>} */
    stop: async () => {
      const measured = await Promise.all(
        sessions.map(async (s) => {
          const profile = /** @type {CpuProfile} */ ((await s.send("Profiler.stop")).profile);
          return { title: s.title, name: isolateName(s.title), role: isolateRole(s.title), ...count(profile), profile };
        }),
      );
      // One tick for all: every profiler has the same interval and sampler, and the busiest isolate has
      // the most runs of consecutive samples to show it (longer gaps are time it was not entered).
      const busiest = measured.reduce((a, b) => (b.samples > a.samples ? b : a));
      const tickUs = busiest.shortGapUs || intervalUs;
      return measured.map(({ shortGapUs: _, ...m }) => ({ ...m, tickUs, ms: (m.samples * tickUs) / 1000 }));
    },
    close: () => {
      for (const s of sessions) s.close();
    },
  };
}

/**
 * @typedef {{ nodes: { id: number, callFrame: { functionName: string, url: string, lineNumber: number }, children?: number[] }[], samples: number[], timeDeltas: number[], startTime: number, endTime: number }} CpuProfile
 * @typedef {{ title: string, name: string, role: "worker" | "durable-object" | "local-only", ms: number, samples: number, tickUs: number, profile: CpuProfile }} IsolateCpu
 */

/**
 * An isolate's non-idle samples, and the 5th percentile of the gaps between its samples: for a busy
 * isolate, the configured interval plus the sampler's own delay.
 * @param {CpuProfile} profile
 */
export function count(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  let samples = 0;
  for (const id of profile.samples) if (byId.get(id)?.callFrame.functionName !== "(idle)") samples++;
  const gaps = profile.timeDeltas
    .slice(1)
    .filter((d) => d > 0)
    .sort((a, b) => a - b);
  return { samples, shortGapUs: gaps[Math.floor(gaps.length / 20)] ?? 0 };
}

/**
 * Sums measured isolates by role.
 * @param {IsolateCpu[]} isolates
 */
export function byRole(isolates) {
  /** @type {Record<"worker" | "durable-object" | "local-only", number>} */
  const out = { worker: 0, "durable-object": 0, "local-only": 0 };
  for (const i of isolates) out[i.role] += i.ms;
  return out;
}

/** @param {string} title @param {string} url */
function openSession(title, url) {
  const ws = new WebSocket(url);
  let next = 1;
  /** @type {Map<number, { resolve: (v: any) => void, reject: (e: Error) => void }>} */
  const pending = new Map();
  ws.addEventListener("message", (ev) => {
    const msg = JSON.parse(String(ev.data));
    const p = pending.get(msg.id);
    if (!p) return;
    pending.delete(msg.id);
    if (msg.error) p.reject(new Error(msg.error.message));
    else p.resolve(msg.result);
  });
  return /** @type {Promise<{ title: string, close: () => void, send: (method: string, params?: object) => Promise<any> }>} */ (
    new Promise((resolve, reject) => {
      ws.addEventListener("error", () => reject(new Error(`inspector ${title}: connection failed`)));
      ws.addEventListener("open", () =>
        resolve({
          title,
          close: () => ws.close(),
          send: (method, params = {}) =>
            new Promise((res, rej) => {
              const id = next++;
              pending.set(id, { resolve: res, reject: rej });
              ws.send(JSON.stringify({ id, method, params }));
            }),
        }),
      );
    })
  );
}
