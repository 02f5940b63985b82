/**
 * The `claims` request parameter (OIDC Core §5.5): which claims the client asks for in the ID token
 * and at userinfo, beyond what its scopes give. Only claims Keyway holds of a person are kept
 * (`REQUESTABLE`); any other name is ignored, as §5.5 allows ("the OP MAY ... not return"), and so is
 * `essential` (a claim Keyway lacks, such as a name the person never gave, is not an error: §5.5.1).
 */
export interface RequestedClaims {
  id_token?: string[];
  userinfo?: string[];
}

/** The person's claims Keyway can return: its email (and that it was proved) and a name when it has one. */
export const REQUESTABLE = ["email", "email_verified", "name"] as const;

/** A claims request's size: far more than any real one, little enough to travel sealed in the login. */
const MAX_CLAIMS_PARAMETER = 4096;

/** Parses the `claims` parameter; a malformed one is `invalid_request` (thrown by `fail`). */
export function parseClaimsRequest(
  raw: string | undefined,
  fail: (description: string) => never,
): RequestedClaims | undefined {
  if (raw === undefined) return undefined;
  if (raw.length > MAX_CLAIMS_PARAMETER) fail("claims is too long");
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return fail("claims is not JSON");
  }
  if (!isObject(parsed)) return fail("claims must be a JSON object");
  const out: RequestedClaims = {};
  for (const [target, members] of Object.entries(parsed)) {
    if (target !== "id_token" && target !== "userinfo") continue;
    if (!isObject(members)) return fail(`claims.${target} must be an object`);
    const names: string[] = [];
    for (const [name, spec] of Object.entries(members)) {
      // §5.5.1: null (default) or an object with essential, value or values.
      if (spec !== null && !isObject(spec)) return fail(`claims.${target}.${name} must be null or an object`);
      if (spec && "essential" in spec && typeof spec.essential !== "boolean")
        return fail(`claims.${target}.${name}.essential must be a boolean`);
      if (spec && "values" in spec && !Array.isArray(spec.values))
        return fail(`claims.${target}.${name}.values must be an array`);
      if ((REQUESTABLE as readonly string[]).includes(name)) names.push(name);
    }
    if (names.length) out[target] = [...new Set(names)];
  }
  return out.id_token || out.userinfo ? out : undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
