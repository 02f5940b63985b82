import { z } from "zod";
import { log } from "../../../durable-objects/contract/log";
import type {
  AttributeValue,
  ClaimsSnapshot,
  LoginClaims,
  SnapshotGrant,
} from "../../../durable-objects/contract/verbs";

/**
 * A client's token claims template and its projection (issue 24): what a login's tokens carry from
 * the user's organizations and entity grants. Pure; entity-claims.ts reads and pushes the snapshots.
 */

/**
 * Names a template may not set, compared without regard to case (issue 38): the protocol's claims
 * (RFC 7519 §4.1, OIDC Core §2 and §3.1.3.6, RFC 9068 §2.2, RFC 8693 §4, RFC 7800 §3), the standard
 * claims about the person (OIDC Core §5.1), and Keyway's own. A template that wrote `name` with the
 * organization's name would give a user without a name the organization's as theirs, in the ID token
 * where relying parties read the person's name; `Sub` or `Org_id` beside `sub` and `org_id` is a claim
 * a consumer that ignores case may take for the real one.
 */
const RESERVED = new Set([
  // JWT and OIDC's protocol claims
  "iss",
  "sub",
  "aud",
  "exp",
  "iat",
  "nbf",
  "jti",
  "typ",
  "auth_time",
  "nonce",
  "acr",
  "amr",
  "azp",
  "sid",
  "at_hash",
  "c_hash",
  "s_hash",
  "scope",
  "client_id",
  "cnf",
  "act",
  "may_act",
  "events",
  // OIDC Core §5.1: the person's standard claims
  "name",
  "given_name",
  "family_name",
  "middle_name",
  "nickname",
  "preferred_username",
  "profile",
  "picture",
  "website",
  "email",
  "email_verified",
  "gender",
  "birthdate",
  "zoneinfo",
  "locale",
  "phone_number",
  "phone_number_verified",
  "address",
  "updated_at",
  // Keyway's
  "grant_id",
  "org_id",
  "org_roles",
  "claims_truncated",
  // The access token's own (issue 40): what userinfo is asked for, and a pairwise client's sealed user.
  "userinfo_claims",
  "uid",
]);

/** Whether a template may not set the claim `name`: one of RESERVED, in any case. */
export const isReservedClaim = (name: string) => RESERVED.has(name.toLowerCase());

const ENTITY_TYPE = /^[a-z][a-z0-9_-]{0,39}$/;
const ATTRIBUTE = /^[A-Za-z0-9_-]{1,64}$/;
/**
 * Where a claim's value comes from:
 * - `organization.name`, `organization.permissions`, `organization.attributes.<key>`: the organization
 *   the login chose;
 * - `grants.<type>.ids|names|permissions`, `grants.<type>.roles` (entity id to roles),
 *   `grants.<type>.attributes.<key>` (each granted entity's value): every grant of an entity type.
 */
const SOURCE =
  /^(?:organization\.(?:name|permissions|attributes\.[A-Za-z0-9_-]{1,64})|grants\.[a-z][a-z0-9_-]{0,39}\.(?:ids|names|roles|permissions|attributes\.[A-Za-z0-9_-]{1,64}))$/;

export const tokenClaimsSchema = z
  .object({
    /** `required`: a login must end in one organization (the only one, the one asked for, or one picked). */
    organization: z.enum(["optional", "required"]).default("optional"),
    claims: z
      .array(
        z
          .object({
            claim: z
              .string()
              .regex(/^[A-Za-z][A-Za-z0-9_.:-]{0,63}$/, "a claim name is a letter, then letters, digits or _ . : -")
              .refine(
                (n) => !isReservedClaim(n),
                "that name, in any case, is a protocol claim, a standard claim about the person (such as name or preferred_username) or Keyway's own",
              ),
            source: z.string().regex(SOURCE, "not a known source (docs/organizations.md)"),
          })
          .strict(),
      )
      .max(20)
      .refine((list) => new Set(list.map((c) => c.claim)).size === list.length, "each claim once")
      .default([]),
    /** The most the organization and template claims may take in a token, as JSON. */
    max_bytes: z.number().int().min(256).max(4096).default(2048),
    /** Over `max_bytes`: keep the claims that fit, in order, and say so (`claims_truncated`), or refuse the login. */
    on_overflow: z.enum(["truncate", "deny"]).default("truncate"),
  })
  .strict();

export type TokenClaimsTemplate = z.infer<typeof tokenClaimsSchema>;

/**
 * Validated when written; a value that no longer parses is treated as none (logged). A claim whose
 * name was reserved since it was written (issue 38: case, standard claims) is dropped alone, so the
 * template's other claims stay in the tokens.
 */
export function templateOf(raw: string | null | undefined): TokenClaimsTemplate | null {
  if (!raw) return null;
  const stored = JSON.parse(raw) as { claims?: unknown } | null;
  if (stored && Array.isArray(stored.claims)) {
    const kept = stored.claims.filter(
      (c: { claim?: unknown }) => !(typeof c?.claim === "string" && isReservedClaim(c.claim)),
    );
    if (kept.length !== stored.claims.length) {
      log("warn", "a client's token_claims name a reserved claim; those claims are left out", {});
      stored.claims = kept;
    }
  }
  const parsed = tokenClaimsSchema.safeParse(stored);
  if (!parsed.success) log("warn", "a client's token_claims no longer parse; ignored", {});
  return parsed.success ? parsed.data : null;
}

export { ATTRIBUTE, ENTITY_TYPE };

type ClaimValue = AttributeValue | { [id: string]: string[] };

export type { LoginClaims };

export type Projection =
  | { status: "ok"; claims: LoginClaims | undefined }
  /** The client requires an organization and the user has several: a page lets the person pick. */
  | { status: "pick"; orgs: { id: string; name: string }[] }
  | { status: "denied"; reason: string };

/** The most organizations a picker lists. */
export const PICKER_MAX = 50;

/**
 * A login's claims from the user's snapshot, the client's template and the `organization` the
 * request named. Nothing to add (no template, no organization asked for) is `claims: undefined`.
 * `readAt` (s), for claims that travel sealed to a code: when the snapshot was read (LoginClaims.at).
 */
export function projectClaims(
  snapshot: ClaimsSnapshot | undefined,
  template: TokenClaimsTemplate | null,
  organization: string | undefined,
  readAt?: number,
): Projection {
  if (!template && organization === undefined) return { status: "ok", claims: undefined };
  const grants = snapshot?.grants ?? [];
  const orgs = grants.filter((g) => g.type === "organization");
  let org: SnapshotGrant | undefined;
  if (organization !== undefined) {
    org = orgs.find((g) => g.id === organization);
    if (!org) return { status: "denied", reason: "the user is not a member of that organization" };
  } else if (template?.organization === "required") {
    if (orgs.length === 0) return { status: "denied", reason: "the user is not a member of any organization" };
    if (orgs.length > 1)
      return {
        status: "pick",
        // By name, as a person looks for one.
        orgs: orgs
          .slice(0, PICKER_MAX)
          .map((g) => ({ id: g.id, name: g.name }))
          .sort((a, b) => a.name.localeCompare(b.name)),
      };
    org = orgs[0];
  }
  const claims: LoginClaims = {};
  if (org) {
    claims.org_id = org.id;
    claims.org_roles = org.roles;
  }
  let size = JSON.stringify(claims).length;
  const budget = template?.max_bytes ?? 4096;
  const extra: Record<string, ClaimValue> = {};
  let truncated = snapshot?.over === true && (template?.claims ?? []).some((c) => c.source.startsWith("grants."));
  for (const { claim, source } of template?.claims ?? []) {
    const value = claimValue(source, org, grants);
    if (value === undefined) continue;
    const bytes = JSON.stringify({ [claim]: value }).length;
    if (size + bytes > budget) {
      if (template?.on_overflow === "deny")
        return { status: "denied", reason: "the token's claims are larger than the client allows" };
      truncated = true;
      continue;
    }
    size += bytes;
    extra[claim] = value;
  }
  if (Object.keys(extra).length) claims.extra = extra;
  if (truncated) claims.truncated = true;
  if (!Object.keys(claims).length) return { status: "ok", claims: undefined };
  if (readAt !== undefined) claims.at = Math.floor(readAt);
  return { status: "ok", claims };
}

function claimValue(source: string, org: SnapshotGrant | undefined, grants: SnapshotGrant[]): ClaimValue | undefined {
  const [root, ...rest] = source.split(".");
  if (root === "organization") {
    if (!org) return undefined;
    if (rest[0] === "name") return org.name;
    if (rest[0] === "permissions") return org.permissions;
    return org.attributes[rest.slice(1).join(".")];
  }
  const [type, what, ...key] = rest;
  const of = grants.filter((g) => g.type === type);
  switch (what) {
    case "ids":
      return of.map((g) => g.id);
    case "names":
      return of.map((g) => g.name);
    case "permissions":
      return [...new Set(of.flatMap((g) => g.permissions))];
    case "roles":
      return Object.fromEntries(of.map((g) => [g.id, g.roles]));
    default: {
      const name = key.join(".");
      const values = of.map((g) => g.attributes[name]).filter((v) => v !== undefined);
      return values as AttributeValue;
    }
  }
}

/** The claims a token carries from a login's LoginClaims. */
export function tokenClaimsOf(claims: LoginClaims | undefined): Record<string, unknown> {
  if (!claims) return {};
  return {
    ...(claims.extra ?? {}),
    ...(claims.org_id !== undefined ? { org_id: claims.org_id, org_roles: claims.org_roles ?? [] } : {}),
    ...(claims.truncated ? { claims_truncated: true } : {}),
  };
}
