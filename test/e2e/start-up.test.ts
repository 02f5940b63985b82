import { cpSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { generateSecrets } from "../../scripts/lib/local.mjs";
import { buildFingerprint, freePort, startStack } from "../../scripts/stack.mjs";
import { E2E_BUNDLES } from "./bundles.js";

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
      outDir: E2E_BUNDLES,
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

  it("a restart on unchanged sources reuses the bundles and keeps the state (issue 38 item 12)", async () => {
    // A copy of the e2e bundles (made once, current): this test bundles only once, for the stale case.
    const outDir = join(tmp, "dist-restart");
    cpSync(E2E_BUNDLES, outDir, { recursive: true });
    const persistTo = join(tmp, "state-restart");
    const vars = generateSecrets();
    const start = async () => startStack({ port: await freePort(), persistTo, outDir, vars, cronEverySeconds: false });
    const first = await start();
    let clientId: string;
    try {
      expect(first.built).toBe(false);
      const made = await fetch(`${first.url}/admin/v1/clients`, {
        method: "POST",
        headers: { Authorization: `Bearer ${vars.ADMIN_TOKEN}`, "Content-Type": "application/json" },
        body: JSON.stringify({
          client_name: "survives a restart",
          redirect_uris: ["https://rp.example.com/cb"],
          token_endpoint_auth_method: "none",
        }),
      });
      expect(made.status).toBe(201);
      clientId = ((await made.json()) as { client_id: string }).client_id;
    } finally {
      await first.dispose();
    }
    const bundle = join(outDir, "keyway-op-auth", "index.js");
    const bundledAt = statSync(bundle).mtimeMs;
    expect(readFileSync(join(outDir, ".build-fingerprint"), "utf8")).toBe(buildFingerprint());
    const second = await start();
    try {
      expect(second.built).toBe(false);
      expect(statSync(bundle).mtimeMs).toBe(bundledAt);
      const read = await fetch(`${second.url}/admin/v1/clients/${clientId}`, {
        headers: { Authorization: `Bearer ${vars.ADMIN_TOKEN}` },
      });
      expect(read.status).toBe(200);
    } finally {
      await second.dispose();
    }
    // A fingerprint that no longer matches (a source changed) bundles again.
    writeFileSync(join(outDir, ".build-fingerprint"), "stale");
    const third = await start();
    try {
      expect(third.built).toBe(true);
    } finally {
      await third.dispose();
    }
  }, 180_000);

  it("serves the issuer a TLS front names (ISSUER), and refuses one that is not an https origin", async () => {
    const port = await freePort();
    const options = { port, persistTo: join(tmp, "state-issuer"), outDir: E2E_BUNDLES, vars: generateSecrets() };
    for (const bad of ["http://op.test", "https://op.test/path", "not a url"])
      await expect(startStack({ ...options, issuer: bad, cronEverySeconds: false })).rejects.toThrow(/ISSUER/);
    const stack = await startStack({ ...options, issuer: "https://op.test:8443", cronEverySeconds: false });
    try {
      expect(stack.url).toBe("https://op.test:8443");
      const doc = (await (
        await fetch(`http://127.0.0.1:${port}/.well-known/openid-configuration`, { headers: { Host: "op.test:8443" } })
      ).json()) as { issuer: string; token_endpoint: string };
      expect(doc).toMatchObject({ issuer: "https://op.test:8443", token_endpoint: "https://op.test:8443/token" });
    } finally {
      await stack.dispose();
    }
  }, 120_000);
});
