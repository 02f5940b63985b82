import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { Browser, call, pkce, registerClient, withVars } from "../support/harness";
import { address, codeIn } from "./support";

describe("send_email transport (Cloudflare Email Service binding; Miniflare's local binding in tests)", () => {
  it("hands the message to the binding, which accepts it; the code works", async () => {
    const sent: { message: Record<string, unknown>; result: unknown }[] = [];
    // The real local binding behind a recorder, so the test sees what was handed over.
    const recorder = {
      async send(message: Record<string, unknown>) {
        const result = await env.SEND_EMAIL?.send(message as never);
        sent.push({ message, result });
        return result;
      },
    };
    const testEnv = {
      ...withVars({ MAIL_TRANSPORT: "send_email", MAIL_FROM: "login@keyway.test" }),
      SEND_EMAIL: recorder,
    };
    const client = await registerClient();
    const browser = new Browser({ env: testEnv as never });
    const email = address();
    const tx = await browser.startLogin(client, (await pkce()).challenge);
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);

    expect(sent).toHaveLength(1);
    const { message, result } = sent[0] as { message: Record<string, string>; result: { messageId: string } };
    expect(result.messageId).toBeTruthy();
    expect(message.from).toEqual({ email: "login@keyway.test", name: "Keyway" });
    expect(message.to).toBe(email);
    const code = codeIn(message.text as string);
    expect(message.subject).toBe(`${code} is your Keyway sign-in code`);
    expect(message.html).toContain(code);
    const ver = await browser.postJson("/email-code/verify", { tx, email, code });
    expect(ver.status).toBe(200);
  });

  it("is refused at start-up when the SEND_EMAIL binding is missing", async () => {
    const testEnv = { ...withVars({ MAIL_TRANSPORT: "send_email" }), SEND_EMAIL: undefined };
    const res = await call("/.well-known/openid-configuration", {}, testEnv);
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBeTruthy();
  });
});
