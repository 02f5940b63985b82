// Which Worker serves which paths of the issuer's host: the routes production deploys
// (scripts/deploy.mjs). Locally (`npm run dev`, `npm start`) the dev gateway dispatches by the same
// split, workers/shared/app/worker-routes.ts (`workerFor`); test/e2e/routes.test.ts checks that the two agree.

/** Paths per Worker. op-auth's are listed one by one so the local gateway can keep `/demo`. */
export const WORKER_PATHS = {
  "keyway-op-auth": [
    "/.well-known/*",
    "/authorize*",
    "/email-code/*",
    "/passkey/*",
    "/logout*",
    "/device*",
    "/register*",
    "/__dev/*",
  ],
  "keyway-op-token": ["/token*", "/userinfo*", "/revoke*", "/introspect*", "/jwks.json*", "/device_authorization*"],
  "keyway-op-mgmt": ["/admin/*", "/console", "/console/*"],
};

/** Production: op-auth also takes every other path on the host (Cloudflare picks the most specific route). */
export const PRODUCTION_ROUTES = { ...WORKER_PATHS, "keyway-op-auth": ["/*"] };
