import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { httpVars, received } from "../mail/support";
import { Browser, call, pkce, registerClient, uniqueEmail, withVars } from "../support/harness";

const DOMAIN = "loadtest.keyway.test";

async function sendCode(testEnv: ReturnType<typeof withVars>, email: string) {
  const client = await registerClient();
  const browser = new Browser({ env: testEnv });
  const tx = await browser.startLogin(client, (await pkce()).challenge);
  const res = await browser.postJson("/email-code/generate", { tx, email });
  expect(res.status).toBe(200);
}

const testMailbox = (email: string, testEnv: object, token: string = env.ADMIN_TOKEN) =>
  call(
    `/admin/v1/test-mailbox/${encodeURIComponent(email)}`,
    { headers: { Authorization: `Bearer ${token}` } },
    testEnv,
  );

describe("the load-test mailbox (k6 on a deployment)", () => {
  it("captures mail to the load-test domain instead of sending it, and serves it to the admin only", async () => {
    // A real transport (the fake Resend API of the test setup), with the load-test domain configured.
    const loadEnv = withVars(httpVars({ LOADTEST_EMAIL_DOMAIN: DOMAIN }));
    const email = uniqueEmail("k6").replace("@example.com", `@${DOMAIN}`);
    await sendCode(loadEnv, email);

    const res = await testMailbox(email, loadEnv);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const { messages } = (await res.json()) as { messages: { to: string; code: string }[] };
    expect(messages).toHaveLength(1);
    expect(messages[0]?.to).toBe(email);
    expect(messages[0]?.code).toMatch(/^\d{6}$/);
    // Nothing reached the provider for that address.
    expect(await received(email)).toEqual([]);

    expect((await testMailbox(email, loadEnv, "wrong-token-wrong-token-wrong-token")).status).toBe(401);
  });

  it("does not exist for other addresses, nor without a configured domain", async () => {
    const loadEnv = withVars({ LOADTEST_EMAIL_DOMAIN: DOMAIN });
    const outside = uniqueEmail("real");
    await sendCode(loadEnv, outside);
    expect((await testMailbox(outside, loadEnv)).status).toBe(404);
    expect((await testMailbox(`someone@${DOMAIN}`, env)).status).toBe(404);
  });

  it("accepts only a reserved domain, so no real address can be captured", async () => {
    const res = await call("/.well-known/openid-configuration", {}, withVars({ LOADTEST_EMAIL_DOMAIN: "example.com" }));
    expect(res.status).toBe(503);
  });
});
