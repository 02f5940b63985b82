/** Vite's `?raw` imports: a file's text (test/console/tenants.test.ts reads docs/cost.md's price table). */
declare module "*.md?raw" {
  const text: string;
  export default text;
}
