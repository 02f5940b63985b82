// Shared by the local tooling (setup, dev, start, the e2e test): where things live, the local
// secrets in .dev.vars, and the demo client's seed SQL.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseEnv } from "node:util";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The gateway comes first: it is the Worker that serves the issuer origin. */
export const GATEWAY_CONFIG = "workers/dev-gateway/wrangler.toml";
/** The three Keyway Workers; each parses the strict config, so each needs the secrets. */
export const OP_CONFIGS = [
  "workers/op-auth/wrangler.toml",
  "workers/op-token/wrangler.toml",
  "workers/op-mgmt/wrangler.toml",
];
/** The store Worker with the Durable Object classes. */
export const STORES_CONFIG = "wrangler.toml";
/**
 * The Workers that get the secrets: all but the gateway, as in wrangler dev, where the store
 * Worker reads the root .dev.vars (its Durable Objects may need secrets too, e.g. to send mail).
 */
export const KEYWAY_CONFIGS = [...OP_CONFIGS, STORES_CONFIG];
export const ALL_CONFIGS = [GATEWAY_CONFIG, ...OP_CONFIGS, STORES_CONFIG];

/** `npm run dev` (wrangler dev) and `npm start` (Miniflare) keep separate local state. */
export const DEV_PERSIST_DIR = ".wrangler/state";
export const START_PERSIST_DIR = ".keyway/state";

export const D1_DATABASE_NAME = "keyway";
export const DEMO_CLIENT_ID = "keyway-demo";
export const DEFAULT_PORT = 8787;

/**
 * The random-string secrets the op-* Workers require: every `secret("NAME")` field of the strict
 * config schema in workers/shared/config/ (ADMIN_TOKEN, OTP_HMAC_SECRET, ...). Read from the source so that a secret added
 * there is generated here too; the strict schema would reject one it does not know.
 */
function randomSecretNames() {
  const dir = join(ROOT, "workers", "shared", "config");
  const source = readdirSync(dir)
    .filter((f) => f.endsWith(".ts"))
    .map((f) => readFileSync(join(dir, f), "utf8"))
    .join("\n");
  const names = [...source.matchAll(/\bsecret\("([A-Z][A-Z0-9_]*)"\)/g)].map((m) => /** @type {string} */ (m[1]));
  return names.length ? [...new Set(names)] : ["ADMIN_TOKEN", "OTP_HMAC_SECRET"];
}
const SIGNING_KEY_NAMES = ["SIGNING_KEY_RS256", "SIGNING_KEY_ES256"];
export const SECRET_NAMES = [...randomSecretNames(), ...SIGNING_KEY_NAMES];

/** @param {string | undefined} value */
export function parsePort(value) {
  if (value === undefined || value === "") return DEFAULT_PORT;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`PORT must be a TCP port, got ${value}`);
  return port;
}

/** Locally the issuer is the origin the gateway serves. @param {number} port */
export const issuerFor = (port) => `http://127.0.0.1:${port}`;

/**
 * Fresh secrets: 32 random bytes (base64url) for ADMIN_TOKEN, OTP_HMAC_SECRET and any other
 * `secret(...)` of the config; new private JWKs for SIGNING_KEY_RS256 (RSA-2048) and SIGNING_KEY_ES256 (P-256).
 * @returns {Record<string, string>}
 */
export function generateSecrets() {
  const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ format: "jwk" });
  const ec = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "jwk" });
  return {
    ...Object.fromEntries(randomSecretNames().map((name) => [name, randomBytes(32).toString("base64url")])),
    SIGNING_KEY_RS256: JSON.stringify(rsa),
    SIGNING_KEY_ES256: JSON.stringify(ec),
  };
}

/**
 * dotenv lines. JSON values are single-quoted so that dotenv (wrangler) and node:util parseEnv
 * take them literally; none of our values contains a single quote or a newline.
 * @param {Record<string, string>} vars
 */
export function formatDevVars(vars) {
  return Object.entries(vars)
    .map(([k, v]) => {
      if (/['\n\r]/.test(v)) throw new Error(`${k}: value cannot be written to .dev.vars`);
      return /^[\w.:/@+-]*$/.test(v) ? `${k}=${v}` : `${k}='${v}'`;
    })
    .join("\n");
}

/** @param {string} path @returns {Record<string, string>} */
export function readDevVars(path = join(ROOT, ".dev.vars")) {
  return /** @type {Record<string, string>} */ (parseEnv(readFileSync(path, "utf8")));
}

/**
 * Creates the root .dev.vars with fresh secrets when it is missing, and adds any required secret
 * an older file lacks. Never rewrites an existing value. Returns the file's variables.
 * @returns {{ vars: Record<string, string>, created: boolean, added: string[] }}
 */
export function ensureDevVars(path = join(ROOT, ".dev.vars")) {
  const existing = existsSync(path) ? readFileSync(path, "utf8") : null;
  const vars = existing === null ? {} : /** @type {Record<string, string>} */ (parseEnv(existing));
  const fresh = generateSecrets();
  const added = SECRET_NAMES.filter((name) => !vars[name]);
  if (added.length === 0) return { vars, created: false, added };
  const missing = Object.fromEntries(added.map((name) => [name, /** @type {string} */ (fresh[name])]));
  const header =
    existing === null
      ? "# Local Keyway secrets, generated by scripts/setup.mjs. Never commit this file.\n# The admin API takes ADMIN_TOKEN as a Bearer token.\n"
      : existing.endsWith("\n") || existing === ""
        ? existing
        : `${existing}\n`;
  writeFileSync(path, `${header}${formatDevVars(missing)}\n`, { mode: 0o600 });
  return { vars: { ...vars, ...missing }, created: existing === null, added };
}

/** SQL string literal. @param {string} s */
const sqlString = (s) => `'${s.replaceAll("'", "''")}'`;

/**
 * The demo relying party's client (workers/dev-gateway/demo.ts): public, PKCE, fixed client_id.
 * Inserted once; the redirect URIs follow the served origin, so a run on another PORT updates them.
 * Literal SQL (no bindings) so that `wrangler d1 execute --command` can run it as is.
 * @param {string} issuer
 * @returns {string[]}
 */
export function demoClientSql(issuer, now = Date.now()) {
  const redirectUris = sqlString(JSON.stringify([`${issuer}/demo/callback`]));
  const postLogout = sqlString(JSON.stringify([`${issuer}/demo`]));
  return [
    `INSERT OR IGNORE INTO clients (client_id, client_name, token_endpoint_auth_method, secret_hash, redirect_uris,
  post_logout_redirect_uris, grant_types, scope, id_token_signed_response_alg, allowed_cors_origins, created_at, updated_at)
VALUES (${sqlString(DEMO_CLIENT_ID)}, 'Keyway demo', 'none', NULL, ${redirectUris}, ${postLogout},
  ${sqlString(JSON.stringify(["authorization_code", "refresh_token"]))}, 'openid email profile offline_access', 'RS256', '[]', ${now}, ${now})`,
    `UPDATE clients SET redirect_uris = ${redirectUris}, post_logout_redirect_uris = ${postLogout}, updated_at = ${now}
WHERE client_id = ${sqlString(DEMO_CLIENT_ID)} AND (redirect_uris != ${redirectUris} OR post_logout_redirect_uris != ${postLogout})`,
  ];
}

/** Environment for spawned wrangler commands: no telemetry from local tooling. */
export function wranglerEnv() {
  return { ...process.env, WRANGLER_SEND_METRICS: "false" };
}
