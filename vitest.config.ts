import { defineConfig } from "vitest/config";
import { generateSecrets } from "./scripts/lib/local.mjs";
import { createTestTls, TEST_TLS_DIR_VAR } from "./test/support/global-setup-tls.js";
import type { MailPeers } from "./test/support/global-setup-types.js";

/**
 * Test-only variables: secrets generated per run by the same generator `npm run dev` uses (nothing
 * public is ever a fallback for a required secret), and the test suite's own issuer, shards and policy.
 */
function testVars(): Record<string, string> {
  return {
    ...generateSecrets(),
    ENVIRONMENT: "test",
    ISSUER: "http://127.0.0.1:8787",
    MAIL_TRANSPORT: "dev",
    SHARDS: JSON.stringify({ session: [3], challenge: [3], code: [3], revocation: [3], refresh: [3] }),
    // Logins under way are not bounded here: the suite begins many logins in one isolate and leaves
    // most unfinished; test/security/load-shedding.test.ts sets the bound it tests.
    POLICY: JSON.stringify({ client_cache_seconds: 0, max_logins_under_way: 100_000 }),
  };
}

/** The login's budget test: it runs alone (see the "budget" project). */
const BUDGET_TEST = "test/login/login-budget.test.ts";

export default defineConfig(async () => {
  // The SMTP test server's certificate comes from a per-run CA that workerd must trust. Miniflare reads
  // NODE_EXTRA_CA_CERTS once, when it is first imported, so the CA exists before the pool is imported.
  const tls = createTestTls();
  process.env.NODE_EXTRA_CA_CERTS = tls.caFile;
  process.env[TEST_TLS_DIR_VAR] = tls.dir;
  const { cloudflareTest, readD1Migrations } = await import("@cloudflare/vitest-plugin");
  const migrations = await readD1Migrations("./schema");
  /** A project of tests inside workerd with the store Worker's config, real Durable Objects and D1. */
  const workersProject = (name: string, files: { include: string[]; exclude: string[] }, groupOrder = 0) => ({
    plugins: [
      // Mail peers (test/support/global-setup.ts) reach the tests as TEST_MAIL_PEERS, an object
      // binding that config parsing ignores; SEND_EMAIL is Miniflare's local Email Service binding.
      cloudflareTest(async ({ inject }) => ({
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          bindings: {
            ...testVars(),
            TEST_MIGRATIONS: migrations,
            TEST_MAIL_PEERS: inject("mailPeers") as MailPeers as never,
          },
          email: { send_email: [{ name: "SEND_EMAIL" }] },
          // A second, empty database: test/tenants/upgrade.test.ts writes today's state into the
          // schema before tenants, then migrates it (the DB binding gets every migration at setup).
          d1Databases: { DB: "keyway", UPGRADE_DB: "keyway-upgrade" },
          // op-auth's per-IP quotas, as its wrangler.toml declares them (the tests run op-auth
          // against the store Worker's config, which has none).
          ratelimits: {
            IP_GENERATE_LIMIT: { namespace_id: "7101", simple: { limit: 1_000_000_000, period: 60 } },
            IP_VERIFY_LIMIT: { namespace_id: "7102", simple: { limit: 1_000_000_000, period: 60 } },
            IP_DEVICE_AUTHORIZATION_LIMIT: {
              namespace_id: "7103",
              simple: { limit: 1_000_000_000, period: 60 },
            },
            CLIENT_AUTH_FAILURE_LIMIT: {
              namespace_id: "7104",
              simple: { limit: 1_000_000_000, period: 60 },
            },
          },
        },
      })),
    ],
    test: {
      name,
      ...files,
      // A loaded 2-core CI machine runs some tests several times slower than a quiet one: no
      // test relies on vitest's 5 s default (a test that must be fast measures it itself).
      testTimeout: 30_000,
      hookTimeout: 60_000,
      setupFiles: ["./test/support/setup.ts"],
      globalSetup: ["./test/support/global-setup.ts"],
      sequence: { groupOrder },
    },
  });
  return {
    test: {
      // Two files at a time (vitest's default is one less than the cores: one, here). Each file's
      // workerd or stack waits on its own I/O and processes much of the time, so two share two cores
      // well; every timeout above is set for a loaded machine.
      maxWorkers: 2,
      projects: [
        workersProject("workers", { include: ["test/**/*.test.ts"], exclude: ["test/e2e/**", BUDGET_TEST] }),
        // The login's budget reads the suite-wide counters of GET /admin/v1/stats (and drains every
        // shard's alarms): a file running beside it writes into the same shards and counters (claims
        // marks in every revocation shard, say), so it runs alone, after the other projects.
        workersProject("budget", { include: [BUDGET_TEST], exclude: [] }, 1),
        {
          test: {
            name: "e2e",
            include: ["test/e2e/**/*.test.ts"],
            globalSetup: ["./test/e2e/global-setup.ts"],
            environment: "node",
            testTimeout: 60_000,
            hookTimeout: 120_000,
          },
        },
      ],
    },
  };
});
