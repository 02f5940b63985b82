import { sha256 } from "../../../durable-objects/contract/crypto";
import type { AuditEvent, AuthRequest, SessionInfo } from "../../../durable-objects/contract/verbs";
import type { Config } from "../../shared/config/config";
import type { LoginClaims, TokenClaimsTemplate } from "../../shared/oauth/token-claims";
import { currentGeneration, shardsIn } from "../../shared/routing/generations";
import { type ParsedId, vouchedFor } from "../../shared/routing/ids";
import { issueSealedId, openSealedId, sealOnto } from "../../shared/routing/sealed-id";
import type { TxUi } from "./pages/ui";

/**
 * The login transaction: the validated authorization request and what the login's later steps need,
 * sealed into the `tx` value itself (`<tx id>.<sealed>`), so beginning a login writes nothing.
 * - Bound to the browser: the tx cookie holds the id, and every step requires the two to match.
 * - Expiring: the sealed state carries its expiry.
 * - Single use: a verified code seals the login it made onto the same id (`redirect_to` carries it,
 *   see sealVerifiedLogin), and the session is stored, with the hash of the id, only when
 *   `redirect_to` is followed; a second session from the same transaction is refused
 *   (SessionStore.startSession), so the transaction yields one session and one code.
 * The id's region, generation and shard name the SessionStore shard the session will live in; its
 * region is the login's: every object the login makes is placed there (regions.ts).
 */
export interface LoginTx {
  id: ParsedId;
  /** SHA-256 of the id: how stores name this transaction. */
  hash: string;
  request: AuthRequest;
  /** The ChallengeStore generation when the login began: its code is placed and found there. */
  challengeGen: number;
  expiresAt: number;
  /** The pages' language and look, chosen when the login began (issue 26). */
  ui?: TxUi | undefined;
  /** The client's token claims template (issue 24), so the verify step projects claims without a lookup. */
  template?: TokenClaimsTemplate | undefined;
}

interface TxState {
  request: AuthRequest;
  challenge_gen: number;
  exp: number;
  ui?: TxUi;
  template?: TokenClaimsTemplate;
}

export async function beginLoginTx(
  config: Config,
  request: AuthRequest,
  now: number,
  region: string,
  ui: TxUi,
  template: TokenClaimsTemplate | null,
): Promise<{ tx: string; id: string }> {
  const state: TxState = {
    request,
    challenge_gen: currentGeneration(shardsIn(config.SHARDS, region), "challenge"),
    exp: now + config.POLICY.login_tx_ttl_seconds * 1000,
    ui,
    ...(template ? { template } : {}),
  };
  const { value, id } = await issueSealedId(config, "tx", "login-tx", state, { region });
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
    ui: opened.state.ui,
    template: opened.state.template,
  };
}

/**
 * What a verified code leaves for `redirect_to`: the transaction's request and the session it made,
 * sealed onto the transaction's id under its own purpose (a `tx` never opens as one). The session is
 * stored when `redirect_to` is followed (SessionStore.startSession), so verifying writes only the
 * challenge; the cookie's hash ties the session to the browser that verified.
 */
export interface VerifiedLogin {
  id: ParsedId;
  hash: string;
  request: AuthRequest;
  session: SessionInfo;
  sessionHash: string;
  /** The HMAC of the address, for the `sign_in` event. */
  emailKey: string;
  /** The user was created by this sign-in (a sign-up). */
  created: boolean;
  /** What the tokens carry from organizations and grants (issue 24), projected at verify. */
  claims?: LoginOutcome | undefined;
  /** How the person signed in (issue 42), for the `sign_in` event. */
  method: SignInMethod;
  /** Issue 44: the login's `code_sent` events, for its session to carry on. */
  audit?: AuditEvent[] | undefined;
}

export type SignInMethod = "email_code" | "passkey";

/**
 * The verify step's projection of the user's grants: claims for the code, or that the person must
 * pick an organization, or that the client's organization rule refuses the login.
 */
export type LoginOutcome = { claims: LoginClaims } | { pick: true } | { denied: string };

interface VerifiedState {
  request: AuthRequest;
  session: SessionInfo;
  session_hash: string;
  email_key: string;
  created?: boolean;
  claims?: LoginOutcome;
  method?: SignInMethod;
  audit?: AuditEvent[];
  exp: number;
}

export async function sealVerifiedLogin(
  config: Config,
  tx: LoginTx,
  login: {
    session: SessionInfo;
    sessionHash: string;
    emailKey: string;
    created?: boolean;
    claims?: LoginOutcome | undefined;
    method?: SignInMethod;
    audit?: AuditEvent[] | undefined;
  },
): Promise<string> {
  const state: VerifiedState = {
    request: tx.request,
    session: login.session,
    session_hash: login.sessionHash,
    email_key: login.emailKey,
    ...(login.created ? { created: true } : {}),
    ...(login.claims ? { claims: login.claims } : {}),
    ...(login.method === "passkey" ? { method: "passkey" as const } : {}),
    ...(login.audit?.length ? { audit: login.audit } : {}),
    exp: tx.expiresAt,
  };
  return sealOnto(config, tx.id.id, "login-done", state);
}

/** The verified login a `redirect_to` carries; null when malformed, forged or past the transaction's expiry. */
export async function openVerifiedLogin(config: Config, value: unknown, now: number): Promise<VerifiedLogin | null> {
  const opened = await openSealedId<VerifiedState>(config, "tx", "login-done", value);
  if (!opened || opened.state.exp <= now) return null;
  // The session's sid was issued by Keyway at verify and sealed here: its MAC holds (no HMAC when the
  // code's region is read from it).
  vouchedFor(config, opened.state.session.sid);
  return {
    id: opened.id,
    hash: await sha256(opened.id.id),
    request: opened.state.request,
    session: opened.state.session,
    sessionHash: opened.state.session_hash,
    emailKey: opened.state.email_key,
    created: opened.state.created === true,
    claims: opened.state.claims,
    method: opened.state.method ?? "email_code",
    audit: opened.state.audit,
  };
}
