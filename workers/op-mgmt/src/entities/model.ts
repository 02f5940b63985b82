import { z } from "zod";
import type { Attributes } from "../../../../durable-objects/contract/verbs";
import { displayName } from "../../../shared/branding/display-name";
import { ATTRIBUTE, ENTITY_TYPE } from "../../../shared/oauth/token-claims";
import type { Env } from "../../../shared/platform/env";
import { OAuthError } from "../../../shared/platform/errors";

/**
 * The entity model of issue 24, as the admin API and the import validate it: entity types (with
 * `organization` built in) and their role templates, entities with JSON attributes under a size cap,
 * and grants from a user or an entity to an entity.
 */

/** An entity's attributes as JSON, at most this long. */
export const ATTRIBUTES_MAX_BYTES = 4_096;
export const ORGANIZATION = "organization";

const leaf = z.union([z.string().max(1_024), z.number(), z.boolean(), z.null()]);
const value = z.union([
  leaf,
  z.array(leaf).max(100),
  z.record(z.string().regex(ATTRIBUTE), z.union([leaf, z.array(leaf).max(100)])),
]);

export const attributesSchema = z
  .record(z.string().regex(ATTRIBUTE, "an attribute name is 1-64 letters, digits, _ or -"), value)
  .refine(
    (a) => JSON.stringify(a).length <= ATTRIBUTES_MAX_BYTES,
    `attributes are at most ${ATTRIBUTES_MAX_BYTES} bytes as JSON`,
  )
  .transform((a) => a as Attributes);

export const entityTypeName = z
  .string()
  .regex(ENTITY_TYPE, "an entity type is a lowercase letter, then up to 39 of a-z 0-9 _ -");
const name = displayName(200);
export const externalId = z.string().min(1).max(200);
const roleName = z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, "a role is 1-64 of letters, digits, _ . : -");
const permission = z
  .string()
  .regex(/^[A-Za-z0-9_.:*/-]{1,100}$/, "a permission is 1-100 of letters, digits, _ . : * / -");

export const entityInput = z
  .object({ type: entityTypeName, name, external_id: externalId.optional(), attributes: attributesSchema.default({}) })
  .strict();
export type EntityInput = z.infer<typeof entityInput>;
/** PATCH: the name, or the attributes as a whole (the type and external id are fixed). */
export const entityPatch = z.object({ name: name.optional(), attributes: attributesSchema.optional() }).strict();

export const organizationInput = z
  .object({ name, external_id: externalId.optional(), attributes: attributesSchema.default({}) })
  .strict();

/** A role template: each role's permissions. Empty, any role name is taken and gives no permission. */
export const roleTemplate = z.record(
  roleName,
  z.object({ permissions: z.array(permission).max(100).default([]) }).strict(),
);
export type RoleTemplate = z.infer<typeof roleTemplate>;

export const entityTypeInput = z
  .object({ name: entityTypeName, description: z.string().max(500).optional(), roles: roleTemplate.default({}) })
  .strict();
export const entityTypePatch = z
  .object({ description: z.string().max(500).nullable().optional(), roles: roleTemplate.optional() })
  .strict();

const roles = z.array(roleName).max(50).default([]);
const permissions = z.array(permission).max(100).default([]);

/**
 * A grant: exactly one subject (`user_id`, `email`, `entity_id` or `entity_external_id`) and one
 * target (`target_id` or `target_external_id`), with roles from the target type's template and any
 * further permissions.
 */
export const grantInput = z
  .object({
    user_id: z.string().max(100).optional(),
    email: z.string().max(254).optional(),
    entity_id: z.string().max(170).optional(),
    entity_external_id: externalId.optional(),
    target_id: z.string().max(170).optional(),
    target_external_id: externalId.optional(),
    roles,
    permissions,
  })
  .strict()
  .superRefine((g, ctx) => {
    const subjects = [g.user_id, g.email, g.entity_id, g.entity_external_id].filter((v) => v !== undefined);
    if (subjects.length !== 1)
      ctx.addIssue({ code: "custom", message: "name one subject: user_id, email, entity_id or entity_external_id" });
    if ([g.target_id, g.target_external_id].filter((v) => v !== undefined).length !== 1)
      ctx.addIssue({ code: "custom", message: "name one target: target_id or target_external_id" });
  });
export type GrantInput = z.infer<typeof grantInput>;

export const memberInput = z.object({ user_id: z.string().max(100), roles }).strict();

export interface EntityType {
  name: string;
  description: string | null;
  roles: RoleTemplate;
  builtin: boolean;
  created_at: number | null;
  updated_at: number | null;
}

const BUILTIN: EntityType = {
  name: ORGANIZATION,
  description: "An organization users belong to, with roles in each",
  roles: {},
  builtin: true,
  created_at: null,
  updated_at: null,
};

interface TypeRow {
  name: string;
  description: string | null;
  roles: string;
  created_at: number;
  updated_at: number;
}

const typeOf = (r: TypeRow): EntityType => ({
  name: r.name,
  description: r.description,
  roles: JSON.parse(r.roles) as RoleTemplate,
  builtin: r.name === ORGANIZATION,
  created_at: r.created_at,
  updated_at: r.updated_at,
});

/** A tenant's entity types, `organization` always among them. One D1 read (a tenant has few). */
export async function entityTypes(env: Env, tenant: string): Promise<Map<string, EntityType>> {
  const { results } = await env.DB.prepare(
    "SELECT name, description, roles, created_at, updated_at FROM entity_types WHERE tenant = ? ORDER BY name LIMIT 1000",
  )
    .bind(tenant)
    .all<TypeRow>();
  const map = new Map<string, EntityType>([[ORGANIZATION, BUILTIN]]);
  for (const r of results) map.set(r.name, typeOf(r));
  return map;
}

export function requireType(types: Map<string, EntityType>, name: string): EntityType {
  const type = types.get(name);
  if (!type) throw new OAuthError("invalid_request", `no entity type ${name}; create it first`);
  return type;
}

/**
 * The permissions a grant gives: its roles' in the target type's template, and its own. A role the
 * template does not list is refused (an empty template takes any role).
 */
export function grantPermissions(
  type: EntityType,
  roles: string[],
  own: string[],
): { permissions: string[] } | { error: string } {
  const template = Object.entries(type.roles);
  if (template.length === 0) return { permissions: [...new Set(own)] };
  const unknown = roles.filter((r) => !Object.hasOwn(type.roles, r));
  if (unknown.length)
    return {
      error: `role ${unknown.join(", ")} is not in the ${type.name} template (${Object.keys(type.roles).join(", ")})`,
    };
  return { permissions: [...new Set([...roles.flatMap((r) => type.roles[r]?.permissions ?? []), ...own])] };
}
