// The Node APIs Keyway's Workers use (nodejs_compat provides them in workerd); declared here rather
// than pulling @types/node, whose globals would clash with the Workers types.
declare module "node:async_hooks" {
  export class AsyncLocalStorage<T> {
    getStore(): T | undefined;
    run<R>(store: T, fn: () => R): R;
  }
}

declare module "node:crypto" {
  interface Hmac {
    update(data: string): Hmac;
    digest(): Uint8Array;
  }
  /** Synchronous, unlike WebCrypto: an id is checked where it is parsed, without an await. */
  export function createHmac(algorithm: "sha256", key: string): Hmac;
}
