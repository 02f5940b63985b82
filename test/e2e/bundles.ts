import { join } from "node:path";
import { ROOT } from "../../scripts/lib/local.mjs";

/** Where the e2e stacks' bundles are: made once by test/e2e/global-setup.ts (gitignored, under .keyway/). */
export const E2E_BUNDLES = join(ROOT, ".keyway", "e2e-dist");
