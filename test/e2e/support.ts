import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import { generateSecrets } from "../../scripts/lib/local.mjs";
import { freePort, type Stack, startStack } from "../../scripts/stack.mjs";
import { E2E_BUNDLES } from "./bundles.js";

/**
 * End to end over real HTTP: the built Workers in one workerd behind the front door's (the `npm start`
 * runtime) on a free port, with fresh secrets and a temporary state folder. Each test file starts its own.
 */
export interface E2EStack {
  url: string;
  adminToken: string;
  /** The workerd processes: Keyway's, and the front door's (scripts/stack.mjs). */
  pids: Stack["pids"];
  dispose(): Promise<void>;
}

export async function startE2EStack(
  extraVars: Record<string, string> = {},
  /** Issue 42: the issuer on `localhost` (WebAuthn takes a domain as RP id, never an IP address). */
  opts: { localhost?: boolean } = {},
): Promise<E2EStack> {
  const tmp = mkdtempSync(join(tmpdir(), "keyway-e2e-"));
  const vars = { ...generateSecrets(), ...extraVars };
  let stack: Stack | undefined;
  const port = await freePort();
  try {
    stack = await startStack({
      port,
      ...(opts.localhost ? { issuer: `http://localhost:${port}` } : {}),
      persistTo: join(tmp, "state"),
      outDir: E2E_BUNDLES,
      vars,
      cronEverySeconds: false,
    });
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  const started = stack;
  return {
    url: started.url,
    adminToken: vars.ADMIN_TOKEN as string,
    pids: started.pids,
    async dispose() {
      await started.dispose();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/** What a browser keeps between the steps: cookies by name (one host, so no domain matching needed). */
export class CookieJar {
  private readonly cookies = new Map<string, string>();

  async fetch(url: string | URL, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.cookies.size) headers.set("Cookie", [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "));
    const res = await fetch(url, { ...init, headers, redirect: "manual" });
    for (const line of res.headers.getSetCookie()) {
      const [pair = "", ...attrs] = line.split(";");
      const eq = pair.indexOf("=");
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (value === "" || attrs.some((a) => /^\s*max-age=0\s*$/i.test(a))) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return res;
  }

  postJson(url: string, body: unknown): Promise<Response> {
    return this.fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
    });
  }
}

/** A tenant of the running stack (issue 23): its issuer is `<origin>/t/<id>`. */
export async function createE2ETenant(stack: E2EStack, tag: string): Promise<{ id: string; issuer: string }> {
  const id = `${tag}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
  const res = await fetch(`${stack.url}/admin/v1/tenants`, {
    method: "POST",
    headers: { Authorization: `Bearer ${stack.adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify({ id, name: `E2E ${tag}` }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { id: string; issuer: string };
}

/** Registers a client at the default tenant, or at `tenant`'s admin routes. */
export async function registerE2EClient(
  stack: E2EStack,
  client: Record<string, unknown>,
  tenant?: string,
): Promise<{ client_id: string; client_secret?: string }> {
  const res = await fetch(`${stack.url}/admin/v1${tenant ? `/tenants/${tenant}` : ""}/clients`, {
    method: "POST",
    headers: { Authorization: `Bearer ${stack.adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify(client),
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { client_id: string; client_secret?: string };
}

/**
 * Steps 1-4 of the login as a person's browser with an API front end would take them (CONTRACT §2):
 * the authorization request, the emailed code (read from the dev mailbox), its check, and the
 * redirect back to the client, whose URL is returned for the RP library to process.
 */
export async function signInWithEmailCode(
  stack: Pick<E2EStack, "url">,
  authorizationUrl: URL,
  email: string,
  issuer = stack.url,
): Promise<URL> {
  const browser = new CookieJar();
  const init = await browser.fetch(authorizationUrl, { headers: { Accept: "application/json" } });
  expect(init.status, await init.clone().text()).toBe(200);
  const { tx } = (await init.json()) as { tx: string };

  const generate = await browser.postJson(`${issuer}/email-code/generate`, { tx, email });
  expect(generate.status, await generate.clone().text()).toBe(200);
  const mailbox = await fetch(`${issuer}/__dev/mailbox/${encodeURIComponent(email)}`);
  expect(mailbox.status).toBe(200);
  const { messages } = (await mailbox.json()) as { messages: { code: string }[] };
  const code = messages[0]?.code;
  expect(code).toMatch(/^\d{6}$/);

  const verify = await browser.postJson(`${issuer}/email-code/verify`, { tx, email, code });
  expect(verify.status, await verify.clone().text()).toBe(200);
  const { redirect_to } = (await verify.json()) as { redirect_to: string };

  const finish = await browser.fetch(redirect_to);
  expect(finish.status, await finish.clone().text()).toBe(302);
  return new URL(finish.headers.get("location") ?? "");
}
