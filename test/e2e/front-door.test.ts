import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CookieJar, type E2EStack, startE2EStack } from "./support.js";

// Issue 44 item 3: `npm start` refuses new logins past the bound at its front door, a workerd process
// of its own (workers/dev-gateway/front-door.ts), so a refusal never waits on Keyway's busy thread.

let stack: E2EStack;
beforeAll(async () => {
  stack = await startE2EStack({
    POLICY: JSON.stringify({ max_logins_under_way: 2, login_burst: 0, login_slot_seconds: 60 }),
  });
}, 120_000);
afterAll(() => stack?.dispose(), 60_000);

const S256 = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const loginUrl = (clientId = "keyway-demo") =>
  `${stack.url}/authorize?${new URLSearchParams({
    client_id: clientId,
    response_type: "code",
    redirect_uri: `${stack.url}/demo/callback`,
    scope: "openid",
    code_challenge: S256,
    code_challenge_method: "S256",
  })}`;
const asApi = () => ({ headers: { Accept: "application/json" }, signal: AbortSignal.timeout(20_000) });

/** A new login as a browser begins it: its jar and transaction. */
async function begin(): Promise<{ browser: CookieJar; tx: string }> {
  const browser = new CookieJar();
  const res = await browser.fetch(loginUrl(), asApi());
  expect(res.status, await res.clone().text()).toBe(200);
  return { browser, tx: ((await res.json()) as { tx: string }).tx };
}

/** The rest of a login begun: the code sent, read, checked, and its `redirect_to` followed. */
async function finish({ browser, tx }: { browser: CookieJar; tx: string }, email: string): Promise<void> {
  expect((await browser.postJson(`${stack.url}/email-code/generate`, { tx, email })).status).toBe(200);
  const mail = (await (await fetch(`${stack.url}/__dev/mailbox/${encodeURIComponent(email)}`)).json()) as {
    messages: { code: string }[];
  };
  const verify = await browser.postJson(`${stack.url}/email-code/verify`, { tx, email, code: mail.messages[0]?.code });
  expect(verify.status, await verify.clone().text()).toBe(200);
  const { redirect_to } = (await verify.json()) as { redirect_to: string };
  expect((await browser.fetch(redirect_to)).status).toBe(302);
}

describe("the front door of the local runtime (issue 44 item 3)", () => {
  it("refuses a new login past the bound while Keyway's own process is stopped, and counts places as op-auth does", async () => {
    expect(stack.pids.front).toHaveLength(1);
    expect(stack.pids.keyway).toHaveLength(1);
    const first = await begin();
    await begin();

    // Keyway's workerd stopped: whatever answers now is the front door alone.
    for (const pid of stack.pids.keyway) process.kill(pid, "SIGSTOP");
    let refused: Response;
    try {
      refused = await fetch(loginUrl(), asApi());
    } finally {
      for (const pid of stack.pids.keyway) process.kill(pid, "SIGCONT");
    }
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(refused.headers.get("cache-control")).toBe("no-store");
    expect(refused.headers.get("x-request-id")).toBeTruthy();
    expect(await refused.json()).toMatchObject({ error: "temporarily_unavailable" });

    // A login's redirect_to frees its place; a request that began no login (an unknown client: an
    // error page) takes one and gives it back. So the next login is admitted, and the one after is not.
    await finish(first, `front-${Date.now()}@example.com`);
    const unknown = await fetch(loginUrl("no-such-client"), asApi());
    expect(unknown.status).toBe(400);
    await begin();
    expect((await fetch(loginUrl(), asApi())).status).toBe(503);
  }, 60_000);
});
