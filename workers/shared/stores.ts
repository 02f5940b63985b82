import type { StoreName } from "./config";
import type { Env } from "./env";
import { objectName, type ShardRef } from "./sharding";

const BINDING = {
  session: "SESSIONS",
  challenge: "CHALLENGES",
  code: "AUTH_CODES",
  revocation: "REVOCATIONS",
  refresh: "REFRESH_TOKENS",
} as const;

type Binding = (typeof BINDING)[keyof typeof BINDING];
type StubOf<S extends StoreName> =
  Env[(typeof BINDING)[S]] extends DurableObjectNamespace<infer T> ? DurableObjectStub<T> : never;

/** The stub of the shard `ref` names. Ids map to objects by name, so the mapping never changes. */
export function shard<S extends StoreName>(env: Env, store: S, ref: ShardRef): StubOf<S> {
  if (ref.store !== store) throw new Error(`a ${ref.store} route cannot reach the ${store} store`);
  const ns = env[BINDING[store] as Binding] as unknown as DurableObjectNamespace;
  return ns.get(ns.idFromName(objectName(ref))) as unknown as StubOf<S>;
}
