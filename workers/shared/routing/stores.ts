import { storeCallStarted, tracingStoreCalls } from "../../../durable-objects/contract/log";
import type { Jurisdiction, LocationHint } from "../../../durable-objects/contract/places";
import { stubAt, stubIn } from "../../../durable-objects/contract/shard-address";
import type { STORE_BINDINGS } from "../../../durable-objects/contract/verbs";
import type { Env } from "../platform/env";
import type { ShardedStore } from "./generations";
import { objectName, type ShardRef } from "./shard-refs";

type BindingOf<S extends ShardedStore> = (typeof STORE_BINDINGS)[S]["binding"];
type StubOf<S extends ShardedStore> =
  Env[BindingOf<S>] extends DurableObjectNamespace<infer T> ? DurableObjectStub<T> : never;

/** What reaching one store takes: its binding, so a Durable Object holding only that one can call it too. */
type EnvWith<S extends ShardedStore> = Pick<Env, BindingOf<S>>;

/**
 * The stub of the shard `ref` names, for every sharded object (the five stores, the MailOutbox and
 * the AuditBuffer). Ids map to objects by name, so the mapping never changes. A region's objects are
 * created in its jurisdiction (they never leave it) and with its location hint (honoured when an
 * object is first created; an existing object stays where it is).
 */
export function shard<S extends ShardedStore>(env: EnvWith<S>, store: S, ref: ShardRef): StubOf<S> {
  if (ref.store !== store) throw new Error(`a ${ref.store} route cannot reach the ${store} store`);
  return traced(stubOf(env, store, objectName(ref), ref.place.jurisdiction, ref.place.hint), store, ref.place.region);
}

/**
 * The stub itself, or, in a request that asked for a trace (never in production, log.ts), a stub
 * whose verb calls are recorded with their store, region and timing.
 */
function traced<T extends object>(stub: T, store: string, region: string): T {
  if (!tracingStoreCalls()) return stub;
  return new Proxy(stub, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function" || typeof prop !== "string") return value;
      return (...args: unknown[]) => {
        const ended = storeCallStarted(store, region, prop);
        // Reflect.apply: on an RPC method stub, `.apply` would name a remote method.
        const result = Reflect.apply(value, target, args);
        Promise.resolve(result).then(ended, ended);
        return result;
      };
    },
  });
}

/**
 * The stub of a shard by the address a write-behind item carries (shard-refs.ts shardAddress: a mail
 * retry's audit shard): the address is checked to be one of `store`'s shards, never any object of
 * the namespace (durable-objects/contract/shard-address.ts, which the stores use too).
 */
export function shardNamed<S extends ShardedStore>(env: EnvWith<S>, store: S, address: string): StubOf<S> {
  return stubAt<StubOf<S>>(env, store, address);
}

function stubOf<S extends ShardedStore>(
  env: EnvWith<S>,
  store: S,
  name: string,
  jurisdiction?: Jurisdiction,
  hint?: LocationHint,
): StubOf<S> {
  return stubIn(env, store, name, jurisdiction, hint) as unknown as StubOf<S>;
}
