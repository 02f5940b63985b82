// `npm run check` (so `npm test` and CI): the layout's import rules hold (docs/architecture.md#layout).
//  1. Every source file under workers/ and durable-objects/ belongs to a folder: the nearest folder above
//     it whose README.md has a `May import:` line. A file imports files of its own folder (subfolders
//     without a README of their own included) and of the folders that line names, nothing else. An
//     entry is a folder (`workers/shared/config`), every folder under one (`workers/shared/**`), or one
//     file, optionally `(types only)`.
//  2. Whatever the READMEs say: no Worker imports another Worker, no store imports a Worker, and
//     durable-objects/namespaces.ts (the stores' classes as types) is imported for its types only, so
//     no store code reaches a Worker's bundle.
//  3. No circle of imports, type-only imports included (a file that names a type depends on its file).
//  4. Every wrangler config's [[durable_objects.bindings]] agrees with STORE_BINDINGS in the contract.
// `node tools/check-imports.mjs [root]` checks another tree (tools/check-imports.test.mjs does).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, posix, resolve } from "node:path";

const ROOT = resolve(process.argv[2] ?? join(dirname(new URL(import.meta.url).pathname), ".."));
const CONTRACT = "durable-objects/contract/verbs.ts";
const NAMESPACES = "durable-objects/namespaces.ts";
/** The folders whose files are Workers' own (each a deployable Worker), and the folder of the stores. */
const WORKER = /^workers\/(?!shared\/)([^/]+)\//;
const STORES = "durable-objects/";

/** @param {string} dir @returns {string[]} */
function tsFiles(dir) {
  if (!existsSync(join(ROOT, dir))) return [];
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return tsFiles(path);
    return /\.tsx?$/.test(e.name) && !e.name.endsWith(".d.ts") ? [path] : [];
  });
}

const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s+(type\s+)?(?:(\{[^}]*\}|[\w*$]+(?:\s*,\s*\{[^}]*\})?|\*\s+as\s+\w+)\s+from\s+)?["']([^"']+)["']/g;

/**
 * Relative imports of a file, resolved to repo paths, each with whether it names types only.
 * @param {string} file @returns {{ dep: string, typeOnly: boolean }[]}
 */
function importsOf(file) {
  const text = readFileSync(join(ROOT, file), "utf8");
  return [...text.matchAll(IMPORT)]
    .filter((m) => /** @type {string} */ (m[3]).startsWith("."))
    .map((m) => {
      const spec = /** @type {string} */ (m[3]);
      const names = m[2]?.startsWith("{")
        ? m[2]
            .slice(1, -1)
            .split(",")
            .map((n) => n.trim())
            .filter(Boolean)
        : null;
      const typeOnly =
        Boolean(m[1]) || (names !== null && names.length > 0 && names.every((n) => n.startsWith("type ")));
      const base = posix.normalize(posix.join(posix.dirname(file), spec)).replace(/\.js$/, "");
      const found = [`${base}.ts`, `${base}.tsx`, `${base}/index.ts`, base].find((p) => existsSync(join(ROOT, p)));
      if (!found) throw new Error(`${file}: cannot resolve ${spec}`);
      return { dep: found, typeOnly };
    });
}

/** The rules of each folder with a README.md `May import:` line, by folder. */
const rules = new Map();
for (const readme of ["workers", "durable-objects"].flatMap(readmes)) {
  const line = readFileSync(join(ROOT, readme), "utf8").match(/^\*{0,2}May import:?\*{0,2}:?\s*(.*)$/im);
  if (!line) continue;
  const entries = [...(line[1] ?? "").matchAll(/`([^`]+)`(\s*\(types only\))?/g)].map((m) => ({
    target: /** @type {string} */ (m[1]).replace(/\/$/, ""),
    typesOnly: Boolean(m[2]),
  }));
  rules.set(posix.dirname(readme), entries);
}

/** @param {string} dir @returns {string[]} */
function readmes(dir) {
  if (!existsSync(join(ROOT, dir))) return [];
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? readmes(`${dir}/${e.name}`) : e.name === "README.md" ? [`${dir}/${e.name}`] : [],
  );
}

/** The folder a file belongs to: the nearest one above it with rules. @param {string} file */
function folderOf(file) {
  for (let dir = posix.dirname(file); dir !== "."; dir = posix.dirname(dir)) if (rules.has(dir)) return dir;
  return null;
}

/** Whether `entry` lets a file import `dep` (whose folder is `depFolder`). */
function allows(
  /** @type {{ target: string }} */ entry,
  /** @type {string} */ dep,
  /** @type {string|null} */ depFolder,
) {
  if (entry.target.endsWith(".ts")) return dep === entry.target;
  if (entry.target.endsWith("/**")) {
    const under = entry.target.slice(0, -3);
    return depFolder !== null && (depFolder === under || depFolder.startsWith(`${under}/`));
  }
  return depFolder === entry.target;
}

const files = [...tsFiles("workers"), ...tsFiles("durable-objects")];
const graph = new Map(files.map((f) => [f, importsOf(f)]));
const problems = [];

for (const [file, deps] of graph) {
  const folder = folderOf(file);
  if (!folder) {
    problems.push(`${file} is in no folder with rules: its folder needs a README.md with a "May import:" line`);
    continue;
  }
  const entries = rules.get(folder);
  for (const { dep, typeOnly } of deps) {
    const worker = WORKER.exec(file)?.[1];
    const depWorker = WORKER.exec(dep)?.[1];
    if (depWorker && worker !== depWorker) {
      problems.push(
        file.startsWith(STORES)
          ? `${file} imports ${dep}: a store imports no Worker`
          : worker
            ? `${file} imports ${dep}: a Worker imports no other Worker (what both need belongs in workers/shared)`
            : `${file} imports ${dep}: shared code imports no Worker`,
      );
      continue;
    }
    if (dep === NAMESPACES && !typeOnly && !file.startsWith(STORES)) {
      problems.push(`${file} imports ${NAMESPACES} for its values: only its types, so no store code reaches a Worker`);
      continue;
    }
    const depFolder = folderOf(dep);
    if (depFolder === folder) continue;
    const entry = entries.find((e) => allows(e, dep, depFolder));
    if (!entry) problems.push(`${file} imports ${dep}: ${folder} may import ${list(entries)} (its README.md)`);
    else if (entry.typesOnly && !typeOnly) problems.push(`${file} imports ${dep} for its values: its types only`);
  }
}

/** @param {{ target: string, typesOnly: boolean }[]} entries */
function list(entries) {
  return entries.length ? entries.map((e) => e.target + (e.typesOnly ? " (types)" : "")).join(", ") : "nothing";
}

// Circles (Tarjan's strongly connected components): any component of more than one file is one.
let index = 0;
const stack = [];
const on = new Set();
const idx = new Map();
const low = new Map();
/** @param {string} v */
function connect(v) {
  idx.set(v, index);
  low.set(v, index++);
  stack.push(v);
  on.add(v);
  for (const { dep: w } of graph.get(v) ?? []) {
    if (!graph.has(w)) continue;
    if (!idx.has(w)) {
      connect(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
  }
  if (low.get(v) !== idx.get(v)) return;
  const circle = [];
  let w;
  do {
    w = stack.pop();
    on.delete(w);
    circle.push(w);
  } while (w !== v);
  if (circle.length > 1) problems.push(`a circle of imports: ${circle.sort().join(", ")}`);
}
for (const f of files) if (!idx.has(f)) connect(f);

// Bindings: parse STORE_BINDINGS from the contract's source, and each config's binding blocks.
if (existsSync(join(ROOT, CONTRACT))) {
  const contract = readFileSync(join(ROOT, CONTRACT), "utf8");
  const table = new Map(
    [...contract.matchAll(/(\w+): \{ binding: "(\w+)", class: "(\w+)" \}/g)].map((m) => [m[2], m[3]]),
  );
  // The five stores, MailOutbox, AuditBuffer, WebhookOutbox and EntityStore.
  if (table.size !== 9) problems.push(`${CONTRACT}: STORE_BINDINGS should list 9 objects, found ${table.size}`);
  const configs = ["wrangler.toml", ...readdirSync(join(ROOT, "workers")).map((w) => `workers/${w}/wrangler.toml`)];
  for (const config of configs.filter((c) => existsSync(join(ROOT, c)))) {
    const text = readFileSync(join(ROOT, config), "utf8");
    const blocks = [...text.matchAll(/\[\[durable_objects\.bindings\]\]\s*\nname = "(\w+)"\s*\nclass_name = "(\w+)"/g)];
    if (!blocks.length) continue;
    const bound = new Map(blocks.map((m) => [m[1], m[2]]));
    for (const [binding, cls] of table)
      if (bound.get(binding) !== cls)
        problems.push(`${config}: binding ${binding} should be class ${cls}, is ${bound.get(binding) ?? "missing"}`);
    for (const binding of bound.keys())
      if (!table.has(binding)) problems.push(`${config}: binding ${binding} is not in STORE_BINDINGS`);
  }
}

if (problems.length) {
  console.error(`check-imports: ${problems.length} problem(s)\n${problems.map((p) => `  ${p}`).join("\n")}`);
  process.exit(1);
}
console.log(`check-imports: ${files.length} files in ${rules.size} folders keep their rules, no circles`);
