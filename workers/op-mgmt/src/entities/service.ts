import { timeOrderedToken } from "../../../../durable-objects/contract/crypto";
import type {
  ChangedClaims,
  EntityRow,
  EntityWrite,
  EntityWriteResult,
  GrantWrite,
} from "../../../../durable-objects/contract/verbs";
import type { Config } from "../../../shared/config/config";
import { auditEmailKey } from "../../../shared/events/audit";
import { markClaimsChangedEverywhere } from "../../../shared/oauth/tokens";
import { pushClaims } from "../../../shared/people/entity-claims";
import type { Env } from "../../../shared/platform/env";
import { OAuthError } from "../../../shared/platform/errors";
import { currentGeneration, shardsIn } from "../../../shared/routing/generations";
import { issueId, parseId } from "../../../shared/routing/ids";
import { routeKeyIn, type ShardRef, shardAddress } from "../../../shared/routing/shard-refs";
import { type shard, shardNamed } from "../../../shared/routing/stores";
import { type EntityType, grantPermissions } from "./model";

/**
 * What the admin API and the import do with entities and grants (issue 24), a batch at a time: every
 * batch makes one call per shard it touches, in parallel, and users' recompiled claims are pushed to
 * their addresses' ChallengeStore shards before it returns, so the next login carries the change.
 */

type EntityStub = ReturnType<typeof shard<"entity">>;

/** Where entities are placed: the deployment's default region (ids carry it, so it can change later). */
const regionOf = (config: Config) => config.REGIONS.default;

const stubAt = (env: Env, address: string): EntityStub => shardNamed(env, "entity", address);

/** The shard an external id is placed on in generation `gen`: an upsert looks there, newest first. */
function externalShard(config: Config, externalId: string, gen: number): ShardRef {
  return routeKeyIn(config, "entity", `ext:${config.TENANT}:${externalId}`, gen, regionOf(config)) as ShardRef;
}

function generations(config: Config): { current: number; live: number[] } {
  const shards = shardsIn(config.SHARDS, regionOf(config));
  const current = currentGeneration(shards, "entity");
  // Generations appended with a later `from` are routed but not issued into yet: looked in too.
  return { current, live: shards.entity.map((_, g) => g) };
}

function group<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}

export interface EntityItem {
  /** An existing entity to update (PATCH); absent to create or upsert by external id. */
  id?: string;
  type: string;
  name: string;
  external_id?: string | undefined;
  attributes: EntityWrite["attributes"];
  mustExist?: boolean;
}

/** Creates, upserts or updates entities; results in the items' order. */
export async function writeEntities(
  env: Env,
  config: Config,
  items: EntityItem[],
  now: number,
): Promise<EntityWriteResult[]> {
  const { current, live } = generations(config);
  // After a shard count change an external id may already name an entity in an earlier generation:
  // the upsert updates it where it lives (the current generation's shard checks its own at the write).
  const elsewhere = await findExternalIds(
    env,
    config,
    items.filter((i) => !i.id && i.external_id).map((i) => i.external_id as string),
    live.filter((g) => g !== current),
  );
  const placed = items.map((item, index) => {
    let ref: ShardRef | null;
    let id: string;
    const prior = item.external_id ? elsewhere.get(item.external_id) : undefined;
    if (item.id || prior) {
      id = (item.id ?? prior?.id) as string;
      ref = parseId(config, "entity", id)?.ref ?? null;
    } else if (item.external_id) {
      ({ id, ref } = issueId(
        config,
        "entity",
        { onto: externalShard(config, item.external_id, current) },
        timeOrderedToken(now),
      ));
    } else ({ id, ref } = issueId(config, "entity", { region: regionOf(config) }, timeOrderedToken(now)));
    const write: EntityWrite = {
      id,
      type: item.type,
      name: item.name,
      attributes: item.attributes,
      ...(item.external_id ? { external_id: item.external_id } : {}),
      ...(item.mustExist ? { mustExist: true } : {}),
    };
    return { index, ref, write };
  });
  const results: EntityWriteResult[] = new Array(items.length);
  for (const p of placed) if (!p.ref) results[p.index] = { status: "not_found" };
  const routed = placed.filter((p) => p.ref);
  await Promise.all(
    [...group(routed, (p) => shardAddress(p.ref as ShardRef))].map(async ([address, list]) => {
      const out = await stubAt(env, address).writeEntities(
        config.TENANT,
        list.map((p) => p.write),
        now,
      );
      list.forEach((p, i) => {
        results[p.index] = out[i] as EntityWriteResult;
      });
    }),
  );
  // A renamed or re-attributed entity: its grantees' copies, and their users' claims, follow.
  for (const r of results)
    if (r.status === "updated" && r.grantees > 0) await refreshGrantees(env, config, r.entity, now);
  return results;
}

/** Pages through an entity's grantees, updating their copies of it on their subjects' shards. */
async function refreshGrantees(env: Env, config: Config, entity: EntityRow, now: number): Promise<void> {
  const home = shardAddress((parseId(config, "entity", entity.id) as NonNullable<ReturnType<typeof parseId>>).ref);
  let after: string | null = null;
  do {
    const page = await stubAt(env, home).granteesOf(entity.id, after, 5_000);
    const changed = await Promise.all(
      [...group(page.grantees, (g) => g.subject_shard)].map(([address, list]) =>
        stubAt(env, address).refreshGrantCopies({
          tenant: config.TENANT,
          target: entity.id,
          name: entity.name,
          attributes: entity.attributes,
          subjects: list.map((g) => g.subject),
          now,
        }),
      ),
    );
    await pushClaims(env, config, changed.flat(), now);
    after = page.next;
  } while (after);
}

/** A grant's subject, resolved: a user (with the address its claims are pushed to) or an entity. */
export type GrantSubject =
  | { kind: "user"; id: string; email: string; entity_shard: string }
  | { kind: "entity"; id: string; entity_shard: string };

export interface GrantItem {
  subject: GrantSubject;
  /** The target entity's id, once resolved (an external id resolves through `resolveExternalIds`). */
  target: string;
  roles: string[];
  permissions: string[];
}

/** A grant written new (`created`), an existing one changed (`updated`), or one already as asked (`unchanged`). */
export type GrantOutcome =
  /** `permissions`: what the grant gives, its roles' in the template and its own. */
  { status: "created" | "updated" | "unchanged"; permissions: string[] } | { status: "error"; error: string };

/**
 * Writes grants: the targets are read (their types decide the roles), then held on their shards
 * (`grantees`), then written on the subjects' shards, whose changed users' claims are pushed. Each
 * step is idempotent, so a batch that fails part way is safe to run again.
 */
export async function writeGrants(
  env: Env,
  config: Config,
  types: Map<string, EntityType>,
  items: GrantItem[],
  now: number,
): Promise<GrantOutcome[]> {
  const outcomes: GrantOutcome[] = new Array(items.length);
  const targets = new Map<string, EntityRow>();
  const routed = items
    .map((item, index) => ({ item, index, ref: parseId(config, "entity", item.target)?.ref }))
    .filter((r) => {
      if (!r.ref) outcomes[r.index] = { status: "error", error: "no such target entity" };
      return r.ref !== undefined;
    });
  // The targets, and the subjects that are entities, read in one call per shard: both must exist.
  const wanted = routed.flatMap((r) => {
    const ids = [{ id: r.item.target, address: shardAddress(r.ref as ShardRef) }];
    if (r.item.subject.kind === "entity") ids.push({ id: r.item.subject.id, address: r.item.subject.entity_shard });
    return ids;
  });
  await Promise.all(
    [...group(wanted, (w) => w.address)].map(async ([address, list]) => {
      const found = await stubAt(env, address).entitiesByIds(config.TENANT, [...new Set(list.map((w) => w.id))]);
      for (const [id, row] of Object.entries(found)) targets.set(id, row);
    }),
  );
  const ready: { index: number; item: GrantItem; target: EntityRow; permissions: string[] }[] = [];
  for (const r of routed) {
    const target = targets.get(r.item.target);
    if (!target) {
      outcomes[r.index] = { status: "error", error: "no such target entity" };
      continue;
    }
    if (r.item.subject.kind === "entity" && !targets.has(r.item.subject.id)) {
      outcomes[r.index] = { status: "error", error: "no such subject entity" };
      continue;
    }
    if (r.item.subject.kind === "entity" && r.item.subject.id === target.id) {
      outcomes[r.index] = { status: "error", error: "an entity cannot be granted to itself" };
      continue;
    }
    const type = types.get(target.type);
    const resolved = type
      ? grantPermissions(type, r.item.roles, r.item.permissions)
      : { permissions: r.item.permissions };
    if ("error" in resolved) {
      outcomes[r.index] = { status: "error", error: resolved.error };
      continue;
    }
    ready.push({ index: r.index, item: r.item, target, permissions: resolved.permissions });
  }
  // The target side first: a grant is never on its subject's shard without its target knowing. A
  // target deleted since it was read is not held, and its grant is not written.
  const held = new Set<string>();
  await Promise.all(
    [...group(ready, (r) => shardAddress(parseId(config, "entity", r.target.id)?.ref as ShardRef))].map(
      async ([address, list]) => {
        const found = await stubAt(env, address).holdGrants(
          config.TENANT,
          list.map((r) => ({
            target: r.target.id,
            subject: r.item.subject.id,
            subject_shard: r.item.subject.entity_shard,
            roles: r.item.roles,
            permissions: r.permissions,
          })),
        );
        for (const id of Object.keys(found)) held.add(id);
      },
    ),
  );
  for (let i = ready.length - 1; i >= 0; i--) {
    const r = ready[i] as (typeof ready)[number];
    if (held.has(r.target.id)) continue;
    outcomes[r.index] = { status: "error", error: "no such target entity" };
    ready.splice(i, 1);
  }
  // Each user's address key, computed at once (HMACs awaited one by one cost more than the writes).
  const users = new Map<string, string>();
  for (const r of ready) if (r.item.subject.kind === "user") users.set(r.item.subject.id, r.item.subject.email);
  const emailKeys = new Map(
    await Promise.all([...users].map(async ([id, email]) => [id, await auditEmailKey(config, email)] as const)),
  );
  const snapshots: ChangedClaims[] = [];
  // Grants changed in place (roles, permissions): a login holding the old ones must not redeem them.
  const narrowed: string[] = [];
  await Promise.all(
    [...group(ready, (r) => r.item.subject.entity_shard)].map(async ([address, list]) => {
      const writes: GrantWrite[] = list.map((r) => ({
        subject: r.item.subject.id,
        subject_kind: r.item.subject.kind,
        email_key: emailKeys.get(r.item.subject.id) ?? null,
        target: r.target.id,
        target_type: r.target.type,
        target_name: r.target.name,
        target_attributes: r.target.attributes,
        roles: r.item.roles,
        permissions: r.permissions,
      }));
      const out = await stubAt(env, address).writeGrants(config.TENANT, writes, now);
      list.forEach((r, i) => {
        outcomes[r.index] = {
          status: out.created[i] ? "created" : out.changed[i] ? "updated" : "unchanged",
          permissions: r.permissions,
        };
        if (out.changed[i] && !out.created[i] && r.item.subject.kind === "user") narrowed.push(r.item.subject.id);
      });
      snapshots.push(...out.snapshots);
    }),
  );
  await pushClaims(env, config, snapshots, now);
  await markClaimsChangedEverywhere(env, config, narrowed);
  return outcomes;
}

/** Removes one grant (subject side, then the target's record of it); false when there was none. */
export async function removeGrant(env: Env, config: Config, subject: GrantSubject, target: string, now: number) {
  const ref = parseId(config, "entity", target)?.ref;
  if (!ref) return false;
  const out = await stubAt(env, subject.entity_shard).removeGrants(config.TENANT, [{ subject: subject.id, target }]);
  await Promise.all([
    stubAt(env, shardAddress(ref)).releaseGrant(target, [subject.id]),
    pushClaims(env, config, out.snapshots, now).then(() =>
      markClaimsChangedEverywhere(
        env,
        config,
        out.snapshots.map((s) => s.subject),
      ),
    ),
  ]);
  return out.changed[0] === true;
}

/**
 * Deletes an entity and every grant to and from it: the grants it holds (their targets forget it),
 * then, a page at a time, the grants others hold to it (their subjects' claims are recompiled and
 * pushed), then its grantee rows.
 */
export async function deleteEntity(env: Env, config: Config, id: string, now: number): Promise<boolean> {
  const ref = parseId(config, "entity", id)?.ref;
  if (!ref) return false;
  const home = stubAt(env, shardAddress(ref));
  const { deleted, targets } = await home.deleteEntity(config.TENANT, id);
  // A delete that stopped part way (a shard did not answer) is finished by the next one: the entity
  // is gone, its grantee rows are not.
  if (!deleted && (await home.granteesOf(id, null, 1)).grantees.length === 0) return false;
  await releaseTargets(env, config, id, targets);
  for (;;) {
    const page = await home.granteesOf(id, null, 5_000);
    if (page.grantees.length === 0) break;
    const changed = await Promise.all(
      [...group(page.grantees, (g) => g.subject_shard)].map(
        async ([address, list]) =>
          (
            await stubAt(env, address).removeGrants(
              config.TENANT,
              list.map((g) => ({ subject: g.subject, target: id })),
            )
          ).snapshots,
      ),
    );
    await pushClaims(env, config, changed.flat(), now);
    await markClaimsChangedEverywhere(
      env,
      config,
      changed.flat().map((s) => s.subject),
    );
    await home.releaseGrant(
      id,
      page.grantees.map((g) => g.subject),
    );
  }
  return true;
}

/** The targets' shards forget a subject that is gone. */
async function releaseTargets(env: Env, config: Config, subject: string, targets: string[]): Promise<void> {
  const refs = targets.flatMap((t) => {
    const ref = parseId(config, "entity", t)?.ref;
    return ref ? [{ t, address: shardAddress(ref) }] : [];
  });
  await Promise.all(
    [...group(refs, (r) => r.address)].map(([address, list]) =>
      Promise.all(list.map((r) => stubAt(env, address).releaseGrant(r.t, [subject]))),
    ),
  );
}

/** A deleted user's grants go with it. */
export async function dropUserGrants(env: Env, config: Config, user: { id: string; entity_shard?: string | null }) {
  if (!user.entity_shard) return;
  const targets = await stubAt(env, user.entity_shard).dropSubject(config.TENANT, user.id);
  await releaseTargets(env, config, user.id, targets);
}

/**
 * The entities external ids name (an import's grants, a grant by `target_external_id`): looked up on
 * the shard each is placed on, in every generation.
 */
export async function resolveExternalIds(
  env: Env,
  config: Config,
  externalIds: string[],
): Promise<Map<string, EntityRow>> {
  return findExternalIds(env, config, externalIds, generations(config).live);
}

/** The entities external ids name in generations `gens`: one call per shard they hash to. */
async function findExternalIds(
  env: Env,
  config: Config,
  externalIds: string[],
  gens: number[],
): Promise<Map<string, EntityRow>> {
  const out = new Map<string, EntityRow>();
  const unique = [...new Set(externalIds)];
  if (unique.length === 0 || gens.length === 0) return out;
  const lookups = gens.flatMap((gen) =>
    unique.map((ext) => ({ ext, address: shardAddress(externalShard(config, ext, gen)) })),
  );
  await Promise.all(
    [...group(lookups, (l) => l.address)].map(async ([address, list]) => {
      const found = await stubAt(env, address).findByExternalIds(
        config.TENANT,
        list.map((l) => l.ext),
      );
      for (const [ext, row] of Object.entries(found)) out.set(ext, row);
    }),
  );
  return out;
}

/**
 * Gives users an EntityStore shard for their grants, where they have none (their first grant): the
 * shard their id hashes to in the current generation, kept in D1 `users.entity_shard` for good. One
 * statement for the batch; the shards are read back, so a race with another batch agrees.
 */
export async function assignEntityShards(
  env: Env,
  config: Config,
  users: { id: string; entity_shard?: string | null }[],
): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const missing = users.filter((u) => {
    if (u.entity_shard) out.set(u.id, u.entity_shard);
    return !u.entity_shard;
  });
  if (missing.length === 0) return out;
  const { current } = generations(config);
  const proposed = missing.map((u) => ({
    id: u.id,
    s: shardAddress(
      routeKeyIn(config, "entity", `sub:${config.TENANT}:${u.id}`, current, regionOf(config)) as ShardRef,
    ),
  }));
  // One batch (one round trip): a statement a user, each by its primary key, then the shards read back.
  const set = env.DB.prepare("UPDATE users SET entity_shard = ? WHERE id = ? AND tenant = ? AND entity_shard IS NULL");
  const [, ...rest] = await env.DB.batch<{ id: string; s: string }>([
    ...proposed.map((p) => set.bind(p.s, p.id, config.TENANT)),
    env.DB.prepare(
      // CROSS JOIN: a keyed lookup per listed id (imports.ts says why).
      "SELECT u.id, u.entity_shard AS s FROM json_each(?) AS j CROSS JOIN users AS u ON u.id = j.value AND u.tenant = ?",
    ).bind(JSON.stringify(proposed.map((p) => p.id)), config.TENANT),
  ]);
  const results = rest.at(-1)?.results ?? [];
  for (const r of results) out.set(r.id, r.s);
  return out;
}

/** A 404 for an entity id that does not parse or is not found. */
export const noEntity = () => new OAuthError("not_found", "no such entity");
