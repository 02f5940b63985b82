import type { Context } from "hono";
import type { EntityRow, EntityWriteResult, GrantRow } from "../../../../durable-objects/contract/verbs";
import { normalizeEmail } from "../../../shared/people/email";
import { OAuthError } from "../../../shared/platform/errors";
import { json } from "../../../shared/platform/http";
import type { AppEnv } from "../../../shared/request/context";
import { parseId } from "../../../shared/routing/ids";
import { allShards, shardAddress } from "../../../shared/routing/shard-refs";
import { shard, shardNamed } from "../../../shared/routing/stores";
import { body, queryLimit, readCursor, writeCursor } from "../validation";
import {
  entityInput,
  entityPatch,
  entityTypeInput,
  entityTypePatch,
  entityTypes,
  grantInput,
  memberInput,
  ORGANIZATION,
  organizationInput,
  requireType,
} from "./model";
import {
  assignEntityShards,
  deleteEntity,
  type GrantSubject,
  noEntity,
  removeGrant,
  resolveExternalIds,
  writeEntities,
  writeGrants,
} from "./service";

/**
 * The admin API of issue 24 (docs/organizations.md): entity types, entities, grants, and the
 * organization routes of CONTRACT §8 (an organization is an entity of the built-in type, a member a
 * user's grant to it).
 */

const view = ({ tenant: _, ...e }: EntityRow) => e;

const limitOf = (c: Context<AppEnv>) => queryLimit(c, 50, 200);

const entityShardOf = (c: Context<AppEnv>, id: string) => {
  const ref = parseId(c.get("config"), "entity", id)?.ref;
  if (!ref) throw noEntity();
  return shard(c.env, "entity", ref);
};

async function loadEntity(c: Context<AppEnv>, id: string, type?: string): Promise<EntityRow> {
  const row = await entityShardOf(c, id).getEntity(c.get("config").TENANT, id);
  if (!row || (type && row.type !== type)) throw type === ORGANIZATION ? noOrganization() : noEntity();
  return row;
}

const noOrganization = () => new OAuthError("not_found", "no such organization");

function written(result: EntityWriteResult, created: boolean): Response {
  if (result.status === "not_found") throw noEntity();
  if (result.status === "type_conflict")
    throw new OAuthError("conflict", "that external_id belongs to an entity of another type");
  if (!("entity" in result)) throw noEntity();
  return json(view(result.entity), created && result.status === "created" ? 201 : 200);
}

// ---- Entity types.

export async function listEntityTypes(c: Context<AppEnv>): Promise<Response> {
  return json({ entity_types: [...(await entityTypes(c.env, c.get("config").TENANT)).values()] });
}

export async function getEntityType(c: Context<AppEnv>): Promise<Response> {
  const types = await entityTypes(c.env, c.get("config").TENANT);
  const type = types.get(c.req.param("type") ?? "");
  if (!type) throw new OAuthError("not_found", "no such entity type");
  return json(type);
}

export async function createEntityType(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, entityTypeInput);
  const now = Date.now();
  if (input.name === ORGANIZATION)
    throw new OAuthError("conflict", "organization is built in; PATCH it to set its role template");
  const row = await c.env.DB.prepare(
    "INSERT INTO entity_types (tenant, name, description, roles, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING name",
  )
    .bind(c.get("config").TENANT, input.name, input.description ?? null, JSON.stringify(input.roles), now, now)
    .first();
  if (!row) throw new OAuthError("conflict", "an entity type with this name exists");
  return json(requireType(await entityTypes(c.env, c.get("config").TENANT), input.name), 201);
}

/** A new role template applies to grants written from now on; existing grants keep their permissions. */
export async function patchEntityType(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, entityTypePatch);
  const tenant = c.get("config").TENANT;
  const name = c.req.param("type") ?? "";
  const current = (await entityTypes(c.env, tenant)).get(name);
  if (!current) throw new OAuthError("not_found", "no such entity type");
  const now = Date.now();
  await c.env.DB.prepare(
    `INSERT INTO entity_types (tenant, name, description, roles, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT(tenant, name) DO UPDATE SET description = excluded.description, roles = excluded.roles, updated_at = excluded.updated_at`,
  )
    .bind(
      tenant,
      name,
      input.description === undefined ? current.description : input.description,
      JSON.stringify(input.roles ?? current.roles),
      current.created_at ?? now,
      now,
    )
    .run();
  return json(requireType(await entityTypes(c.env, tenant), name));
}

/** Only a type no entity has; `organization` stays. */
export async function deleteEntityType(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  const name = c.req.param("type") ?? "";
  if (name === ORGANIZATION) throw new OAuthError("conflict", "organization is built in");
  const used = await Promise.all(
    allShards(config, "entity").map((ref) =>
      shard(c.env, "entity", ref).listEntities({ tenant: config.TENANT, type: name, limit: 1 }),
    ),
  );
  if (used.some((p) => p.entities.length > 0))
    throw new OAuthError("conflict", "entities of this type exist; delete them first");
  const { meta } = await c.env.DB.prepare("DELETE FROM entity_types WHERE tenant = ? AND name = ?")
    .bind(config.TENANT, name)
    .run();
  if (!meta.changes) throw new OAuthError("not_found", "no such entity type");
  return new Response(null, { status: 204 });
}

// ---- Entities.

export async function createEntity(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, entityInput);
  requireType(await entityTypes(c.env, c.get("config").TENANT), input.type);
  const [result] = await writeEntities(c.env, c.get("config"), [input], Date.now());
  return written(result as EntityWriteResult, true);
}

export async function getEntity(c: Context<AppEnv>): Promise<Response> {
  return json(view(await loadEntity(c, c.req.param("id") ?? "")));
}

export async function patchEntity(c: Context<AppEnv>, type?: string): Promise<Response> {
  const input = await body(c, entityPatch);
  const current = await loadEntity(c, c.req.param("id") ?? c.req.param("org") ?? "", type);
  const [result] = await writeEntities(
    c.env,
    c.get("config"),
    [
      {
        id: current.id,
        type: current.type,
        name: input.name ?? current.name,
        attributes: input.attributes ?? current.attributes,
        mustExist: true,
      },
    ],
    Date.now(),
  );
  return written(result as EntityWriteResult, false);
}

export async function removeEntity(c: Context<AppEnv>, type?: string): Promise<Response> {
  const id = c.req.param("id") ?? c.req.param("org") ?? "";
  if (type) await loadEntity(c, id, type);
  if (!(await deleteEntity(c.env, c.get("config"), id, Date.now()))) throw noEntity();
  return new Response(null, { status: 204 });
}

interface Cursor {
  /** Index in allShards order. */
  s: number;
  /** The last id returned from that shard. */
  a: string | null;
}

const isCursor = (c: unknown): c is Cursor => {
  const p = c as Partial<Cursor> | null;
  return (
    typeof p === "object" &&
    p !== null &&
    Number.isInteger(p.s) &&
    (p.s as number) >= 0 &&
    (p.a === null || typeof p.a === "string")
  );
};

/** `true`/`false`, a number, or a string: how an attribute value in a query is compared. */
function queryValue(raw: string): string | number | boolean {
  if (raw === "true" || raw === "false") return raw === "true";
  if (/^-?\d+(\.\d+)?$/.test(raw)) return Number(raw);
  return raw;
}

/**
 * Lists entities across every shard, a shard at a time in a fixed order, with an opaque cursor. With
 * `attribute` and `value`, only those whose attribute equals the value: each shard's page reads at
 * most 20,000 rows, so a page may hold few matches and still have a `next`.
 */
export async function listEntities(c: Context<AppEnv>, fixedType?: string): Promise<Response> {
  const config = c.get("config");
  const limit = limitOf(c);
  const type = fixedType ?? c.req.query("type");
  const attribute = c.req.query("attribute");
  const value = c.req.query("value");
  if ((attribute === undefined) !== (value === undefined))
    throw new OAuthError("invalid_request", "attribute and value go together");
  if (attribute !== undefined && !/^[A-Za-z0-9_-]{1,64}$/.test(attribute))
    throw new OAuthError("invalid_request", "attribute is not an attribute name");
  const shards = allShards(config, "entity");
  let cursor = readCursor(c.req.query("cursor"), isCursor) ?? { s: 0, a: null };
  const out: EntityRow[] = [];
  const started = Date.now();
  while (cursor.s < shards.length && out.length < limit) {
    const page = await shard(c.env, "entity", shards[cursor.s] as (typeof shards)[number]).listEntities({
      tenant: config.TENANT,
      type,
      after: cursor.a,
      limit: limit - out.length,
      ...(attribute !== undefined ? { attribute: { name: attribute, value: queryValue(value as string) } } : {}),
    });
    out.push(...page.entities);
    cursor = page.next ? { s: cursor.s, a: page.next } : { s: cursor.s + 1, a: null };
    // A search over many shards answers within a few seconds, with where it stopped.
    if (attribute !== undefined && Date.now() - started > 3_000) break;
  }
  return json({
    entities: out.map(view),
    next: cursor.s < shards.length ? writeCursor(cursor) : null,
  });
}

// ---- Grants.

/** A user by id or address, with its EntityStore shard (given one at its first grant). */
async function userSubject(c: Context<AppEnv>, by: { id?: string; email?: string }, assign: boolean) {
  const config = c.get("config");
  let row: { id: string; email: string; entity_shard: string | null } | null;
  if (by.email !== undefined) {
    const email = normalizeEmail(by.email);
    if (!email) throw new OAuthError("invalid_request", "email is not a valid address");
    row = await c.env.DB.prepare("SELECT id, email, entity_shard FROM users WHERE tenant = ? AND email = ?")
      .bind(config.TENANT, email)
      .first();
  } else
    row = await c.env.DB.prepare("SELECT id, email, entity_shard FROM users WHERE tenant = ? AND id = ?")
      .bind(config.TENANT, by.id ?? "")
      .first();
  if (!row) throw new OAuthError("not_found", "no such user");
  if (!row.entity_shard && assign)
    row.entity_shard = (await assignEntityShards(c.env, config, [row])).get(row.id) ?? null;
  return row;
}

async function entitySubject(c: Context<AppEnv>, by: { id?: string; external_id?: string }): Promise<GrantSubject> {
  const config = c.get("config");
  let id = by.id;
  if (by.external_id !== undefined)
    id = (await resolveExternalIds(c.env, config, [by.external_id])).get(by.external_id)?.id;
  const ref = id ? parseId(config, "entity", id)?.ref : undefined;
  if (!id || !ref) throw new OAuthError("not_found", "no such subject entity");
  return { kind: "entity", id, entity_shard: shardAddress(ref) };
}

async function grantOnce(
  c: Context<AppEnv>,
  subject: GrantSubject,
  target: string,
  roles: string[],
  permissions: string[],
) {
  const config = c.get("config");
  const types = await entityTypes(c.env, config.TENANT);
  const [outcome] = await writeGrants(c.env, config, types, [{ subject, target, roles, permissions }], Date.now());
  if (!outcome || outcome.status === "error") {
    const error = outcome?.status === "error" ? outcome.error : "the grant was not written";
    throw new OAuthError(error.startsWith("no such") ? "not_found" : "invalid_request", error);
  }
  return outcome;
}

/** `POST /grants`: creates or replaces one grant (its roles and permissions). */
export async function createGrant(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, grantInput);
  const config = c.get("config");
  const subject: GrantSubject =
    input.user_id !== undefined || input.email !== undefined
      ? await userGrantSubject(
          c,
          input.user_id !== undefined ? { id: input.user_id } : { email: input.email as string },
        )
      : await entitySubject(
          c,
          input.entity_id !== undefined ? { id: input.entity_id } : { external_id: input.entity_external_id as string },
        );
  let target = input.target_id;
  if (input.target_external_id !== undefined)
    target = (await resolveExternalIds(c.env, config, [input.target_external_id])).get(input.target_external_id)?.id;
  if (!target) throw new OAuthError("not_found", "no such target entity");
  const outcome = await grantOnce(c, subject, target, input.roles, input.permissions);
  return json(
    // The permissions the grant gives: its roles' in the template, and its own.
    { subject: subject.id, subject_kind: subject.kind, target, roles: input.roles, permissions: outcome.permissions },
    outcome.status === "created" ? 201 : 200,
  );
}

async function userGrantSubject(c: Context<AppEnv>, by: { id?: string; email?: string }): Promise<GrantSubject> {
  const row = await userSubject(c, by, true);
  return { kind: "user", id: row.id, email: row.email, entity_shard: row.entity_shard as string };
}

/** A page of a subject's grants, in target id order (`after` is the last target seen). */
async function grantsPage(
  c: Context<AppEnv>,
  subject: { id: string; entity_shard: string | null },
  type: string | null,
): Promise<{ grants: GrantRow[]; next: string | null }> {
  const limit = limitOf(c);
  if (!subject.entity_shard) return { grants: [], next: null };
  return shardNamed(c.env, "entity", subject.entity_shard).grantsOf(
    c.get("config").TENANT,
    subject.id,
    c.req.query("after") ?? null,
    limit,
    type,
  );
}

/** `GET /users/{id}/grants`: a user's grants, in target id order (`after` is the last target seen). */
export async function listUserGrants(c: Context<AppEnv>): Promise<Response> {
  const user = await userSubject(c, { id: c.req.param("id") ?? "" }, false);
  return json(await grantsPage(c, user, c.req.query("type") ?? null));
}

/** `GET /users/{id}/organizations`: the organizations a user belongs to, with the roles in each. */
export async function listUserOrganizations(c: Context<AppEnv>): Promise<Response> {
  const user = await userSubject(c, { id: c.req.param("id") ?? "" }, false);
  const page = await grantsPage(c, user, ORGANIZATION);
  return json({
    organizations: page.grants.map((g) => ({
      id: g.target,
      name: g.target_name,
      roles: g.roles,
      permissions: g.permissions,
    })),
    next: page.next,
  });
}

/** `DELETE /users/{id}/grants/{entity}`. */
export async function deleteUserGrant(c: Context<AppEnv>): Promise<Response> {
  const user = await userSubject(c, { id: c.req.param("id") ?? "" }, false);
  if (!user.entity_shard) throw new OAuthError("not_found", "no such grant");
  const removed = await removeGrant(
    c.env,
    c.get("config"),
    { kind: "user", id: user.id, email: user.email, entity_shard: user.entity_shard },
    c.req.param("entity") ?? "",
    Date.now(),
  );
  if (!removed) throw new OAuthError("not_found", "no such grant");
  return new Response(null, { status: 204 });
}

/** `GET /entities/{id}/grants`: the grants an entity holds (as a subject). */
export async function listEntityGrants(c: Context<AppEnv>): Promise<Response> {
  const entity = await loadEntity(c, c.req.param("id") ?? "");
  const ref = parseId(c.get("config"), "entity", entity.id)?.ref;
  return json(
    await grantsPage(c, { id: entity.id, entity_shard: ref ? shardAddress(ref) : null }, c.req.query("type") ?? null),
  );
}

/** `DELETE /entities/{id}/grants/{entity}`. */
export async function deleteEntityGrant(c: Context<AppEnv>): Promise<Response> {
  const subject = await entitySubject(c, { id: c.req.param("id") ?? "" });
  if (!(await removeGrant(c.env, c.get("config"), subject, c.req.param("entity") ?? "", Date.now())))
    throw new OAuthError("not_found", "no such grant");
  return new Response(null, { status: 204 });
}

/** `GET /entities/{id}/grantees`: who holds grants to an entity, with their roles (`after`: the last subject seen). */
export async function listGrantees(c: Context<AppEnv>): Promise<Response> {
  const id = c.req.param("id") ?? "";
  await loadEntity(c, id);
  const page = await entityShardOf(c, id).granteesOf(id, c.req.query("after") ?? null, limitOf(c));
  return json({ grantees: page.grantees.map(({ subject_shard: _, ...g }) => g), next: page.next });
}

// ---- Organizations (CONTRACT §8).

export async function createOrganization(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, organizationInput);
  const [result] = await writeEntities(c.env, c.get("config"), [{ ...input, type: ORGANIZATION }], Date.now());
  return written(result as EntityWriteResult, true);
}

export const getOrganization = async (c: Context<AppEnv>) =>
  json(view(await loadEntity(c, c.req.param("org") ?? "", ORGANIZATION)));
export const patchOrganization = (c: Context<AppEnv>) => patchEntity(c, ORGANIZATION);
export const deleteOrganization = (c: Context<AppEnv>) => removeEntity(c, ORGANIZATION);
export const listOrganizations = (c: Context<AppEnv>) => listEntities(c, ORGANIZATION);

/** `POST /organizations/{org}/members` `{user_id, roles[]}`: adds a member (or sets its roles). */
export async function addMember(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, memberInput);
  const org = await loadEntity(c, c.req.param("org") ?? "", ORGANIZATION);
  const subject = await userGrantSubject(c, { id: input.user_id });
  const outcome = await grantOnce(c, subject, org.id, input.roles, []);
  return json(
    { organization_id: org.id, user_id: subject.id, roles: input.roles },
    outcome.status === "created" ? 201 : 200,
  );
}

/** `DELETE /organizations/{org}/members/{user}`. */
export async function removeMember(c: Context<AppEnv>): Promise<Response> {
  const org = await loadEntity(c, c.req.param("org") ?? "", ORGANIZATION);
  const user = await userSubject(c, { id: c.req.param("user") ?? "" }, false);
  if (
    !user.entity_shard ||
    !(await removeGrant(
      c.env,
      c.get("config"),
      { kind: "user", id: user.id, email: user.email, entity_shard: user.entity_shard },
      org.id,
      Date.now(),
    ))
  )
    throw new OAuthError("not_found", "the user is not a member");
  return new Response(null, { status: 204 });
}

/** `GET /organizations/{org}/members`: its members and their roles (`after`: the last user id seen). */
export async function listMembers(c: Context<AppEnv>): Promise<Response> {
  const org = await loadEntity(c, c.req.param("org") ?? "", ORGANIZATION);
  const page = await entityShardOf(c, org.id).granteesOf(org.id, c.req.query("after") ?? null, limitOf(c));
  return json({
    members: page.grantees
      .filter((g) => !g.subject.startsWith("ent_"))
      .map((g) => ({ user_id: g.subject, roles: g.roles, permissions: g.permissions })),
    next: page.next,
  });
}
