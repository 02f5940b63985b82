import type { MailOutbox } from "../../../durable-objects/contract";
import type { Config } from "../config";
import { objectName, routeKey } from "../sharding";
import { shardNamed } from "../stores";

/** The MailOutbox shard of an address, by the HMAC of its email. */
export function outboxShardName(shards: Config["SHARDS"], emailKey: string): string {
  return objectName(routeKey(shards, "mail", emailKey));
}

/** The MailOutbox shard an address's retries go to. */
export function outboxFor(env: { MAIL_OUTBOX: DurableObjectNamespace<MailOutbox> }, name: string) {
  return shardNamed(env, "mail", name);
}

/** What MailOutbox content (retries and captured mail) is sealed under: MAIL_OUTBOX_SECRET. */
export const outboxSealMaterial = (secret: string) => `mail-outbox:${secret}`;
