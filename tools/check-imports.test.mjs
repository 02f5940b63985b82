// `npm run check`: tools/check-imports.mjs on small trees, so a rule that stopped failing shows here.
// Each case writes a tree with the layout's shape (a contract, a store, a shared leaf, two Workers),
// adds one import, and expects the check to pass or to name the import. (Its contract has no
// STORE_BINDINGS, so the bindings check, which reads verbs.ts, is left out.)
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";

const CHECK = join(dirname(new URL(import.meta.url).pathname), "check-imports.mjs");

/** The tree every case starts from: it keeps the rules. */
const BASE = {
  "durable-objects/contract/README.md": "**May import:** nothing.\n",
  "durable-objects/contract/shapes.ts": "export interface Verb { name: string }\n",
  "durable-objects/README.md": "**May import:** `durable-objects/contract`, `workers/shared/leaf`.\n",
  "durable-objects/store.ts": 'import type { Verb } from "./contract/shapes";\nexport const store = (v: Verb) => v;\n',
  "durable-objects/namespaces.ts": 'import type { store } from "./store";\nexport type Store = typeof store;\n',
  "workers/shared/leaf/README.md": "**May import:** `durable-objects/contract`.\n",
  "workers/shared/leaf/format.ts": "export const format = (s: string) => s;\n",
  "workers/shared/env/README.md":
    "**May import:** `durable-objects/contract`, `durable-objects/namespaces.ts` (types only).\n",
  "workers/shared/env/env.ts":
    'import type { Store } from "../../../durable-objects/namespaces";\nexport type Env = Store;\n',
  "workers/op-a/README.md": "**May import:** `durable-objects/contract`, `workers/shared/**`.\n",
  "workers/op-a/src/index.ts": 'import { format } from "../../shared/leaf/format";\nexport const a = format("a");\n',
  "workers/op-b/README.md": "**May import:** `durable-objects/contract`, `workers/shared/**`.\n",
  "workers/op-b/src/index.ts": "export const b = 1;\n",
};

/** Runs the check on BASE with `extra` files added or replaced. */
function check(/** @type {Record<string, string>} */ extra) {
  const root = mkdtempSync(join(tmpdir(), "check-imports-"));
  try {
    for (const [path, text] of Object.entries({ ...BASE, ...extra })) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
    const run = spawnSync(process.execPath, [CHECK, root], { encoding: "utf8" });
    return { ok: run.status === 0, out: run.stdout + run.stderr };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

test("the base tree keeps the rules", () => {
  const { ok, out } = check({});
  assert.ok(ok, out);
});

test("a store importing a Worker's file fails", () => {
  const { ok, out } = check({
    "durable-objects/store.ts": 'import { a } from "../workers/op-a/src/index";\nexport const store = a;\n',
  });
  assert.ok(!ok);
  assert.match(out, /durable-objects\/store\.ts imports workers\/op-a\/src\/index\.ts: a store imports no Worker/);
});

test("a store importing a shared folder its README does not list fails", () => {
  const { ok, out } = check({
    "durable-objects/store.ts": 'import type { Env } from "../workers/shared/env/env";\nexport type S = Env;\n',
  });
  assert.ok(!ok);
  assert.match(out, /durable-objects\/store\.ts imports workers\/shared\/env\/env\.ts: durable-objects may import/);
});

test("a Worker importing another Worker fails, whatever its README says", () => {
  const { ok, out } = check({
    "workers/op-a/README.md": "**May import:** `durable-objects/contract`, `workers/**`.\n",
    "workers/op-a/src/index.ts": 'import { b } from "../../op-b/src/index";\nexport const a = b;\n',
  });
  assert.ok(!ok);
  assert.match(
    out,
    /workers\/op-a\/src\/index\.ts imports workers\/op-b\/src\/index\.ts: a Worker imports no other Worker/,
  );
});

test("the contract importing anything outside itself fails", () => {
  const { ok, out } = check({
    "durable-objects/contract/shapes.ts":
      'import { format } from "../../workers/shared/leaf/format";\nexport const v = format;\n',
  });
  assert.ok(!ok);
  assert.match(out, /durable-objects\/contract may import nothing/);
});

test("namespaces.ts imported for its values fails", () => {
  const { ok, out } = check({
    "workers/shared/env/env.ts":
      'import { Store } from "../../../durable-objects/namespaces";\nexport const e = Store;\n',
  });
  assert.ok(!ok);
  assert.match(out, /imports durable-objects\/namespaces\.ts for its values/);
});

test("a circle of imports fails, type-only imports included", () => {
  const { ok, out } = check({
    "workers/shared/leaf/format.ts": 'import type { Other } from "./other";\nexport const format = (s: Other) => s;\n',
    "workers/shared/leaf/other.ts":
      'import type { format } from "./format";\nexport type Other = Parameters<typeof format>[0];\n',
  });
  assert.ok(!ok);
  assert.match(out, /a circle of imports: workers\/shared\/leaf\/format\.ts, workers\/shared\/leaf\/other\.ts/);
});

test("a file in no folder with rules fails", () => {
  const { ok, out } = check({ "workers/shared/loose/thing.ts": "export const thing = 1;\n" });
  assert.ok(!ok);
  assert.match(out, /workers\/shared\/loose\/thing\.ts is in no folder with rules/);
});
