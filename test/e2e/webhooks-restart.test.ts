import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, describe, expect, it } from "vitest";
import { generateSecrets } from "../../scripts/lib/local.mjs";
import { freePort, type Stack, startStack } from "../../scripts/stack.mjs";
import { E2E_BUNDLES } from "./bundles.js";
import { signInWithEmailCode } from "./support.js";

// Issue 25: no webhook message is lost when the whole stack stops (workerd killed) while a receiver
// is down: sign-ins made before the stop, some still in their store's audit outbox and some queued for
// delivery, all reach the receiver after a restart on the same state folder, each verified.

const tmp = mkdtempSync(join(tmpdir(), "keyway-e2e-hooks-"));
const vars: Record<string, string> = {
  ...generateSecrets(),
  POLICY: JSON.stringify({ ip_generate_per_minute: 1000, ip_verify_per_minute: 1000 }),
};
let stack: Stack | undefined;
let receiver: Server | undefined;

afterAll(async () => {
  await stack?.dispose();
  await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
  rmSync(tmp, { recursive: true, force: true });
});

describe("webhooks across a restart of the stack (issue 25)", () => {
  it("delivers every sign-in made before a stop, once the stack is back and the receiver is up", async () => {
    let up = false;
    const delivered = new Map<string, string>();
    let secret = "";
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        if (!up) return void res.writeHead(503).end();
        const event = new Webhook(secret).verify(Buffer.concat(chunks).toString("utf8"), {
          "webhook-id": String(req.headers["webhook-id"]),
          "webhook-timestamp": String(req.headers["webhook-timestamp"]),
          "webhook-signature": String(req.headers["webhook-signature"]),
        }) as { type: string; data: { user_id: string } };
        delivered.set(String(req.headers["webhook-id"]), event.data.user_id);
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => receiver?.listen(0, "127.0.0.1", () => r()));
    const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;

    const port = await freePort();
    const start = () =>
      startStack({ port, persistTo: join(tmp, "state"), outDir: E2E_BUNDLES, vars, cronEverySeconds: false });
    stack = await start();
    const admin = (path: string, init: RequestInit = {}) =>
      fetch(`${stack?.url}/admin/v1${path}`, {
        ...init,
        headers: { Authorization: `Bearer ${vars.ADMIN_TOKEN}`, "Content-Type": "application/json" },
      });
    const created = await admin("/webhooks", {
      method: "POST",
      body: JSON.stringify({ url: hookUrl, events: ["user.signed_in"] }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    secret = ((await created.json()) as { secret: string }).secret;
    // The stores read a tenant's endpoints at most every 5 s.
    await new Promise((r) => setTimeout(r, 5_500));

    const client = await admin("/clients", {
      method: "POST",
      body: JSON.stringify({
        client_name: "hooks e2e",
        redirect_uris: ["https://rp.example.com/cb"],
        token_endpoint_auth_method: "none",
      }),
    });
    const { client_id } = (await client.json()) as { client_id: string };
    const signIns = 6;
    for (let i = 0; i < signIns; i++) {
      const url = new URL(`${stack.url}/authorize`);
      url.search = new URLSearchParams({
        response_type: "code",
        client_id,
        redirect_uri: "https://rp.example.com/cb",
        scope: "openid",
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        code_challenge_method: "S256",
        state: `s${i}`,
      }).toString();
      await signInWithEmailCode({ url: stack.url }, url, `hook${i}-${Date.now()}@example.com`);
      // Spread over the flush delay: some still in an outbox at the stop, some already queued.
      await new Promise((r) => setTimeout(r, 1_500));
    }
    expect(delivered.size).toBe(0);

    // workerd stops; the state folder stays. Then the stack comes back on it, and the receiver is up.
    await stack.dispose();
    stack = await start();
    up = true;
    const deadline = Date.now() + 90_000;
    while (delivered.size < signIns && Date.now() < deadline) await new Promise((r) => setTimeout(r, 1_000));
    expect(delivered.size).toBe(signIns);
    expect(new Set(delivered.values()).size).toBe(signIns);
  }, 180_000);
});
