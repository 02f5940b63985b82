import { generateKeyPairSync, randomBytes } from "node:crypto";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

/** Test-only secrets, generated per run: nothing public is ever a fallback for a required secret. */
function testVars(): Record<string, string> {
  const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ format: "jwk" });
  const ec = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "jwk" });
  return {
    ENVIRONMENT: "test",
    ISSUER: "http://127.0.0.1:8787",
    ADMIN_TOKEN: randomBytes(32).toString("base64url"),
    OTP_HMAC_SECRET: randomBytes(32).toString("base64url"),
    KEY_ENCRYPTION_SECRET: randomBytes(32).toString("base64url"),
    SIGNING_KEY_RS256: JSON.stringify(rsa),
    SIGNING_KEY_ES256: JSON.stringify(ec),
    MAIL_TRANSPORT: "dev",
    SHARDS: JSON.stringify({ session: [3], challenge: [3], code: [3], revocation: [3], refresh: [3] }),
    POLICY: JSON.stringify({ client_cache_seconds: 0 }),
  };
}

export default defineConfig(async () => {
  const migrations = await readD1Migrations("./schema");
  return {
    test: {
      projects: [
        {
          plugins: [
            cloudflareTest({
              wrangler: { configPath: "./wrangler.toml" },
              miniflare: { bindings: { ...testVars(), TEST_MIGRATIONS: migrations } },
            }),
          ],
          test: {
            name: "workers",
            include: ["test/**/*.test.ts"],
            exclude: ["test/e2e/**"],
            setupFiles: ["./test/support/setup.ts"],
          },
        },
        {
          test: {
            name: "e2e",
            include: ["test/e2e/**/*.test.ts"],
            environment: "node",
            testTimeout: 60_000,
            hookTimeout: 120_000,
          },
        },
      ],
    },
  };
});
