// `npm run secrets:generate`: fresh production secrets for `npm run deploy`, in a file that never
// leaves this machine (.keyway/ is gitignored): ADMIN_TOKEN, OTP_HMAC_SECRET, KEY_ENCRYPTION_SECRET,
// MAIL_OUTBOX_SECRET (every `secret(...)` of workers/shared/config/) as 32 random bytes each, and
// the bootstrap signing keys SIGNING_KEY_RS256 (RSA-2048) and SIGNING_KEY_ES256 (P-256) as private JWKs.
//   node scripts/secrets.mjs [--out .keyway/secrets.production.json] [--force]
// The mail provider's credential is yours to add to the file: MAIL_API_KEY (http) or SMTP_PASSWORD (smtp).
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { generateSecrets, ROOT } from "./lib/local.mjs";

export const DEFAULT_SECRETS_FILE = join(ROOT, ".keyway", "secrets.production.json");

/**
 * Writes fresh secrets to `out` (0600). Refuses to replace an existing file unless `force`: a new
 * OTP_HMAC_SECRET voids pending codes, and a new KEY_ENCRYPTION_SECRET makes rotated keys unreadable.
 * @param {{ out?: string, force?: boolean }} [opts]
 * @returns {string} the file written
 */
export function writeProductionSecrets({ out = DEFAULT_SECRETS_FILE, force = false } = {}) {
  if (existsSync(out) && !force)
    throw new Error(`${relative(ROOT, out)} exists; pass --force to replace it (see docs/deploy.md before you do)`);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(generateSecrets(), null, 2)}\n`, { mode: 0o600 });
  return out;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { values } = parseArgs({
    options: { out: { type: "string" }, force: { type: "boolean", default: false } },
  });
  try {
    const file = writeProductionSecrets({ out: values.out ?? DEFAULT_SECRETS_FILE, force: values.force ?? false });
    console.log(`• wrote ${relative(process.cwd(), file)} (mode 0600). Keep a copy somewhere safe; never commit it.`);
    console.log("  Add MAIL_API_KEY (MAIL_TRANSPORT=http) or SMTP_PASSWORD (smtp with a user) to it before deploying.");
  } catch (err) {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  }
}
