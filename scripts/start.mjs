// `npm start`: the production-like local runtime. Same origin, secrets and demo client as
// `npm run dev`, but the Workers run as built bundles in one workerd (scripts/stack.mjs), behind the
// front door (the dev gateway in a workerd of its own, which refuses new logins past the bound), without
// wrangler dev's proxy or file watching. Data persists in .keyway/state. `ISSUER=https://host:port`
// names the issuer a TLS front serves this port under (the conformance suite needs https).
import { parsePort, START_PERSIST_DIR } from "./lib/local.mjs";
import { ensureSecrets } from "./setup.mjs";
import { startStack } from "./stack.mjs";

const port = parsePort(process.env.PORT);
const vars = ensureSecrets();
const issuer = process.env.ISSUER || undefined;
console.log("• bundling the Workers where a source changed (wrangler deploy --dry-run) ...");
const started = Date.now();
/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
try {
  stack = await startStack({ port, persistTo: START_PERSIST_DIR, vars, ...(issuer ? { issuer } : {}) });
} catch (err) {
  console.error(`✗ Keyway did not start: ${err instanceof Error ? err.message : err}`);
  process.exit(1);
}
const { url } = stack;
console.log(`
  Keyway is running at ${url}  (started in ${((Date.now() - started) / 1000).toFixed(1)} s)
    demo relying party   ${url}/demo
    dev mailbox          ${url}/__dev/mailbox/{email}
    discovery            ${url}/.well-known/openid-configuration
    admin API            ${url}/admin/v1  (Bearer ADMIN_TOKEN from .dev.vars)
  State: ${START_PERSIST_DIR}. Ctrl-C stops.
`);

let stopping = false;
for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM", "SIGHUP"]))
  process.on(signal, async () => {
    if (stopping) return;
    stopping = true;
    await stack.dispose();
    process.exit(0);
  });
