import { type Jurisdiction, LOCATION_HINTS, type LocationHint } from "./places";
import { STORE_BINDINGS } from "./verbs";

/**
 * A shard by its address, as a write-behind item or a row carries it (a mail retry's audit shard, a
 * webhook endpoint's queue, a user's entity shard, a challenge's home):
 * `[<jurisdiction>/]<object name>[@<hint>]`, the form workers/shared/routing/shard-refs.ts shardAddress
 * writes. Both sides reach shards this way, so it lives in the contract: a Worker through
 * workers/shared/routing/stores.ts (typed by its Env), a store through `stubAt` with its own binding.
 */

export type StoreKey = keyof typeof STORE_BINDINGS;

const ADDRESS = /^(?:(eu|us|fedramp)\/)?(([a-z]+):(?:[a-z][a-z0-9]{1,7}:)?g\d{1,2}:s\d{1,4})(?:@([a-z]{2,4}))?$/;

/**
 * The stub of the shard `address` names, in `store`'s namespace (its STORE_BINDINGS binding in
 * `env`): the address is checked to be one of `store`'s shards, never any object of the namespace.
 * `T` is the caller's view of the object (a store class, or the verbs it calls).
 */
export function stubAt<T>(env: object, store: StoreKey, address: string): T {
  const m = ADDRESS.exec(address);
  if (!m || m[3] !== store || (m[4] && !(LOCATION_HINTS as readonly string[]).includes(m[4])))
    throw new Error(`${address} is not a ${store} shard`);
  return stubIn(env, store, m[2] as string, m[1] as Jurisdiction | undefined, m[4] as LocationHint | undefined) as T;
}

/**
 * The stub of object `name` of `store`. A region's objects are created in its jurisdiction (they
 * never leave it) and with its location hint (honoured when an object is first created; an existing
 * object stays where it is).
 */
export function stubIn(
  env: object,
  store: StoreKey,
  name: string,
  jurisdiction?: Jurisdiction,
  hint?: LocationHint,
): DurableObjectStub {
  let ns = (env as Record<string, unknown>)[STORE_BINDINGS[store].binding] as DurableObjectNamespace;
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
  return ns.get(ns.idFromName(`${prefix}${name}`), hint ? { locationHint: hint } : undefined);
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
