import type { AuthRequest } from "../../../durable-objects/session-store";
import type { Config } from "../../shared/config";
import { sha256 } from "../../shared/crypto";
import { issueSealedId, openSealedId } from "../../shared/sealed-id";
import { currentGeneration, type ParsedId } from "../../shared/sharding";

/**
 * The login transaction: the validated authorization request and what the login's later steps need,
 * sealed into the `tx` value itself (`<tx id>.<sealed>`), so beginning a login writes nothing.
 * - Bound to the browser: the tx cookie holds the id, and every step requires the two to match.
 * - Expiring: the sealed state carries its expiry.
 * - Single use: the session a verified code makes is stored with the hash of the id, and a second
 *   session from the same transaction is refused (SessionStore.startSession); `redirect_to` names
 *   only the id, and yields one code (SessionStore.resumeLogin).
 * The id's generation and shard name the SessionStore shard the session will live in.
 */
export interface LoginTx {
  id: ParsedId;
  /** SHA-256 of the id: how stores name this transaction. */
  hash: string;
  request: AuthRequest;
  /** The ChallengeStore generation when the login began: its code is placed and found there. */
  challengeGen: number;
  expiresAt: number;
}

interface TxState {
  request: AuthRequest;
  challenge_gen: number;
  exp: number;
}

export async function beginLoginTx(
  config: Config,
  request: AuthRequest,
  now: number,
): Promise<{ tx: string; id: string }> {
  const state: TxState = {
    request,
    challenge_gen: currentGeneration(config.SHARDS, "challenge"),
    exp: now + config.POLICY.login_tx_ttl_seconds * 1000,
  };
  const { value, id } = await issueSealedId(config, "tx", "login-tx", state);
  return { tx: value, id };
}

/** The live transaction a `tx` value carries; null when it is malformed, forged or expired. */
export async function openLoginTx(config: Config, value: unknown, now: number): Promise<LoginTx | null> {
  const opened = await openSealedId<TxState>(config, "tx", "login-tx", value);
  if (!opened || opened.state.exp <= now) return null;
  return {
    id: opened.id,
    hash: await sha256(opened.id.id),
    request: opened.state.request,
    challengeGen: opened.state.challenge_gen,
    expiresAt: opened.state.exp,
  };
}
