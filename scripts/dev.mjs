// `npm run dev`: setup, then one `wrangler dev` session running all five Workers on workerd with
// local Durable Objects and D1, served through the dev gateway on the issuer origin.
import { spawn } from "node:child_process";
import { ALL_CONFIGS, DEV_PERSIST_DIR, parsePort, ROOT, wranglerEnv } from "./lib/local.mjs";
import { WRANGLER_JS } from "./lib/run.mjs";
import { setup } from "./setup.mjs";

const port = parsePort(process.env.PORT);
const { issuer } = await setup({ port });

// The first config is the one served. `--var` reaches only that first Worker (the gateway): the
// others get ISSUER from the .dev.vars copies that setup wrote. `--persist-to` is shared by all.
const args = [
  WRANGLER_JS,
  "dev",
  ...ALL_CONFIGS.flatMap((c) => ["-c", c]),
  "--ip",
  "127.0.0.1",
  "--port",
  String(port),
  "--persist-to",
  DEV_PERSIST_DIR,
  "--var",
  `ISSUER:${issuer}`,
  ...process.argv.slice(2),
];
const child = spawn(process.execPath, args, { cwd: ROOT, env: wranglerEnv(), stdio: "inherit" });

for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM", "SIGHUP"]))
  process.on(signal, () => {
    child.kill(signal);
  });
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));

// Announce the URLs once the issuer answers (offline, wrangler first logs a failed fetch of the
// Request.cf data; that is harmless).
const deadline = Date.now() + 120_000;
while (Date.now() < deadline && child.exitCode === null) {
  try {
    const res = await fetch(`${issuer}/.well-known/openid-configuration`);
    if (res.ok) {
      console.log(`
  Keyway is running at ${issuer}
    demo relying party   ${issuer}/demo
    dev mailbox          ${issuer}/__dev/mailbox/{email}
    discovery            ${issuer}/.well-known/openid-configuration
    admin API            ${issuer}/admin/v1  (Bearer ADMIN_TOKEN from .dev.vars)
`);
      break;
    }
  } catch {
    // not listening yet
  }
  await new Promise((r) => setTimeout(r, 500));
}
