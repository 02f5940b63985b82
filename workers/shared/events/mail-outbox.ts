import type { MailOutbox } from "../../../durable-objects/namespaces";
import { type Routing, routeKey, shardAddress } from "../routing/router";
import { shardNamed } from "../routing/stores";

/** The MailOutbox shard of an address, by the HMAC of its email. */
export function outboxShardName(routing: Routing, region: string, emailKey: string): string {
  return shardAddress(routeKey(routing, "mail", emailKey, region));
}

/** The MailOutbox shard an address's retries go to. */
export function outboxFor(env: { MAIL_OUTBOX: DurableObjectNamespace<MailOutbox> }, name: string) {
  return shardNamed(env, "mail", name);
}

/** What MailOutbox content (retries and captured mail) is sealed under: MAIL_OUTBOX_SECRET. */
export const outboxSealMaterial = (secret: string) => `mail-outbox:${secret}`;
