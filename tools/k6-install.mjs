#!/usr/bin/env node
// Installs the pinned k6 into <repo>/.keyway/bin/k6 by building it from the Go module proxy.
// Idempotent: does nothing when the binary already reports the pinned version.
//   npm run k6:install            (K6_FORCE=1 rebuilds anyway)
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const K6_MODULE = "go.k6.io/k6";
export const K6_VERSION = "v1.8.1";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const binDir = join(repo, ".keyway", "bin");
export const k6Path = join(binDir, "k6");

function installedVersion() {
  if (!existsSync(k6Path)) return null;
  const r = spawnSync(k6Path, ["version"], { encoding: "utf8" });
  if (r.status !== 0) return null;
  // "k6 v1.8.1 (commit/..., go1.x, linux/amd64)"
  const m = /k6 (v\d+\.\d+\.\d+\S*)/.exec(r.stdout);
  return m ? m[1] : null;
}

function findGo() {
  const candidates = [process.env.GO, "go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go"].filter(Boolean);
  for (const c of candidates) {
    const r = spawnSync(c, ["version"], { encoding: "utf8" });
    if (r.status === 0) return c;
  }
  return null;
}

const have = installedVersion();
if (have === K6_VERSION && !process.env.K6_FORCE) {
  console.log(`k6 ${have} already installed at ${k6Path}`);
  process.exit(0);
}

const go = findGo();
if (!go) {
  console.error("k6-install: no Go toolchain found (set GO=/path/to/go, or install Go >= 1.24)");
  process.exit(1);
}
mkdirSync(binDir, { recursive: true });
console.log(
  `${have ? `replacing k6 ${have}` : "installing k6"}: ${go} install ${K6_MODULE}@${K6_VERSION} (takes a few minutes)`,
);
const started = Date.now();
const r = spawnSync(go, ["install", `${K6_MODULE}@${K6_VERSION}`], {
  stdio: "inherit",
  env: { ...process.env, GOBIN: binDir, CGO_ENABLED: process.env.CGO_ENABLED ?? "0" },
});
if (r.status !== 0) {
  console.error(`k6-install: go install failed (exit ${r.status ?? r.signal})`);
  process.exit(1);
}
const now = installedVersion();
if (now !== K6_VERSION) {
  console.error(`k6-install: built binary reports ${now ?? "nothing"}, expected ${K6_VERSION}`);
  process.exit(1);
}
console.log(`k6 ${now} installed at ${k6Path} in ${Math.round((Date.now() - started) / 1000)} s`);
