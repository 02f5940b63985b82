// `npm run check` (so `npm test` and CI): the store boundary holds.
//  1. A Worker file (workers/**) imports from durable-objects/ only contract.ts, and namespaces.ts
//     (the stores' classes as stub types) type-only; contract.ts itself imports nothing, so types flow
//     one way: contract.ts -> the stores -> namespaces.ts -> the Workers.
//  2. A Durable Object file (durable-objects/**), with everything it imports transitively, reaches in
//     workers/ only the leaf modules listed below: none of them handles a request or names a Worker.
//  3. Every wrangler config's [[durable_objects.bindings]] agrees with STORE_BINDINGS in contract.ts.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), "..");
const CONTRACT = "durable-objects/contract/verbs.ts";
const NAMESPACES = "durable-objects/namespaces.ts";
const LEAVES = new Set([
  "workers/shared/events/audit-event.ts",
  // Branding and the catalogues: the MailOutbox renders a retried mail in its first attempt's language.
  "workers/shared/branding/branding.ts",
  "workers/shared/branding/i18n/index.ts",
  "workers/shared/branding/i18n/locales.ts",
  "workers/shared/branding/i18n/en.ts",
  "workers/shared/branding/i18n/fr.ts",
  "workers/shared/branding/i18n/ar.ts",
  "workers/shared/config/config.ts",
  // Zod alone: the one check of a name people see (issue 38), which config.ts and branding.ts use.
  "workers/shared/branding/display-name.ts",
  "workers/shared/platform/env.ts",
  "workers/shared/config/regions.ts",
  "workers/shared/routing/router.ts",
  // Import-free arithmetic (shard counts); config.ts takes its MAX_SHARDS.
  "workers/shared/config/shard-plan.ts",
  "workers/shared/routing/stores.ts",
  "workers/shared/platform/http.ts",
  "workers/shared/platform/errors.ts",
  "workers/shared/events/mail/http.ts",
  "workers/shared/events/mail/message.ts",
  "workers/shared/events/mail/mime.ts",
  "workers/shared/events/mail-outbox.ts",
  "workers/shared/events/mail/send-email.ts",
  "workers/shared/events/mail/smtp.ts",
  "workers/shared/events/mail/transport.ts",
  "workers/shared/events/webhooks/catalogue.ts",
  "workers/shared/events/webhooks/endpoints.ts",
  "workers/shared/events/webhooks/handoff.ts",
  "workers/shared/events/webhooks/signature.ts",
]);

/** @param {string} dir @returns {string[]} */
function tsFiles(dir) {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return tsFiles(path);
    return e.name.endsWith(".ts") && !e.name.endsWith(".d.ts") ? [path] : [];
  });
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[\s\S]*?\s+from\s+)?["']([^"']+)["']/g;

/** Relative imports of a file, resolved to repo paths. @param {string} file */
function importsOf(file) {
  const text = readFileSync(join(ROOT, file), "utf8");
  return [...text.matchAll(IMPORT)]
    .map((m) => /** @type {string} */ (m[1]))
    .filter((spec) => spec.startsWith("."))
    .map((spec) => {
      const base = relative(ROOT, resolve(ROOT, dirname(file), spec)).replace(/\.js$/, "");
      const found = [`${base}.ts`, `${base}/index.ts`, base].find((p) => existsSync(join(ROOT, p)));
      if (!found) throw new Error(`${file}: cannot resolve ${spec}`);
      return found;
    });
}

const problems = [];
for (const file of tsFiles("workers"))
  for (const dep of importsOf(file))
    if (dep.startsWith("durable-objects/") && !dep.startsWith("durable-objects/contract/") && dep !== NAMESPACES)
      problems.push(`${file} imports ${dep}: a Worker imports only ${CONTRACT} and ${NAMESPACES} from the stores`);
for (const file of tsFiles("workers")) {
  const text = readFileSync(join(ROOT, file), "utf8");
  if (/import\s+(?!type\b)[^;]*from\s+["'][^"']*durable-objects\/namespaces["']/.test(text))
    problems.push(`${file} imports ${NAMESPACES} for its values: only its types, so no store code reaches a Worker`);
}
if (importsOf(CONTRACT).some((d) => !d.startsWith("durable-objects/contract/")))
  problems.push(`${CONTRACT} imports ${importsOf(CONTRACT).join(", ")}: it imports nothing`);

for (const start of tsFiles("durable-objects")) {
  const seen = new Set([start]);
  const queue = [start];
  while (queue.length) {
    const file = /** @type {string} */ (queue.shift());
    for (const dep of importsOf(file)) {
      if (seen.has(dep)) continue;
      seen.add(dep);
      if (dep.startsWith("workers/") && !LEAVES.has(dep)) {
        problems.push(`${start} reaches ${dep} (through ${file}): a store imports only leaf modules of workers/`);
        continue;
      }
      queue.push(dep);
    }
  }
}

// Bindings: parse STORE_BINDINGS from the contract's source, and each config's binding blocks.
const contract = readFileSync(join(ROOT, CONTRACT), "utf8");
const table = new Map(
  [...contract.matchAll(/(\w+): \{ binding: "(\w+)", class: "(\w+)" \}/g)].map((m) => [m[2], m[3]]),
);
// The five stores, MailOutbox, AuditBuffer and WebhookOutbox.
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

if (problems.length) {
  console.error(`check-imports: ${problems.length} problem(s)\n${problems.map((p) => `  ${p}`).join("\n")}`);
  process.exit(1);
}
console.log("check-imports: the store boundary holds");
