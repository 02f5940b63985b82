import type { Context } from "hono";
import type { AuditInput } from "../../../durable-objects/contract/audit-event";
import {
  base64url,
  randomToken,
  seal,
  sha256,
  timingSafeEqualString,
  unseal,
} from "../../../durable-objects/contract/crypto";
import type {
  AuditEvent,
  FamilyGrant,
  LoginRef,
  RedeemResult,
  StartCodeFamilyResult,
} from "../../../durable-objects/contract/verbs";
import { admitNewWork } from "../../shared/app/app";
import type { Config } from "../../shared/config/config";
import { audit, loginRegion, recordAudit, regionOf, requestAuditEvent, subjectOf } from "../../shared/events/audit";
import { codeGrantId, openCode } from "../../shared/oauth/auth-code";
import { authenticateClient, type Client } from "../../shared/oauth/clients";
import { DEVICE_GRANT } from "../../shared/oauth/device";
import { type DpopProof, dpopProof, dpopResponseHeaders } from "../../shared/oauth/dpop";
import { parseResources, requestedResources } from "../../shared/oauth/resources";
import { projectClaims } from "../../shared/oauth/token-claims";
import { isRevoked, newJti, revokeInSidShard, signClientToken } from "../../shared/oauth/tokens";
import { currentClaims } from "../../shared/people/entity-claims";
import { findUser, userStillValid } from "../../shared/people/users";
import type { Env } from "../../shared/platform/env";
import { OAuthError } from "../../shared/platform/errors";
import { json, NO_STORE, readForm } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { issueId, type ParsedId, parseId } from "../../shared/routing/ids";
import type { ShardRef } from "../../shared/routing/shard-refs";
import { shard } from "../../shared/routing/stores";
import { corsClient } from "./cors";
import { revokeGrant } from "./grants";
import { buildTokenResponse, type IssuePlan } from "./issue";

const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const invalidGrant = (description: string) => new OAuthError("invalid_grant", description);

const GRANT_TYPES = new Set(["authorization_code", "refresh_token", "client_credentials", DEVICE_GRANT]);
const NEW_WORK_GRANTS = new Set(["refresh_token", "client_credentials", DEVICE_GRANT]);

/** POST /token (RFC 6749 §3.2): authorization_code with PKCE, refresh_token with rotation, client_credentials. */
export async function token(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  const form = await readForm(c.req.raw);
  // A refresh, a device's poll or a client credentials grant is new work: refused before the client
  // is looked up. A code redemption finishes a login already under way, and is never shed.
  if (form.grant_type && NEW_WORK_GRANTS.has(form.grant_type)) admitNewWork(c);
  const client = await authenticateClient(c.env, config, c.req.raw, form);
  corsClient(c, client);
  const grantType = form.grant_type;
  if (!grantType) throw new OAuthError("invalid_request", "grant_type is required");
  if (!GRANT_TYPES.has(grantType))
    throw new OAuthError("unsupported_grant_type", `grant_type ${grantType} is not supported`);
  if (!client.grant_types.includes(grantType))
    throw new OAuthError("unauthorized_client", `the client may not use ${grantType}`);
  const proof = await tokenProof(c, config, client);
  const jkt = proof?.jkt;
  const headers = proof ? { ...NO_STORE, ...(await dpopResponseHeaders(config)) } : NO_STORE;
  const issued: AuditInput = { kind: "token_issued", client: client.client_id, detail: { grant_type: grantType } };
  if (grantType === "authorization_code") {
    // The event is written by the code's shard, in the transaction that redeems it.
    const body = await redeemCode(c, config, client, form, issued, jkt);
    return json(body, 200, headers);
  }
  if (grantType === DEVICE_GRANT) {
    const body = await deviceCode(c.env, config, client, form, jkt);
    audit(c, { ...issued, user: subjectOf(body) }, regionOf(config, body));
    return json(body, 200, headers);
  }
  if (grantType === "client_credentials") {
    const body = await clientCredentials(c.env, config, client, form, c.get("region"), jkt);
    audit(c, issued);
    return json(body, 200, headers);
  }
  const body = await refresh(c.env, config, client, form, jkt);
  audit(c, { ...issued, user: subjectOf(body) }, regionOf(config, body));
  return json(body, 200, headers);
}

/**
 * RFC 9449 §5: the request's DPoP proof (htm POST, htu the token endpoint), or null without a DPoP
 * header; a client registered with `dpop_bound_access_tokens` (§5.2) must send one.
 */
async function tokenProof(c: Context<AppEnv>, config: Config, client: Client): Promise<DpopProof | null> {
  const proof = await dpopProof(c.env, config, c.req.raw, { path: "/token" });
  if (!proof && client.dpop_bound_access_tokens)
    throw new OAuthError("invalid_dpop_proof", "this client's access tokens are DPoP-bound: send a DPoP proof");
  return proof;
}

/**
 * RFC 9449 §5: what of a proof a new refresh family keeps. A public client's family is bound to the
 * key; a confidential client's is not (it authenticates), only each access token is.
 */
const familyBinding = (client: Client, jkt: string | undefined): { dpop_jkt?: string } =>
  jkt && client.token_endpoint_auth_method === "none" ? { dpop_jkt: jkt } : {};

/**
 * The device_code grant (RFC 8628 §3.4, §3.5): one poll. Until the person decides, the answer is
 * `authorization_pending` (or `slow_down`, polling faster than the interval, which then grows by 5 s);
 * a denial is `access_denied`, an expired request `expired_token`; an approval gives tokens once, as a
 * code would: the approving login must still stand, and `offline_access` starts a refresh family.
 */
async function deviceCode(
  env: Env,
  config: Config,
  client: Client,
  form: Record<string, string>,
  jkt: string | undefined,
) {
  if (!form.device_code) throw new OAuthError("invalid_request", "device_code is required");
  // A device's request registers no resources (RFC 8628 §3.1 has none), so none can be asked for here.
  if (form.resource !== undefined)
    throw new OAuthError("invalid_target", "resource is not taken with the device code grant");
  const parsed = parseId(config, "device", form.device_code);
  if (!parsed) throw invalidGrant("the device_code is invalid");
  const now = Date.now();
  const poll = await shard(env, "code", parsed.ref).pollDevice({
    deviceHash: await sha256(parsed.id),
    clientId: client.client_id,
    now,
  });
  switch (poll.status) {
    case "pending":
      throw new OAuthError("authorization_pending", "the person has not decided yet");
    case "slow_down":
      throw new OAuthError("slow_down", `poll at most every ${poll.interval_ms / 1000} s`, { status: 400 });
    case "denied":
      throw new OAuthError("access_denied", "the person denied the request", { status: 400 });
    case "expired":
      throw new OAuthError("expired_token", "the device_code has expired");
    case "invalid":
      throw invalidGrant("the device_code is invalid or was used");
  }
  const { login, scope } = poll;
  const { plan, ended } = await prepareLoginGrant(
    env,
    config,
    { client_id: client.client_id, ...login, scope, ...familyBinding(client, jkt) },
    true,
    now,
  );
  if (ended) throw invalidGrant("the login that approved the device has ended");
  plan.jkt = jkt;
  return buildTokenResponse(env, config, client, plan);
}

/**
 * A person's grant turning into tokens (a redeemed code, an approved device): the plan of its token
 * response, and, in one round trip, whether its login still stands (a logout or session revoke of its
 * sid, a revoke or deletion of its user since it began: the sid's revocation shard) while its refresh
 * family is created, when `offline_access` was granted and `startFamily` allows.
 */
async function prepareLoginGrant(
  env: Env,
  config: Config,
  grant: FamilyGrant & { nonce?: string },
  startFamily: boolean,
  now: number,
  /** Says whether the login has ended, in the sid's RevocationStore shard (by default, that alone). */
  checkLogin?: (grantId: string, sidRef: ParsedId) => Promise<boolean>,
  /**
   * An authorization code whose refresh family is its spend (issue 28): the grant id is derived from
   * the code, and the family is made whether or not the presentation issues (`good`), so a later
   * presentation finds it.
   */
  code?: { hash: string; good: boolean; issued: AuditEvent; carried?: AuditEvent[] },
): Promise<{ plan: IssuePlan; ended: boolean; spent?: StartCodeFamilyResult; familyRef: ShardRef }> {
  // The refresh family lives in the login's region (the one its sid names), wherever /token is called from.
  const sidRef = parseId(config, "sid", grant.sid);
  const region = sidRef?.ref.place.region ?? config.REGIONS.default;
  const { id: grantId, ref: familyRef } = code
    ? await codeGrantId(config, code.hash, region)
    : issueId(config, "grant", { region });
  const plan: IssuePlan = {
    grant,
    grantId,
    scope: grant.scope,
    jti: newJti(config, grant.sid),
    iat: Math.floor(now / 1000),
  };
  let family: Promise<StartCodeFamilyResult | undefined> | undefined;
  if ((startFamily || code) && grant.scope.split(" ").includes("offline_access")) {
    const refreshToken = `${grantId}.${randomToken(32)}`;
    plan.refreshToken = refreshToken;
    // The family keeps only which organization the login was for: a refresh recomputes the claims.
    const { nonce: _nonce, claims, ...rest } = grant;
    const familyGrant: FamilyGrant = claims
      ? { ...rest, claims: claims.org_id !== undefined ? { org_id: claims.org_id } : {} }
      : rest;
    const expiresAt = now + config.POLICY.refresh_token_ttl_seconds * 1000;
    const rotator = shard(env, "refresh", familyRef);
    family = Promise.all([sha256(grantId), sha256(refreshToken)]).then(([familyHash, tokenHash]) =>
      code
        ? (rotator.startCodeFamily({
            familyHash,
            tokenHash,
            grant: familyGrant,
            now,
            expiresAt,
            issue: code.good,
            issued: code.issued,
            ...(code.carried?.length ? { carried: code.carried } : {}),
          }) as Promise<StartCodeFamilyResult>)
        : rotator.createFamily(familyHash, tokenHash, familyGrant, now, expiresAt).then(() => undefined),
    );
  }
  const [checked, made] = await Promise.allSettled([
    sidRef
      ? checkLogin
        ? checkLogin(grantId, sidRef)
        : shard(env, "revocation", sidRef.ref).loginEnded(loginRefOf(grant))
      : true,
    family,
  ]);
  if (checked.status === "rejected") {
    // The answer will be an error (503 when the shard is overloaded): a code family made meanwhile is
    // forgotten, so the client's retry redeems the code instead of finding it spent. Should that fail
    // too, the retry finds it and is refused, and the person signs in again.
    if (code && made.status === "fulfilled" && made.value?.status === "ok")
      await Promise.resolve(
        shard(env, "refresh", familyRef).forgetCodeFamily(await sha256(grantId), code.issued.id),
      ).catch(() => undefined);
    throw checked.reason;
  }
  if (made.status === "rejected") throw made.reason;
  const spent = made.value;
  return { plan, ended: checked.value, familyRef, ...(spent ? { spent } : {}) };
}

/** What the sid's shard checks of a login: its session, its user, and how old its claims are. */
const loginRefOf = (grant: FamilyGrant): LoginRef => ({
  sid: grant.sid,
  sub: grant.sub,
  authTime: grant.auth_time,
  ...(grant.claims?.at !== undefined ? { claimsAt: grant.claims.at } : {}),
});

/** The OIDC scopes are a person's; a client acting as itself is given only the API scopes it holds. */
const PERSON_SCOPES = new Set(["openid", "email", "profile", "offline_access"]);

/**
 * The client_credentials grant (RFC 6749 §4.4): a confidential client, already authenticated,
 * gets an access token for itself, no ID token and no refresh token (§4.4.3). `scope` may narrow what
 * the client registered, never widen it; without it, every API scope the client holds. No store call:
 * nothing is kept for such a token until someone revokes it.
 */
async function clientCredentials(
  env: Env,
  config: Config,
  client: Client,
  form: Record<string, string>,
  region: string,
  jkt: string | undefined,
) {
  // authenticateClient already refused a public client whose registration says `none`; a public
  // client cannot have registered this grant (op-mgmt refuses it), so this is belt and braces.
  if (client.token_endpoint_auth_method === "none")
    throw new OAuthError("unauthorized_client", "client_credentials needs a confidential client");
  const held = client.scope.split(" ").filter((s) => s && !PERSON_SCOPES.has(s));
  let scopes = held;
  if (form.scope !== undefined) {
    const asked = form.scope.split(" ").filter(Boolean);
    const notHeld = asked.filter((s) => !held.includes(s));
    if (notHeld.length) throw new OAuthError("invalid_scope", `the client may not request ${notHeld.join(" ")}`);
    scopes = [...new Set(asked)];
  }
  const scope = scopes.join(" ");
  // RFC 8707 §2: the token is for the resources named, each registered for the client; its `aud`.
  const resource = requestedResources(form.resource, client.resources);
  const { token } = await signClientToken(env, config, {
    client_id: client.client_id,
    scope,
    iat: Math.floor(Date.now() / 1000),
    region,
    resource,
    ...(jkt ? { jkt } : {}),
  });
  return {
    access_token: token,
    // RFC 9449 §5: bound to the proof's key.
    token_type: jkt ? ("DPoP" as const) : ("Bearer" as const),
    expires_in: config.POLICY.access_token_ttl_seconds,
    scope,
  };
}

/**
 * The authorization_code grant (RFC 6749 §4.1.3, RFC 7636 §4.6). The code carries its grant sealed
 * (auth-code.ts), so the checks run here. One round trip of two calls (issue 28):
 * - with `offline_access`, the refresh family is the code's spend: its id is derived from the code's,
 *   so its shard makes it once, atomically (a later presentation finds it: `reused` revokes the grant,
 *   `spent` when the first issued nothing), while the login's revocation shard says whether the login
 *   still stands. A family whose login has ended is taken back with its token_issued event
 *   (withdrawCodeFamily: a second call, on that path only).
 * - without it, the login's revocation shard says whether it still stands and spends the code,
 *   atomically and once (redeemCodeForLogin).
 * A code issued before this design is spent in its own AuthCodeStore shard, after the check: two
 * round trips.
 */
async function redeemCode(
  c: Context<AppEnv>,
  config: Config,
  client: Client,
  form: Record<string, string>,
  issued: AuditInput,
  jkt: string | undefined,
) {
  const env = c.env;
  const { code, redirect_uri: redirectUri, code_verifier: verifier } = form;
  if (!code) throw new OAuthError("invalid_request", "code is required");
  if (!redirectUri) throw new OAuthError("invalid_request", "redirect_uri is required");
  // RFC 7636 §4.6: a missing or malformed verifier fails like a wrong one.
  if (verifier !== undefined && !VERIFIER.test(verifier)) throw invalidGrant("code_verifier is malformed");
  const opened = await openCode(config, code);
  // A code of another client is refused without being spent (it may be the right client's, misused).
  if (!opened || opened.grant.client_id !== client.client_id)
    throw invalidGrant("the code is invalid, expired or used");

  const { grant } = opened;
  // Missing where the code needs one: refused before anything is spent, as a malformed one is.
  if (grant.code_challenge && verifier === undefined) throw invalidGrant("code_verifier is missing");
  // RFC 9449 §10: a code bound by dpop_jkt is redeemed only with a proof of that key; refused before
  // anything is spent, so the client holding the key can still redeem it.
  if (grant.dpop_jkt !== undefined && grant.dpop_jkt !== jkt)
    throw invalidGrant("the code is bound to a DPoP key (dpop_jkt): redeem it with a proof of that key");
  // RFC 8707 §2.2: the token request may name some of the resources authorized, never another.
  // Only what the client still registers: a resource removed from it since the login is not granted.
  const stillRegistered = (grant.resource ?? []).filter((r) => client.resources.includes(r));
  const resource = requestedResources(form.resource, stillRegistered) ?? (grant.resource ? stillRegistered : undefined);
  const now = Date.now();
  // A code issued with PKCE needs its verifier (RFC 7636 §4.6); one issued without (a confidential
  // client registered so, issue 40) refuses a verifier, so PKCE cannot be downgraded by stripping the
  // challenge from the authorization request (RFC 9700 §2.1.1).
  const proved = grant.code_challenge
    ? verifier !== undefined &&
      timingSafeEqualString(
        grant.code_challenge,
        base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))),
      )
    : verifier === undefined;
  // A wrong redirect URI or verifier, or an expired code, spends the code without issuing anything.
  const good = opened.exp > now && timingSafeEqualString(grant.redirect_uri, redirectUri) && proved;
  // Without a family, the login's check and the code's spend are one transaction (redeemCodeForLogin;
  // an older code is spent after the check), so an ended login's code issues nothing.
  const event = requestAuditEvent(c, { ...issued, user: grant.sub });
  // A login's code is spent by its refresh family when its grant has one (issue 28).
  const familySpends = opened.spend === "login" && grant.scope.split(" ").includes("offline_access");
  let spent: RedeemResult | undefined;
  const {
    plan,
    ended,
    spent: familySpent,
    familyRef,
  } = await prepareLoginGrant(
    env,
    config,
    {
      client_id: client.client_id,
      sub: grant.sub,
      email: grant.email,
      sid: grant.sid,
      scope: grant.scope,
      auth_time: grant.auth_time,
      ...(grant.nonce !== undefined ? { nonce: grant.nonce } : {}),
      // The family holds every resource authorized, so a refresh may ask for any of them (§2.2).
      ...(grant.resource ? { resource: grant.resource } : {}),
      ...(grant.claims ? { claims: grant.claims } : {}),
      ...(grant.requested_claims ? { requested_claims: grant.requested_claims } : {}),
      ...familyBinding(client, jkt),
    },
    good,
    now,
    opened.spend === "login" && !familySpends
      ? async (grantId, sidRef) => {
          const redeemed = await shard(env, "revocation", sidRef.ref).redeemCodeForLogin({
            login: loginRefOf(grant),
            codeHash: opened.hash,
            grantId: good ? grantId : null,
            sid: grant.sid,
            keepUntil: opened.keep,
            issued: event,
          });
          spent = redeemed;
          return redeemed.ended;
        }
      : undefined,
    // Issue 44: the family's row carries the login's earlier events too (the code carries them sealed).
    familySpends
      ? { hash: opened.hash, good, issued: event, ...(opened.audit ? { carried: opened.audit } : {}) }
      : undefined,
  );
  plan.resource = resource;
  plan.jkt = jkt;
  const grantId = plan.grantId;
  if (familySpent) {
    if (familySpent.status === "reused") {
      // RFC 6749 §4.1.2: revoke what the first redemption issued (its family is revoked already).
      await revokeGrant(env, config, grantId, grant.sid);
      throw invalidGrant("the code was already used; its tokens are revoked");
    }
    if (familySpent.status !== "ok" || !good) throw invalidGrant("the code is invalid, expired or used");
    if (ended) {
      await shard(env, "refresh", familyRef).withdrawCodeFamily(await sha256(grantId), event.id);
      throw invalidGrant("the login this code belongs to has ended");
    }
    return buildTokenResponse(env, config, client, plan);
  }
  // A code of a login whose sid names no live shard was not spent: it issues nothing either way.
  if (opened.spend === "login" && !spent) throw invalidGrant("the login this code belongs to has ended");
  const result =
    spent ??
    (await shard(env, "code", opened.id.ref).redeemCode({
      codeHash: opened.hash,
      grantId: good && !ended ? grantId : null,
      sid: grant.sid,
      keepUntil: opened.keep,
      issued: event,
    }));
  if (result.status === "reused") {
    // RFC 6749 §4.1.2: revoke what the first redemption issued.
    await revokeGrant(env, config, result.grant_id, result.sid);
    throw invalidGrant("the code was already used; its tokens are revoked");
  }
  if (result.status !== "ok" || !good) throw invalidGrant("the code is invalid, expired or used");
  if (ended) throw invalidGrant("the login this code belongs to has ended");
  return buildTokenResponse(env, config, client, plan);
}

/** What a rotation decides before it is stored; sealed so a retry in the grace window gets the same answer. */
interface RotationPlan {
  next: string;
  iat: number;
  scope: string | null;
  resource: string[] | null;
  jtiSecret: string;
  /** RFC 9449 §5: the DPoP key the new access token is bound to; a retry must prove the same one. */
  jkt?: string | null;
}

/** Refresh-token rotation (RFC 9700 §4.14.2) with a grace window for duplicate retries. */
async function refresh(
  env: Env,
  config: Config,
  client: Client,
  form: Record<string, string>,
  jkt: string | undefined,
) {
  const presented = form.refresh_token;
  if (!presented) throw new OAuthError("invalid_request", "refresh_token is required");
  const grantId = presented.slice(0, Math.max(0, presented.indexOf(".")));
  const parsed = parseId(config, "grant", grantId);
  if (!parsed || presented.length > 200) throw invalidGrant("the refresh token is invalid");
  const requestedScope = form.scope !== undefined ? form.scope.split(" ").filter(Boolean) : null;
  // Well-formed here; whether the grant holds each is decided in the rotator, before anything rotates.
  const requestedResource = parseResources(form.resource);
  // A resource the client no longer registers cannot be asked for (the grant may still name it).
  if (requestedResource?.some((r) => !client.resources.includes(r)))
    throw new OAuthError("invalid_target", "the client may not request a token for that resource");

  const now = Date.now();
  const fresh: RotationPlan = {
    next: `${grantId}.${randomToken(32)}`,
    iat: Math.floor(now / 1000),
    scope: requestedScope ? requestedScope.join(" ") : null,
    resource: requestedResource,
    jtiSecret: randomToken(32),
    jkt: jkt ?? null,
  };
  const [presentedHash, nextHash, familyHash, sealed] = await Promise.all([
    sha256(presented),
    sha256(fresh.next),
    sha256(grantId),
    seal(presented, JSON.stringify(fresh)),
  ]);
  const rotator = shard(env, "refresh", parsed.ref);
  const result = await rotator.rotateRefresh({
    familyHash,
    presentedHash,
    clientId: client.client_id,
    nextHash,
    sealedNext: sealed,
    now,
    graceMs: config.POLICY.refresh_grace_seconds * 1000,
    requestedScope,
    requestedResource,
    maxRotationsPerHour: config.POLICY.refresh_rotations_per_hour,
    dpopJkt: jkt ?? null,
  });
  if (result.status === "invalid_scope") throw new OAuthError("invalid_scope", "a refresh cannot widen the scope");
  if (result.status === "invalid_target")
    throw new OAuthError("invalid_target", "a refresh may ask only for resources the grant holds");
  if (result.status === "too_many_rotations")
    throw new OAuthError("too_many_requests", "this refresh token family is rotated too often", {
      retryAfter: result.retry_after,
    });
  if (result.status === "invalid") throw invalidGrant("the refresh token is invalid, expired or revoked");
  if (result.status === "dpop_key_mismatch")
    throw invalidGrant("the refresh token is bound to a DPoP key: refresh with a proof of that key");
  if (result.status === "reuse_detected") {
    // The family is revoked in the rotator; the grant mark kills the access tokens issued from it.
    await revokeInSidShard(env, config, result.grant.sid, [`grant:${grantId}`]);
    await recordAudit(
      env,
      config,
      { kind: "refresh_reuse", user: result.grant.sub, client: client.client_id, detail: { sid: result.grant.sid } },
      loginRegion(config, result.grant.sid),
    );
    throw invalidGrant("the refresh token was already used; its login is revoked");
  }

  let plan = fresh;
  if (result.status === "retry") {
    const opened = await unseal(presented, result.sealed);
    if (!opened) throw invalidGrant("the refresh token is invalid");
    plan = JSON.parse(opened) as RotationPlan;
    // A public client's family is bound to its key (the rotator checked it): the same answer. A
    // confidential client's is not (RFC 9449 §5): its retry gets the same rotation with the access
    // token bound to the key it proves now, as FAPI 2.0 §5.3.2.1-9's recovery of a lost response
    // needs (its plan retries 30 s later with a new key).
    if (client.token_endpoint_auth_method === "none") {
      if ((plan.jkt ?? null) !== (jkt ?? null))
        throw invalidGrant("a retried refresh must prove the same DPoP key as the request it repeats");
    } else plan = { ...plan, jkt: jkt ?? null };
  }
  const { grant } = result;
  // Tokens die with their login: a revoked session or grant, or a revoked or deleted user.
  const [revoked, user] = await Promise.all([
    isRevoked(env, config, { sid: grant.sid, grant_id: grantId }),
    findUser(env, config.TENANT, grant.sub),
  ]);
  if (revoked || !userStillValid(user, grant.auth_time)) {
    await rotator.revokeFamily(familyHash);
    throw invalidGrant("the login this refresh token belongs to has ended");
  }
  // Issue 24: claims as the user's grants are now, never as they were at the login: a grant revoked
  // since is not in the new tokens, and a login for an organization the user left refreshes no more.
  let claims = grant.claims;
  if (claims || client.token_claims) {
    const template = client.token_claims ? { ...client.token_claims, organization: "optional" as const } : null;
    const projection = projectClaims(await currentClaims(env, config, user), template, grant.claims?.org_id);
    if (projection.status !== "ok") {
      await rotator.revokeFamily(familyHash);
      throw invalidGrant("the organization membership this login was for has ended");
    }
    claims = projection.claims;
  }
  const { claims: _was, ...rest } = grant;
  return buildTokenResponse(env, config, client, {
    grant: { ...rest, email: user.email, ...(claims ? { claims } : {}) },
    grantId,
    scope: plan.scope ?? grant.scope,
    resource: (plan.resource ?? grant.resource)?.filter((r) => client.resources.includes(r)),
    jti: newJti(config, grant.sid, plan.jtiSecret),
    iat: plan.iat,
    refreshToken: plan.next,
    jkt: plan.jkt ?? undefined,
  });
}
