import { STORE_BINDINGS } from "../../durable-objects/contract";
import type { Env } from "./env";
import { objectName, type ShardedStore, type ShardRef } from "./sharding";

type BindingOf<S extends ShardedStore> = (typeof STORE_BINDINGS)[S]["binding"];
type StubOf<S extends ShardedStore> =
  Env[BindingOf<S>] extends DurableObjectNamespace<infer T> ? DurableObjectStub<T> : never;

/**
 * The stub of the shard `ref` names, for every sharded object (the five stores, the MailOutbox and
 * the AuditBuffer). Ids map to objects by name, so the mapping never changes.
 */
export function shard<S extends ShardedStore>(env: Env, store: S, ref: ShardRef): StubOf<S> {
  if (ref.store !== store) throw new Error(`a ${ref.store} route cannot reach the ${store} store`);
  const ns = env[STORE_BINDINGS[store].binding] as unknown as DurableObjectNamespace;
  return ns.get(ns.idFromName(objectName(ref))) as unknown as StubOf<S>;
}
