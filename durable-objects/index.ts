/**
 * The store Worker: it owns the five Durable Object classes, which the three Keyway Workers bind by
 * `script_name`. It serves no HTTP of its own.
 */
export { AuthCodeStore } from "./auth-code-store";
export { ChallengeStore } from "./challenge-store";
export { RefreshTokenRotator } from "./refresh-token-rotator";
export { RevocationStore } from "./revocation-store";
export { SessionStore } from "./session-store";

export default {
  async fetch(): Promise<Response> {
    return new Response("Keyway stores have no HTTP interface", { status: 404 });
  },
} satisfies ExportedHandler;
