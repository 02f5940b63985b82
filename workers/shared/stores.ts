import { STORE_BINDINGS } from "../../durable-objects/contract";
import type { Env } from "./env";
import { objectName, type ShardedStore, type ShardRef } from "./sharding";

type BindingOf<S extends ShardedStore> = (typeof STORE_BINDINGS)[S]["binding"];
type StubOf<S extends ShardedStore> =
  Env[BindingOf<S>] extends DurableObjectNamespace<infer T> ? DurableObjectStub<T> : never;

/** What reaching one store takes: its binding, so a Durable Object holding only that one can call it too. */
type EnvWith<S extends ShardedStore> = Pick<Env, BindingOf<S>>;

/**
 * The stub of the shard `ref` names, for every sharded object (the five stores, the MailOutbox and
 * the AuditBuffer). Ids map to objects by name, so the mapping never changes.
 */
export function shard<S extends ShardedStore>(env: EnvWith<S>, store: S, ref: ShardRef): StubOf<S> {
  if (ref.store !== store) throw new Error(`a ${ref.store} route cannot reach the ${store} store`);
  return stubOf(env, store, objectName(ref));
}

const OBJECT_NAME = /^([a-z]+):g(\d{1,2}):s(\d{1,4})$/;

/**
 * The stub of a shard by the object name a write-behind item carries (a mail retry's audit shard):
 * the name is checked to be one of `store`'s, never any object of the namespace.
 */
export function shardNamed<S extends ShardedStore>(env: EnvWith<S>, store: S, name: string): StubOf<S> {
  const m = OBJECT_NAME.exec(name);
  if (!m || m[1] !== store) throw new Error(`${name} is not a ${store} shard`);
  return stubOf(env, store, name);
}

function stubOf<S extends ShardedStore>(env: EnvWith<S>, store: S, name: string): StubOf<S> {
  const ns = (env as unknown as Env)[STORE_BINDINGS[store].binding] as unknown as DurableObjectNamespace;
  return ns.get(ns.idFromName(name)) as unknown as StubOf<S>;
}
