/**
 * The store Worker: it owns the Durable Object classes (the five stores, plus MailOutbox and
 * AuditBuffer, which work behind the requests), which the three Keyway Workers bind by
 * `script_name`. It serves no HTTP of its own.
 */
export { AuditBuffer } from "./audit-buffer";
export { AuthCodeStore } from "./auth-code-store";
export { ChallengeStore } from "./challenge-store";
export { EntityStore } from "./entity-store";
export { MailOutbox } from "./mail-outbox";
export { RefreshTokenRotator } from "./refresh-token-rotator";
export { RevocationStore } from "./revocation-store";
export { SessionStore } from "./session-store";
export { WebhookOutbox } from "./webhook-outbox";

export default {
  async fetch(): Promise<Response> {
    return new Response("Keyway stores have no HTTP interface", { status: 404 });
  },
} satisfies ExportedHandler;
