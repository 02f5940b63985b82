import type { AuthCodeStore } from "../../durable-objects/auth-code-store";
import type { ChallengeStore } from "../../durable-objects/challenge-store";
import type { RefreshTokenRotator } from "../../durable-objects/refresh-token-rotator";
import type { RevocationStore } from "../../durable-objects/revocation-store";
import type { SessionStore } from "../../durable-objects/session-store";

/** Bindings every Keyway Worker has; string variables are parsed by `loadConfig`. */
export interface Env {
  DB: D1Database;
  SESSIONS: DurableObjectNamespace<SessionStore>;
  CHALLENGES: DurableObjectNamespace<ChallengeStore>;
  AUTH_CODES: DurableObjectNamespace<AuthCodeStore>;
  REVOCATIONS: DurableObjectNamespace<RevocationStore>;
  REFRESH_TOKENS: DurableObjectNamespace<RefreshTokenRotator>;
}
