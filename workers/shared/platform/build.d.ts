/**
 * `false` in a production build (scripts/deploy.mjs sets it with wrangler's `define`); undefined
 * everywhere else (npm start, npm run dev, the tests). Read it only as
 * `typeof __KEYWAY_DEV__ === "undefined" || __KEYWAY_DEV__`, inline: esbuild folds that expression
 * to `false` and drops the branch, and with it any module only that branch used, so dev-only routes
 * and headers are not in a production bundle at all (scripts/deploy-check.mjs looks).
 */
declare const __KEYWAY_DEV__: boolean | undefined;
