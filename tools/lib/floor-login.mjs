// Issue 28 item 3: the floor under a login's CPU on this runtime. A throwaway set of Workers (no
// Keyway code: no sealing, no MACs, no config, no routing library) makes exactly the operations a
// five-step login makes, each as cheaply as workerd allows, and nothing else. The bench loads it with
// k6/floor-login.js like any other target (FLOOR=keyway,minimal npm run bench), so its CPU per login
// is measured in the same run as Keyway's and the baseline's. What no implementation of the contract
// on this runtime can go below is then a measured figure, not an estimate.
//
// Two operation sets:
// - `keyway`: Keyway's (docs/performance.md, "One login, operation by operation"): 6 requests (the
//   five steps and the test's mailbox read), a Rate Limiting call at generate and at verify, a
//   Durable Object write at generate, verify and the code step, a read for the mailbox, and at the
//   token step a read and a write in parallel and two RS256 signatures.
// - `minimal`: the smallest set issue 28 names (a code issued, a code verified, a refresh family, with
//   the session folded into one of them): no write at the code step and no read at the token step.
// Both keep what the contract fixes: the five requests, the per-IP quotas at generate and verify
// (CONTRACT §6), an RS256 ID token (the default, §3) and an RS256 access token (RFC 9068 §2.1: the
// one algorithm every resource server supports).
//
// Shaped as `npm start` (a gateway Worker on the socket, service-binding hops, Miniflare's Rate Limiting,
// state on disk) or, with `productionShaped`, as scripts/stack.mjs's production shape (op-auth's and
// op-token's stand-ins on their own ports, the in-memory limiter, state on a tmpfs).
import { rmSync } from "node:fs";
import { join } from "node:path";
import { freePort, localRateLimiter } from "../../scripts/stack.mjs";
import { esmWorker, REPO, scratchDir, scratchMiniflare } from "./k6-stack.mjs";
import { workerdPids } from "./proc.mjs";

/** @typedef {"keyway" | "minimal"} FloorOps */

const STORES = `
import { DurableObject } from "cloudflare:workers";
export class Store extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID");
  }
  read(k) {
    return this.ctx.storage.sql.exec("SELECT v FROM t WHERE k = ?", k).toArray()[0]?.v ?? null;
  }
  write(rows) {
    for (const [k, v] of rows) this.ctx.storage.sql.exec("INSERT OR REPLACE INTO t (k, v) VALUES (?, ?)", k, v);
    return rows.length;
  }
}
export default { fetch() { return new Response("not found", { status: 404 }); } };`;

// Four shards a store, as Keyway's default SHARDS; the key picks one.
const SHARD = `
function shard(env, store, key) {
  let h = 0;
  for (let i = 0; i < key.length; i++) h = (h * 31 + key.charCodeAt(i)) | 0;
  return env.STORE.getByName(store + ":" + ((h >>> 0) % 4));
}
const json = (body, status = 200) => Response.json(body, { status, headers: { "Cache-Control": "no-store" } });`;

/** @param {FloorOps} ops */
const AUTH = (ops) => `${SHARD}
export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    const ip = req.headers.get("cf-connecting-ip") ?? "127.0.0.1";
    switch (url.pathname) {
      case "/authorize":
        return json({ tx: url.searchParams.get("state") });
      case "/generate": {
        const { email } = await req.json();
        if (!(await env.IP_GENERATE.limit({ key: ip })).success) return json({ error: "slow_down" }, 429);
        await shard(env, "challenge", email).write([[email, "code"], [email + ":sent", "event"]]);
        return json({ sent: true });
      }
      case "/mailbox": {
        const email = url.searchParams.get("email");
        const code = await shard(env, "challenge", email).read(email);
        return json({ messages: code ? [{ code: "000000" }] : [] });
      }
      case "/verify": {
        const { email, code } = await req.json();
        if (!(await env.IP_VERIFY.limit({ key: ip })).success) return json({ error: "slow_down" }, 429);
        await shard(env, "challenge", email).write([[email, "used:" + code]]);
        return json({ redirect_to: url.origin + "/code?login=" + encodeURIComponent(email) });
      }
      case "/code": {
        const login = url.searchParams.get("login");
        ${ops === "keyway" ? 'await shard(env, "session", login).write([[login, "session"], [login + ":in", "event"]]);' : ""}
        return new Response(null, { status: 302, headers: { Location: "https://floor.invalid/cb?code=" + encodeURIComponent(login) } });
      }
    }
    return new Response("not found", { status: 404 });
  },
};`;

/** @param {FloorOps} ops */
const TOKEN = (ops) => `${SHARD}
const keys = {};
async function key() {
  keys.rs ??= (await crypto.subtle.generateKey(
    { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    false, ["sign"])).privateKey;
  return keys.rs;
}
const encoder = new TextEncoder();
const b64 = (bytes) => bytes.toBase64({ alphabet: "base64url", omitPadding: true });
async function jwt(claims) {
  const input = b64(encoder.encode('{"alg":"RS256","typ":"JWT"}')) + "." + b64(encoder.encode(JSON.stringify(claims)));
  const sig = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", await key(), encoder.encode(input));
  return input + "." + b64(new Uint8Array(sig));
}
export default {
  async fetch(req, env) {
    if (new URL(req.url).pathname !== "/token") return new Response("not found", { status: 404 });
    const form = await req.formData();
    const code = form.get("code");
    ${
      ops === "keyway"
        ? 'await Promise.all([shard(env, "revocation", code).read(code), shard(env, "refresh", code).write([[code, "family"], [code + ":issued", "event"]])]);'
        : 'await shard(env, "refresh", code).write([[code, "family"], [code + ":issued", "event"]]);'
    }
    const now = Math.floor(Date.now() / 1000);
    const claims = { iss: "http://floor.invalid", sub: code, aud: "floor", iat: now, exp: now + 600 };
    const [idToken, accessToken] = await Promise.all([jwt(claims), jwt({ ...claims, jti: crypto.randomUUID() })]);
    return json({ access_token: accessToken, token_type: "Bearer", expires_in: 600, id_token: idToken, refresh_token: code });
  },
};`;

const GATEWAY = `
export default {
  fetch(req, env) {
    return new URL(req.url).pathname === "/token" ? env.TOKEN.fetch(req) : env.AUTH.fetch(req);
  },
};`;

/**
 * The floor as a tools/bench.mjs target.
 * @param {{ ops: FloorOps, productionShaped?: boolean, inspectorPort?: number }} o
 * @returns {Promise<import("./bench-targets.mjs").Target>}
 */
export async function floorTarget({ ops, productionShaped = false, inspectorPort }) {
  const tmp = scratchDir("keyway-floor-", productionShaped);
  const port = await freePort();
  const authPort = productionShaped ? await freePort() : 0;
  const tokenPort = productionShaped ? await freePort() : 0;
  const stores = { type: "durable-object", worker: "floor-stores", exportName: "Store" };
  // As op-auth declares its per-IP quotas (workers/op-auth/wrangler.toml), raised for load.
  const limiter = (/** @type {string} */ namespace) =>
    productionShaped
      ? {
          type: "worker",
          worker: "keyway-local-rate-limiter",
          exportName: "Limiter",
          props: { limit: 1_000_000, period: 60, namespace },
        }
      : { type: "rate-limit", namespace, simple: { limit: 1_000_000, period: 60 } };
  const socket = (/** @type {number} */ p) => ({ dev: { unsafeDirectSockets: [{ host: "127.0.0.1", port: p }] } });
  const mf = scratchMiniflare(
    join(tmp, "state"),
    [
      {
        config: {
          name: "floor-gateway",
          compatibilityDate: "2026-11-01",
          manifest: esmWorker(GATEWAY),
          env: { AUTH: { type: "worker", worker: "floor-auth" }, TOKEN: { type: "worker", worker: "floor-token" } },
        },
        ...socket(port),
      },
      {
        config: {
          name: "floor-auth",
          compatibilityDate: "2026-11-01",
          manifest: esmWorker(AUTH(ops)),
          env: { STORE: stores, IP_GENERATE: limiter("1001"), IP_VERIFY: limiter("1002") },
        },
        ...(productionShaped ? socket(authPort) : {}),
      },
      {
        config: {
          name: "floor-token",
          compatibilityDate: "2026-11-01",
          manifest: esmWorker(TOKEN(ops)),
          env: { STORE: stores },
        },
        ...(productionShaped ? socket(tokenPort) : {}),
      },
      {
        config: {
          name: "floor-stores",
          compatibilityDate: "2026-11-01",
          manifest: esmWorker(STORES),
          exports: { Store: { type: "durable-object", storage: "sqlite" } },
        },
      },
      ...(productionShaped ? [localRateLimiter()] : []),
    ],
    inspectorPort,
  );
  try {
    await mf.ready;
  } catch (err) {
    await mf.dispose();
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  const url = `http://127.0.0.1:${port}`;
  return {
    name: `floor: ${ops === "keyway" ? "Keyway's operations" : "the minimal operations"}${productionShaped ? ", production-shaped" : ""}`,
    description:
      (ops === "keyway"
        ? "the operations of Keyway's login and nothing else (tools/lib/floor-login.mjs): 6 requests, 2 Rate Limiting calls, 4 Durable Object writes and 2 reads, 2 RS256 signatures"
        : "the fewest operations a login keeping Keyway's guarantees needs (tools/lib/floor-login.mjs): 6 requests, 2 Rate Limiting calls, 3 Durable Object writes and the mailbox's read, 2 RS256 signatures") +
      (productionShaped
        ? "; production-shaped: each request straight to its Worker's port, the limiter in memory, the state on a tmpfs"
        : "; shaped as `npm start`: a gateway Worker on the socket, Miniflare's Rate Limiting, the state on disk"),
    url,
    adminToken: "",
    tmp,
    script: join(REPO, "k6/floor-login.js"),
    extraReads: true,
    env: productionShaped
      ? { AUTH_URL: `http://127.0.0.1:${authPort}`, TOKEN_URL: `http://127.0.0.1:${tokenPort}` }
      : {},
    pids: workerdPids,
    stats: null,
    policy: {},
    vars: {},
    async dispose(keep = false) {
      await mf.dispose();
      if (!keep) rmSync(tmp, { recursive: true, force: true });
    },
  };
}
