import { spawn } from "node:child_process";
import { join } from "node:path";
import { ROOT, wranglerEnv } from "./local.mjs";

export const WRANGLER_JS = join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");

/**
 * Runs wrangler with this Node (not whatever `node` is first on PATH) and captures its output,
 * which is printed only if the command fails.
 * @param {string[]} args
 * @returns {Promise<string>}
 */
export function wrangler(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRANGLER_JS, ...args], {
      cwd: ROOT,
      env: wranglerEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d) => {
      output += d;
    });
    child.stderr.on("data", (d) => {
      output += d;
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code === 0) resolve(output);
      else reject(new Error(`wrangler ${args.join(" ")} exited with ${code}:\n${output}`));
    });
  });
}
