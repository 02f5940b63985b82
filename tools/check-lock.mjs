#!/usr/bin/env node
// The lock file is complete and in sync with package.json, so `npm ci` installs from it on any platform
// and `npm install` on a fresh clone leaves the checkout clean.
//
// 1. In sync: the lock's root entry lists exactly package.json's dependencies and devDependencies, with the
//    same ranges, and every one of them is locked at a version.
// 2. Complete: every optional dependency of every locked package (workerd's, biome's and esbuild's builds for
//    each platform) resolves to a locked entry, the way Node resolves it (nested node_modules first, then up).
//    npm writes only the builds the registry served when the lock was made; a lock made where some were
//    missing installs here but `npm ci` refuses it elsewhere, and `npm install` rewrites it.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8"));
const packages = lock.packages ?? {};
const problems = [];

if (lock.lockfileVersion !== 3) problems.push(`lockfileVersion is ${lock.lockfileVersion}, expected 3`);

const rootEntry = packages[""] ?? {};
for (const field of ["dependencies", "devDependencies", "optionalDependencies"]) {
  const wanted = pkg[field] ?? {};
  const locked = rootEntry[field] ?? {};
  for (const [name, range] of Object.entries(wanted)) {
    if (locked[name] !== range)
      problems.push(`${field}.${name}: package.json has ${range}, the lock ${locked[name] ?? "nothing"}`);
    else if (!packages[`node_modules/${name}`]?.version) problems.push(`${name} is not locked at a version`);
  }
  for (const name of Object.keys(locked)) {
    if (!(name in wanted)) problems.push(`${field}.${name} is in the lock but not in package.json`);
  }
}

/** Node's resolution from the package at `from` (a lock key such as "node_modules/a/node_modules/b"). */
function resolves(from, name) {
  let base = from;
  for (;;) {
    if (packages[`${base ? `${base}/` : ""}node_modules/${name}`]) return true;
    if (!base) return false;
    const up = base.lastIndexOf("/node_modules/");
    base = up < 0 ? "" : base.slice(0, up);
  }
}

for (const [key, entry] of Object.entries(packages)) {
  for (const name of Object.keys(entry.optionalDependencies ?? {})) {
    if (!resolves(key, name)) problems.push(`${key || "(root)"}: optional ${name} is not in the lock`);
  }
  if (key && !entry.link && !entry.version) problems.push(`${key} has no version`);
  // No `resolved` URL is required: a lock written with omit-lockfile-registry-resolved installs from whatever
  // registry the machine is configured with, and the integrity hash still pins the bytes.
  if (key && !entry.link && !entry.integrity && !entry.inBundle) problems.push(`${key} has no integrity hash`);
}

if (problems.length) {
  console.error(`package-lock.json is incomplete or out of sync (${problems.length}):`);
  for (const p of problems.slice(0, 40)) console.error(`  ${p}`);
  console.error("Fix: npm install --package-lock-only on a machine whose registry serves every platform's build.");
  process.exit(1);
}
console.log(
  `package-lock.json: in sync with package.json, ${Object.keys(packages).length - 1} packages, every platform's optional build locked`,
);
