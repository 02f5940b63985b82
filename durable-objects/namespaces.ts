/**
 * The stores' classes as types, for `DurableObjectNamespace<SessionStore>` and RPC stubs: what a
 * Worker's Env holds of the stores. Type-only, so no store code reaches a Worker's bundle; it is the
 * one place that imports the classes for the other side, which keeps contract.ts free of imports.
 */

import type { AuditBuffer } from "./audit-buffer";
import type { AuthCodeStore } from "./auth-code-store";
import type { ChallengeStore } from "./challenge-store";
import type { STORE_BINDINGS } from "./contract/verbs";
import type { EntityStore } from "./entity-store";
import type { MailOutbox } from "./mail-outbox";
import type { RefreshTokenRotator } from "./refresh-token-rotator";
import type { RevocationStore } from "./revocation-store";
import type { SessionStore } from "./session-store";
import type { WebhookOutbox } from "./webhook-outbox";

export type {
  AuditBuffer,
  AuthCodeStore,
  ChallengeStore,
  EntityStore,
  MailOutbox,
  RefreshTokenRotator,
  RevocationStore,
  SessionStore,
  WebhookOutbox,
};

/** Each class STORE_BINDINGS names, by its name. */
export interface StoreClasses {
  SessionStore: SessionStore;
  ChallengeStore: ChallengeStore;
  AuthCodeStore: AuthCodeStore;
  RevocationStore: RevocationStore;
  RefreshTokenRotator: RefreshTokenRotator;
  MailOutbox: MailOutbox;
  AuditBuffer: AuditBuffer;
  WebhookOutbox: WebhookOutbox;
  EntityStore: EntityStore;
}

type Bindings = typeof STORE_BINDINGS;

/** Every store's namespace binding, derived from STORE_BINDINGS: what a Worker's Env holds of the stores. */
export type StoreNamespaces = {
  [K in keyof Bindings as Bindings[K]["binding"]]: DurableObjectNamespace<StoreClasses[Bindings[K]["class"]]>;
};
