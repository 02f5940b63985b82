import { ensureBundles } from "../../scripts/stack.mjs";
import { E2E_BUNDLES } from "./bundles.js";

/**
 * The e2e project's global setup: the Workers bundled once for every test file (a file that starts a
 * stack on `E2E_BUNDLES` then finds them current and bundles nothing), instead of once per stack.
 */
export default async function bundleOnce(): Promise<void> {
  await ensureBundles(E2E_BUNDLES);
}
