// `npm run deploy -- --issuer https://id.example.com --zone example.com --mail-transport smtp ...`
// From an empty Cloudflare account to a running issuer (docs/deploy.md):
//  1. checks the production configuration with Keyway's own config schema (what each Worker will
//     parse at start-up: https issuer, a real mail transport, every secret);
//  2. finds or creates the D1 database and applies schema/ migrations to it;
//  3. writes a production wrangler config per Worker to .keyway/deploy/ (from the repo's configs:
//     same bindings, plus the D1 id, vars, routes on the issuer's host, the send_email binding);
//  4. deploys keyway-stores (the Durable Object classes) first, then op-token, op-auth, op-mgmt,
//     each with its secrets uploaded in the same version (--secrets-file);
//  5. smoke-checks discovery and JWKS on the issuer.
// --dry-run does 1 and 3 and runs `wrangler deploy --dry-run` on each config: no account needed.

import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { unstable_readConfig as readConfig } from "wrangler";
import { OP_CONFIGS, ROOT, STORES_CONFIG } from "./lib/local.mjs";
import { PRODUCTION_ROUTES } from "./lib/routes.mjs";
import { wrangler } from "./lib/run.mjs";
import { DEFAULT_SECRETS_FILE } from "./secrets.mjs";

const PLACEHOLDER_DB_ID = "00000000-0000-0000-0000-000000000000";

/** Paths each Worker serves on the issuer's host (shared with `npm start`). */
export const ROUTES = PRODUCTION_ROUTES;

/**
 * Secrets the store Worker needs (the MailOutbox sends mail from it; the WebhookOutbox unseals webhook
 * secrets with KEY_ENCRYPTION_SECRET); the op-* Workers get them all.
 */
const STORE_SECRETS = ["MAIL_OUTBOX_SECRET", "MAIL_API_KEY", "SMTP_PASSWORD", "KEY_ENCRYPTION_SECRET"];

/**
 * @typedef {{
 *   issuer: string, zone: string, issuerName?: string, mailTransport: string, mailFrom: string,
 *   mailFromName?: string, mailHttpUrl?: string, smtpHost?: string, smtpPort?: string, smtpUser?: string,
 *   smtpHelo?: string, shards?: string, regions?: string, policy?: string, tenantHosts?: string,
 *   database: string, databaseId?: string,
 *   secretsFile: string, outDir: string, dryRun: boolean, smoke: boolean
 * }} DeployOptions
 */

/** @param {string[]} argv @returns {DeployOptions} */
export function parseOptions(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      issuer: { type: "string" },
      zone: { type: "string" },
      "issuer-name": { type: "string" },
      "mail-transport": { type: "string" },
      "mail-from": { type: "string" },
      "mail-from-name": { type: "string" },
      "mail-http-url": { type: "string" },
      "smtp-host": { type: "string" },
      "smtp-port": { type: "string" },
      "smtp-user": { type: "string" },
      "smtp-helo": { type: "string" },
      shards: { type: "string" },
      regions: { type: "string" },
      "tenant-hosts": { type: "string" },
      policy: { type: "string" },
      database: { type: "string", default: "keyway" },
      "database-id": { type: "string" },
      secrets: { type: "string" },
      out: { type: "string" },
      "dry-run": { type: "boolean", default: false },
      "skip-smoke": { type: "boolean", default: false },
    },
  });
  const need = (/** @type {string} */ name) => {
    const v = /** @type {Record<string, unknown>} */ (values)[name];
    if (typeof v !== "string" || v === "") throw new Error(`--${name} is required (see docs/deploy.md)`);
    return v;
  };
  const issuer = need("issuer");
  const url = new URL(issuer);
  if (url.protocol !== "https:") throw new Error("--issuer must be https://");
  if (url.pathname !== "/" || url.search || url.hash || issuer.endsWith("/"))
    throw new Error("--issuer must be an origin without a path or trailing slash, e.g. https://id.example.com");
  const zone = need("zone");
  if (url.hostname !== zone && !url.hostname.endsWith(`.${zone}`))
    throw new Error(`--zone ${zone} does not contain the issuer's host ${url.hostname}`);
  /** @type {DeployOptions} */
  const opts = {
    issuer,
    zone,
    mailTransport: need("mail-transport"),
    mailFrom: need("mail-from"),
    database: values.database ?? "keyway",
    secretsFile: resolve(values.secrets ?? DEFAULT_SECRETS_FILE),
    outDir: resolve(values.out ?? join(ROOT, ".keyway", "deploy")),
    dryRun: values["dry-run"] ?? false,
    smoke: !(values["skip-smoke"] ?? false),
  };
  const optional = /** @type {const} */ ([
    ["issuerName", "issuer-name"],
    ["mailFromName", "mail-from-name"],
    ["mailHttpUrl", "mail-http-url"],
    ["smtpHost", "smtp-host"],
    ["smtpPort", "smtp-port"],
    ["smtpUser", "smtp-user"],
    ["smtpHelo", "smtp-helo"],
    ["shards", "shards"],
    ["regions", "regions"],
    ["policy", "policy"],
    ["tenantHosts", "tenant-hosts"],
    ["databaseId", "database-id"],
  ]);
  for (const [key, flag] of optional) {
    const v = values[flag];
    if (typeof v === "string" && v !== "") opts[key] = v;
  }
  return opts;
}

/** The string variables every production Worker gets (the same for all, as the strict config wants). */
/** @param {DeployOptions} o @param {Record<string, unknown>} devVars @returns {Record<string, string>} */
export function productionVars(o, devVars) {
  /** @type {Record<string, string | undefined>} */
  const vars = {
    ENVIRONMENT: "production",
    ISSUER: o.issuer,
    ISSUER_NAME: o.issuerName,
    MAIL_TRANSPORT: o.mailTransport,
    MAIL_FROM: o.mailFrom,
    MAIL_FROM_NAME: o.mailFromName,
    MAIL_HTTP_URL: o.mailHttpUrl,
    SMTP_HOST: o.smtpHost,
    SMTP_PORT: o.smtpPort,
    SMTP_USER: o.smtpUser,
    SMTP_HELO_NAME: o.smtpHelo,
    SHARDS: o.shards ?? (typeof devVars.SHARDS === "string" ? devVars.SHARDS : undefined),
    REGIONS: o.regions,
    POLICY: o.policy,
    TENANT_HOSTS: o.tenantHosts,
  };
  return /** @type {Record<string, string>} */ (
    Object.fromEntries(Object.entries(vars).filter(([, v]) => v !== undefined))
  );
}

/** @param {string} file @returns {Record<string, string>} */
export function readSecrets(file) {
  if (!existsSync(file))
    throw new Error(`${relative(ROOT, file)} is missing: run \`npm run secrets:generate\` first (docs/deploy.md)`);
  const parsed = JSON.parse(readFileSync(file, "utf8"));
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw new Error(`${relative(ROOT, file)} must be a JSON object of secret names to values`);
  /** @type {Record<string, string>} */
  const secrets = {};
  for (const [k, v] of Object.entries(parsed)) if (typeof v === "string") secrets[k] = v;
  // Mail credentials may come from the environment instead of the file.
  for (const name of ["MAIL_API_KEY", "SMTP_PASSWORD"]) {
    const fromEnv = process.env[name];
    if (fromEnv && !secrets[name]) secrets[name] = fromEnv;
  }
  return secrets;
}

/**
 * What each Worker will parse at start-up, checked now with the same schema (workers/shared/config/config.ts),
 * so a dev transport, a missing secret or an http issuer stops the deployment, not the first login.
 * @param {Record<string, string>} vars @param {Record<string, string>} secrets
 */
export async function checkProductionConfig(vars, secrets) {
  const mod = await import(pathToFileURL(join(ROOT, "workers", "shared", "config", "config.ts")).href);
  const mail = await import(pathToFileURL(join(ROOT, "workers", "shared", "config", "mail-settings.ts")).href);
  const env = { ...vars, ...secrets };
  // The send_email binding is declared in the generated configs; stand in for it here.
  const withBinding = vars.MAIL_TRANSPORT === "send_email" ? { ...env, SEND_EMAIL: { send() {} } } : env;
  mod.loadConfig(withBinding);
  mail.loadMailConfig(withBinding);
}

/**
 * Production wrangler configs (JSON) built from the repo's configs: same entry points, compatibility
 * settings, Durable Object bindings and migrations; production vars, the real D1 id, routes.
 * @param {DeployOptions} o @param {string} databaseId
 * @returns {{ name: string, file: string, config: Record<string, unknown> }[]}
 */
export function productionConfigs(o, databaseId) {
  const host = new URL(o.issuer).host;
  const schemaDir = join(ROOT, "schema");
  const sendEmail =
    o.mailTransport === "send_email" ? [{ name: "SEND_EMAIL", allowed_sender_addresses: [o.mailFrom] }] : undefined;
  // The deploy's order: the stores (the others bind their classes), then op-token before op-auth (op-auth
  // hands op-token its tenants' paths, and issues codes that op-token must know how to spend), then op-mgmt.
  const opToken = OP_CONFIGS.filter((p) => p.includes("op-token"));
  return [STORES_CONFIG, ...opToken, ...OP_CONFIGS.filter((p) => !opToken.includes(p))].map((path) => {
    const base = readConfig({ config: join(ROOT, path) });
    const name = /** @type {string} */ (base.name);
    const d1 = base.d1_databases[0];
    if (!d1) throw new Error(`${path} has no D1 binding`);
    /** @type {Record<string, unknown>} */
    const config = {
      name,
      main: base.main,
      compatibility_date: base.compatibility_date,
      compatibility_flags: base.compatibility_flags,
      // Requests reach the Workers only through the zone's routes, where Cloudflare's edge sets
      // CF-Connecting-IP (a client's own is overwritten): no *.workers.dev address (docs/security.md).
      workers_dev: false,
      // A production build: dev-only routes and headers (workers/shared/platform/build.d.ts) are cut from the
      // bundle. Minified, since esbuild drops a dead branch's statements only when minifying; the
      // source maps go with it, so stack traces in the dashboard's logs still name the source.
      define: { __KEYWAY_DEV__: "false" },
      minify: true,
      upload_source_maps: true,
      observability: { enabled: true },
      vars: productionVars(o, base.vars),
      durable_objects: { bindings: base.durable_objects.bindings },
      d1_databases: [
        { binding: d1.binding, database_name: o.database, database_id: databaseId, migrations_dir: schemaDir },
      ],
    };
    if (path === STORES_CONFIG) config.migrations = base.migrations;
    // op-auth's per-IP quotas and op-mgmt's bindings to the other Workers (deployed before it).
    if (base.ratelimits?.length)
      config.ratelimits = base.ratelimits.map((/** @type {any} */ r) => checkedRateLimit(path, r));
    if (base.services?.length) config.services = base.services;
    const routes = /** @type {Record<string, string[]>} */ (ROUTES)[name];
    // A tenant's custom host (TENANT_HOSTS, docs/tenants.md) gets the issuer's routes but the admin API's.
    const hosts = name === "keyway-op-mgmt" ? [host] : [host, ...tenantHosts(o)];
    if (routes) config.routes = hosts.flatMap((h) => routes.map((p) => ({ pattern: `${h}${p}`, zone_name: o.zone })));
    if (base.triggers?.crons?.length) config.triggers = { crons: base.triggers.crons };
    if (sendEmail) config.send_email = sendEmail;
    return { name, file: join(o.outDir, `${name}.wrangler.json`), config };
  });
}

/**
 * The custom hosts of `--tenant-hosts` (JSON `{host: tenant}`), each in `--zone`: a host in another
 * zone needs that zone (or Cloudflare for SaaS custom hostnames), which this script does not set up.
 * @param {DeployOptions} o @returns {string[]}
 */
export function tenantHosts(o) {
  if (!o.tenantHosts) return [];
  const hosts = Object.keys(/** @type {Record<string, string>} */ (JSON.parse(o.tenantHosts)));
  for (const h of hosts)
    if (h !== o.zone && !h.endsWith(`.${o.zone}`))
      throw new Error(`--tenant-hosts: ${h} is not in --zone ${o.zone}; route it to Keyway in its own zone by hand`);
  return hosts;
}

/**
 * The Rate Limiting bindings' limit is a scale, not the quota: op-auth weighs each request by
 * POLICY's per-minute quota against it (RATE_LIMIT_SCALE and RATE_LIMIT_PERIOD_SECONDS in
 * workers/shared/request/ip-quota.ts). A config that changes them would change every quota silently.
 * @param {string} path @param {{ name: string, simple?: { limit: number, period?: number } }} r
 */
function checkedRateLimit(path, r) {
  if (r.simple?.limit !== 1_000_000_000 || r.simple.period !== 60)
    throw new Error(
      `${path}: ratelimit ${r.name} must keep simple = { limit = 1000000000, period = 60 } (see ip-quota.ts)`,
    );
  return r;
}

/** @param {string} name @param {Record<string, string>} secrets */
function secretsFor(name, secrets) {
  if (name !== "keyway-stores") return secrets;
  return Object.fromEntries(Object.entries(secrets).filter(([k]) => STORE_SECRETS.includes(k)));
}

/** The D1 database's id, creating the database on first deployment. @param {string} name */
async function ensureDatabase(name) {
  /** @returns {Promise<string | undefined>} */
  const find = async () => {
    const list = /** @type {{ name: string, uuid: string }[]} */ (JSON.parse(await wrangler(["d1", "list", "--json"])));
    return list.find((d) => d.name === name)?.uuid;
  };
  const existing = await find();
  if (existing) return existing;
  console.log(`• creating D1 database ${name}`);
  await wrangler(["d1", "create", name]);
  const created = await find();
  if (!created) throw new Error(`D1 database ${name} was created but is not listed`);
  return created;
}

/** Polls discovery and JWKS on the issuer until they answer (routes can take a minute). @param {string} issuer */
export async function smokeCheck(issuer, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${issuer}/.well-known/openid-configuration`, {
        headers: { Accept: "application/json" },
      });
      const doc = /** @type {Record<string, unknown>} */ (await res.json());
      if (res.ok && doc.issuer === issuer && typeof doc.jwks_uri === "string") {
        const jwks = await fetch(doc.jwks_uri);
        const keys = /** @type {{ keys?: unknown[] }} */ (await jwks.json()).keys;
        if (jwks.ok && Array.isArray(keys) && keys.length >= 2) return doc;
        last = `JWKS answered ${jwks.status}`;
      } else last = `discovery answered ${res.status} with issuer ${JSON.stringify(doc.issuer)}`;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await new Promise((r) => setTimeout(r, 3000));
  }
  throw new Error(`smoke check failed: ${last}`);
}

/** @param {DeployOptions} o */
export async function deploy(o) {
  const secrets = readSecrets(o.secretsFile);
  const devVars = readConfig({ config: join(ROOT, OP_CONFIGS[0] ?? "") }).vars;
  await checkProductionConfig(productionVars(o, devVars), secrets);
  console.log("• production configuration checked (the same schema the Workers parse at start-up)");
  if (!o.regions)
    console.warn(
      "! no --regions: every login is placed in the one `global` region. If the running deployment has other " +
        "regions, their live ids (sessions, refresh tokens) will be refused after this deploy: pass the same " +
        "--regions as before (docs/deploy.md).",
    );

  if (!o.dryRun) await wrangler(["whoami"]);
  const databaseId = o.databaseId ?? (o.dryRun ? PLACEHOLDER_DB_ID : await ensureDatabase(o.database));
  const configs = productionConfigs(o, databaseId);
  mkdirSync(o.outDir, { recursive: true });
  for (const c of configs) writeFileSync(c.file, `${JSON.stringify(c.config, null, 2)}\n`);
  console.log(`• wrote ${configs.map((c) => relative(ROOT, c.file)).join(", ")}`);

  const stores = configs[0];
  if (!stores) throw new Error("no store Worker config");
  if (o.dryRun) {
    await Promise.all(
      configs.map((c) =>
        wrangler(["deploy", "--dry-run", "-c", c.file, "--outdir", join(o.outDir, "dist", c.name)]).then(() =>
          console.log(`  ✓ wrangler deploy --dry-run ${c.name}`),
        ),
      ),
    );
    return;
  }

  console.log(`• applying D1 migrations to ${o.database}`);
  await wrangler(["d1", "migrations", "apply", o.database, "--remote", "-c", stores.file]);
  // The store Worker first: the others bind its Durable Object classes by script_name.
  for (const c of configs) {
    const file = join(o.outDir, `${c.name}.secrets.json`);
    writeFileSync(file, JSON.stringify(secretsFor(c.name, secrets)), { mode: 0o600 });
    try {
      console.log(`• deploying ${c.name}`);
      await wrangler(["deploy", "-c", c.file, "--secrets-file", file]);
    } finally {
      rmSync(file, { force: true });
    }
  }
  if (o.smoke) {
    console.log(`• smoke check: ${o.issuer}/.well-known/openid-configuration`);
    await smokeCheck(o.issuer);
  }
  console.log(
    `\n  Keyway is running at ${o.issuer}. Admin API: ${o.issuer}/admin/v1 (Bearer ADMIN_TOKEN from ${relative(ROOT, o.secretsFile)})\n`,
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  try {
    await deploy(parseOptions(process.argv.slice(2)));
  } catch (err) {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  }
}
