import { hmac, sha256 } from "../../../durable-objects/contract/crypto";
import type { AuditEvent } from "../../../durable-objects/contract/verbs";
import type { Config } from "../config/config";
import { issueId, type ParsedId, parseId, vouchedFor } from "../routing/ids";
import { issueSealedId, openSealedId } from "../routing/sealed-id";
import type { ShardRef } from "../routing/shard-refs";
import type { RequestedClaims } from "./claims-request";
import type { LoginClaims } from "./token-claims";

/** What an authorization code grants: the login it came from and the request it answers. */
export interface CodeGrant {
  client_id: string;
  redirect_uri: string;
  /** The request's S256 challenge (RFC 7636 §4.2). */
  code_challenge: string;
  scope: string;
  /** RFC 8707: the resources the authorization request named. */
  resource?: string[];
  nonce?: string;
  sub: string;
  email: string;
  sid: string;
  auth_time: number;
  /** Issue 24: what the tokens carry from organizations and grants. */
  claims?: LoginClaims;
  /** OIDC Core §5.5: the claims the request asked for by name. */
  requested_claims?: RequestedClaims;
  /** RFC 9449 §10: the code is redeemed only with a DPoP proof of the key with this JWK thumbprint. */
  dpop_jkt?: string;
}

interface CodeState {
  grant: CodeGrant;
  /** Usable until (ms): `code_ttl_seconds` after issue. */
  exp: number;
  /** Its spent mark is kept until (ms): as long as the tokens it yields live, so a late replay still revokes. */
  keep: number;
  /**
   * Where it is spent: `login`, the RevocationStore shard its login's sid names, in the same call that
   * checks the login (issue 28); absent for a code issued before, spent in its own AuthCodeStore shard.
   */
  spend?: "login";
  /**
   * Issue 44: the login's events so far (`code_sent`, `sign_in`), for the refresh family its
   * redemption makes to carry with its `token_issued` (durable-objects/carried-audit.ts).
   */
  audit?: AuditEvent[];
}

export interface OpenedCode extends CodeState {
  id: ParsedId;
  hash: string;
}

/**
 * Issues an authorization code: an id that carries its grant sealed, so issuing writes nothing. Single
 * use is enforced where it is redeemed: in the shard of its login's sid, with the check that the login
 * still stands (RevocationStore.redeemCodeForLogin).
 */
export async function issueCode(config: Config, grant: CodeGrant, now: number, audit?: AuditEvent[]): Promise<string> {
  const p = config.POLICY;
  const state: CodeState = {
    grant,
    exp: now + p.code_ttl_seconds * 1000,
    keep: now + Math.max(p.code_ttl_seconds, p.access_token_ttl_seconds) * 1000,
    spend: "login",
    ...(audit?.length ? { audit } : {}),
  };
  // In the login's region, the one its sid names.
  const region = parseId(config, "sid", grant.sid)?.ref.place.region ?? config.REGIONS.default;
  return (await issueSealedId(config, "code", "auth-code", state, { region })).value;
}

/** The code's grant, if the code is one Keyway issued (expired or not: a late replay must still revoke). */
export async function openCode(config: Config, value: unknown): Promise<OpenedCode | null> {
  const opened = await openSealedId<CodeState>(config, "code", "auth-code", value);
  if (!opened) return null;
  // The login's sid was issued by Keyway and sealed with the grant: its MAC holds (no HMAC when the
  // redemption parses it).
  vouchedFor(config, opened.state.grant.sid);
  return { ...opened.state, id: opened.id, hash: await sha256(opened.id.id) };
}

/**
 * The grant id a login's code yields: a MAC of the code's hash, so every presentation of the code
 * names the same refresh family, whose row is the code's spend (issue 28). In the login's region.
 */
export async function codeGrantId(
  config: Config,
  codeHash: string,
  region: string,
): Promise<{ id: string; ref: ShardRef }> {
  return issueId(config, "grant", { region }, await hmac(config.OTP_HMAC_SECRET, `grant-of:${codeHash}`));
}
