import { storeCallStarted, tracingStoreCalls } from "../../../durable-objects/contract/log";
import { STORE_BINDINGS } from "../../../durable-objects/contract/verbs";
import { type Jurisdiction, LOCATION_HINTS, type LocationHint } from "../config/regions";
import type { Env } from "../platform/env";
import { objectName, type ShardedStore, type ShardRef } from "./router";

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

const ADDRESS = /^(?:(eu|us|fedramp)\/)?(([a-z]+):(?:[a-z][a-z0-9]{1,7}:)?g\d{1,2}:s\d{1,4})(?:@([a-z]{2,4}))?$/;

/**
 * The stub of a shard by the address a write-behind item carries (router.ts shardAddress: a mail
 * retry's audit shard): the address is checked to be one of `store`'s shards, never any object of
 * the namespace.
 */
export function shardNamed<S extends ShardedStore>(env: EnvWith<S>, store: S, address: string): StubOf<S> {
  const m = ADDRESS.exec(address);
  if (!m || m[3] !== store || (m[4] && !(LOCATION_HINTS as readonly string[]).includes(m[4])))
    throw new Error(`${address} is not a ${store} shard`);
  return stubOf(env, store, m[2] as string, m[1] as Jurisdiction | undefined, m[4] as LocationHint | undefined);
}

function stubOf<S extends ShardedStore>(
  env: EnvWith<S>,
  store: S,
  name: string,
  jurisdiction?: Jurisdiction,
  hint?: LocationHint,
): StubOf<S> {
  let ns = (env as unknown as Env)[STORE_BINDINGS[store].binding] as unknown as DurableObjectNamespace;
  let prefix = "";
  if (jurisdiction) {
    const inside = withinJurisdiction(
      ns,
      jurisdiction,
      (env as { ENVIRONMENT?: unknown }).ENVIRONMENT === "production",
    );
    if (inside) ns = inside;
    else prefix = `${jurisdiction}/`;
  }
  return ns.get(ns.idFromName(`${prefix}${name}`), hint ? { locationHint: hint } : undefined) as unknown as StubOf<S>;
}

let jurisdictionsMissing = false;

/**
 * The namespace's jurisdictional subnamespace, or null in workerd, which has none ("Jurisdiction
 * restrictions are not implemented in workerd": local dev and tests). There a jurisdiction's objects
 * get names of their own (`eu/<name>`), so they stay apart from other regions' objects as they are
 * on Cloudflare. Any other failure is thrown, and so is this one in production (a self-hosted
 * workerd): an object is never placed outside its jurisdiction by a fallback.
 */
function withinJurisdiction(
  ns: DurableObjectNamespace,
  jurisdiction: Jurisdiction,
  production: boolean,
): DurableObjectNamespace | null {
  if (jurisdictionsMissing && !production) return null;
  try {
    return ns.jurisdiction(jurisdiction);
  } catch (err) {
    if (production || !(err instanceof Error && err.message.includes("not implemented in workerd"))) throw err;
    jurisdictionsMissing = true;
    return null;
  }
}
