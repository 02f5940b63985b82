import { seal, unseal } from "../../../durable-objects/contract/crypto";
import type { Config } from "../config/config";
import { type IdCodec, type IdKind, issueId, type ParsedId, parseIdSealed, vouchedFor } from "./ids";
import type { ShardRef } from "./shard-refs";

/**
 * An issued id that carries its own state: `<id>.<sealed>`, where `<id>` is an ordinary Keyway id
 * (kind, generation, shard: it routes like any other) and `<sealed>` is JSON sealed with AES-GCM under
 * a key derived from OTP_HMAC_SECRET for this purpose, with the id as additional data. The state
 * cannot be read or changed, nor moved to another id, without the secret; so a login step can carry
 * what it would otherwise store, and a store keeps only what must be remembered after use (that a
 * code was spent, that a transaction made its session).
 */

/**
 * Seals of different purposes never open as each other: a login transaction, the same transaction once
 * its code was verified (what `redirect_to` carries), an authorization code, a pushed authorization
 * request (RFC 9126).
 */
export type SealPurpose = "login-tx" | "login-done" | "auth-code" | "pushed-request";

/** Enough for any state a login carries (an authorization request's `state` may be 8 KiB). */
const MAX_LENGTH = 16_384;

const material = (config: Pick<Config, "OTP_HMAC_SECRET">, purpose: SealPurpose) =>
  `${purpose}:${config.OTP_HMAC_SECRET}`;

export async function issueSealedId<T>(
  config: IdCodec,
  kind: IdKind,
  purpose: SealPurpose,
  state: T,
  where: { region: string } | { onto: ShardRef },
): Promise<{ value: string; id: string; ref: ShardRef }> {
  const { id, ref } = issueId(config, kind, where);
  const value = `${id}.${await seal(material(config, purpose), JSON.stringify(state), id)}`;
  return { value, id, ref };
}

/** New state sealed onto an id already issued (a transaction moving to its next step). */
export async function sealOnto<T>(
  config: Pick<Config, "OTP_HMAC_SECRET">,
  id: string,
  purpose: SealPurpose,
  state: T,
): Promise<string> {
  return `${id}.${await seal(material(config, purpose), JSON.stringify(state), id)}`;
}

/** The id and state of a sealed id; null for anything malformed, forged, of another kind or purpose. */
export async function openSealedId<T>(
  config: IdCodec,
  kind: IdKind,
  purpose: SealPurpose,
  value: unknown,
): Promise<{ id: ParsedId; state: T } | null> {
  if (typeof value !== "string" || value.length > MAX_LENGTH) return null;
  const dot = value.indexOf(".");
  if (dot < 0) return null;
  // The id's MAC is not computed here: the seal has the id as its additional data, under a key derived
  // from the same secret, so it opens only next to an id Keyway sealed onto, which is one it issued (an
  // HMAC fewer on each step, the MAC of a code issued by another isolate in particular). A made-up id
  // is refused below, before any storage call, as parseId would refuse it.
  const id = parseIdSealed(config, kind, value.slice(0, dot));
  if (!id) return null;
  const opened = await unseal(material(config, purpose), value.slice(dot + 1), id.id);
  if (opened === null) return null;
  vouchedFor(config, id.id);
  return { id, state: JSON.parse(opened) as T };
}
