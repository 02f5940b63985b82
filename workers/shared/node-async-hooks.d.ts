// The one Node API Keyway's Workers use (nodejs_compat provides it in workerd); declared here rather
// than pulling @types/node, whose globals would clash with the Workers types.
declare module "node:async_hooks" {
  export class AsyncLocalStorage<T> {
    getStore(): T | undefined;
    run<R>(store: T, fn: () => R): R;
  }
}
