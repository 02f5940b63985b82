import type { D1Migration } from "cloudflare:test";
import type { Env as KeywayEnv } from "../../workers/shared/env";

declare global {
  namespace Cloudflare {
    interface Env extends KeywayEnv {
      TEST_MIGRATIONS: D1Migration[];
      ADMIN_TOKEN: string;
      ISSUER: string;
      SHARDS: string;
    }
  }
}
