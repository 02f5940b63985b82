import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { generateSecrets } from "../../scripts/lib/local.mjs";
import { freePort, startStack } from "../../scripts/stack.mjs";

/**
 * `npm start`'s stack (scripts/stack.mjs) serves nothing until its database is migrated and seeded,
 * and an unwritable state folder stops it at once with a message that names the folder and the fix
 * (issue 27 item 18).
 */

const tmp = mkdtempSync(join(tmpdir(), "keyway-start-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("npm start's stack", () => {
  it("answers nothing on the issuer's port before it is ready, and the seeded demo client once it is", async () => {
    const port = await freePort();
    let resolved = false;
    const starting = startStack({
      port,
      persistTo: join(tmp, "state"),
      outDir: join(tmp, "dist"),
      vars: generateSecrets(),
      cronEverySeconds: false,
    }).finally(() => {
      resolved = true;
    });
    const early: number[] = [];
    while (!resolved) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/.well-known/openid-configuration`);
        if (!resolved) early.push(res.status);
      } catch {
        // Not listening yet: as it should be.
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    const stack = await starting;
    try {
      expect(early).toEqual([]);
      expect((await fetch(`${stack.url}/.well-known/openid-configuration`)).status).toBe(200);
      // The demo client was seeded before the port opened.
      const demo = await fetch(`${stack.url}/demo/login`, { redirect: "manual" });
      expect(demo.status).toBe(302);
    } finally {
      await stack.dispose();
    }
  });

  it("stops at once on a state folder it cannot write, naming the folder and the fix", async () => {
    const file = join(tmp, "not-a-folder");
    writeFileSync(file, "");
    await expect(
      startStack({
        port: await freePort(),
        persistTo: join(file, "state"),
        outDir: join(tmp, "dist2"),
        vars: generateSecrets(),
        cronEverySeconds: false,
        build: false,
      }),
    ).rejects.toThrow(/state folder .*not-a-folder\/state cannot be written .*make it writable/);
  });
});
