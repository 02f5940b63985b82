import type { D1Migration } from "cloudflare:test";
import type { Env as KeywayEnv } from "../../workers/shared/platform/env";
import type { MailPeers } from "./global-setup-types";

declare global {
  namespace Cloudflare {
    interface Env extends KeywayEnv {
      TEST_MIGRATIONS: D1Migration[];
      /** An empty D1 database for the upgrade test. */
      UPGRADE_DB: D1Database;
      /** The SMTP server and fake mail API started by test/support/global-setup.ts. */
      TEST_MAIL_PEERS: MailPeers;
      ADMIN_TOKEN: string;
      ISSUER: string;
      SHARDS: string;
    }
  }
}
