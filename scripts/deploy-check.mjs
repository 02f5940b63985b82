// `npm run check:deploy` (part of `npm test`, so CI runs it): every wrangler config in the repo, and
// the production configs `npm run deploy` generates, pass `wrangler deploy --dry-run` (bundling,
// bindings and config validation, without an account). Production is checked for two transports:
// send_email (adds the binding) and smtp, with secrets made by the real generator. The production
// bundles must hold none of the dev-only routes and headers (issue 38 item 11).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { deploy, parseOptions } from "./deploy.mjs";
import { ALL_CONFIGS, ROOT } from "./lib/local.mjs";
import { wrangler } from "./lib/run.mjs";
import { writeProductionSecrets } from "./secrets.mjs";

/** What only a local build may contain: the dev mailbox, the dev gateway's geography, the store trace. */
const DEV_ONLY = [/\/__dev\//, /x-keyway-dev-/i, /x-keyway-trace/i, /x-keyway-store-trace/i];

/** Every production bundle under `dist` (one folder per Worker) that holds a dev-only string. @param {string} dist */
export function devOnlyLeaks(dist) {
  return readdirSync(dist).flatMap((worker) =>
    readdirSync(join(dist, worker))
      .filter((f) => f.endsWith(".js"))
      .flatMap((f) => {
        const text = readFileSync(join(dist, worker, f), "utf8");
        return DEV_ONLY.filter((re) => re.test(text)).map((re) => `${worker}/${f}: ${re}`);
      }),
  );
}

const started = Date.now();
const tmp = mkdtempSync(join(tmpdir(), "keyway-deploy-check-"));
try {
  await Promise.all(
    ALL_CONFIGS.map(async (config) => {
      const name = basename(dirname(join(ROOT, config))) || "stores";
      await wrangler(["deploy", "--dry-run", "-c", config, "--outdir", join(tmp, "repo", name)]);
      console.log(`  ✓ wrangler deploy --dry-run -c ${config}`);
    }),
  );
  const secretsFile = writeProductionSecrets({ out: join(tmp, "secrets.json") });
  process.env.SMTP_PASSWORD ??= "check-deploy-placeholder";
  const common = ["--issuer", "https://id.example.com", "--zone", "example.com", "--mail-from", "login@example.com"];
  for (const transport of [
    ["--mail-transport", "send_email"],
    ["--mail-transport", "smtp", "--smtp-host", "smtp.example.com", "--smtp-user", "keyway"],
  ]) {
    console.log(`• production configs, ${transport[1]}:`);
    await deploy(
      parseOptions([
        ...common,
        ...transport,
        "--secrets",
        secretsFile,
        "--out",
        join(tmp, `prod-${transport[1]}`),
        "--dry-run",
      ]),
    );
    const leaks = devOnlyLeaks(join(tmp, `prod-${transport[1]}`, "dist"));
    if (leaks.length) throw new Error(`dev-only code in a production bundle:\n  ${leaks.join("\n  ")}`);
    console.log("  ✓ no dev-only route or header in the production bundles");
  }
  console.log(`check:deploy passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (err) {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
