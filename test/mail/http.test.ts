import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { loadMailConfig } from "../../workers/shared/config/mail-settings";
import { HttpTransport } from "../../workers/shared/events/mail/http";
import { Browser, pkce, registerClient, withVars } from "../support/harness";
import { address, codeIn, failure, httpVars, peers, type ReceivedHttp, received } from "./support";

const transport = (vars: Record<string, string> = {}) =>
  new HttpTransport(loadMailConfig({ ...env, ...httpVars(vars) }));
const message = (to: string) => ({
  to,
  code: "318275",
  expiresInSeconds: 300,
  issuerName: "Keyway",
  issuer: env.ISSUER,
});

describe("HTTP transport (Resend's POST /emails, against a local server that checks requests as Resend documents them)", () => {
  it("delivers a login's code: bearer key, JSON body with from, to, subject, text and html; the code works", async () => {
    const client = await registerClient();
    const browser = new Browser({ env: withVars(httpVars({ MAIL_FROM: "login@keyway.test" })) });
    const email = address();
    const tx = await browser.startLogin(client, (await pkce()).challenge);
    const gen = await browser.postJson("/email-code/generate", { tx, email });
    expect(gen.status).toBe(200);

    const got = (await received(email)) as ReceivedHttp[];
    expect(got).toHaveLength(1);
    const { headers, body } = got[0] as ReceivedHttp;
    expect(headers.authorization).toBe(`Bearer ${peers().apiKey}`);
    expect(headers["content-type"]).toBe("application/json");
    expect(headers["idempotency-key"]).toMatch(/^[A-Za-z0-9_-]{16,256}$/);
    expect(body.from).toBe('"Keyway" <login@keyway.test>');
    expect(body.to).toEqual([email]);
    const code = codeIn(body.text);
    expect(body.subject).toBe(`${code} is your Keyway sign-in code`);
    expect(body.text).toMatch(/expires 5 minutes after it was requested, at \d\d:\d\d UTC/);
    expect(body.text).toMatch(/did not request this code/);
    expect(body.html).toMatch(new RegExp(`font-size:36px[^>]*>${code}</p>`));
    expect(body.headers).toEqual({ "Auto-Submitted": "auto-generated", "X-Auto-Response-Suppress": "All" });

    const ver = await browser.postJson("/email-code/verify", { tx, email, code });
    expect(ver.status, await ver.clone().text()).toBe(200);
  });

  it("retries 5xx and 429 answers, not other 4xx ones; a wrong API key is not retried", async () => {
    expect((await failure(transport().send(message(address("fail1"))))).permanent).toBe(false);
    const refused = await failure(transport().send(message(address("reject"))));
    expect(refused.permanent).toBe(true);
    expect(refused.message).toMatch(/422/);
    const key = await failure(transport({ MAIL_API_KEY: "re_wrong_key_123" }).send(message(address())));
    expect(key.permanent).toBe(true);
    expect(key.message).toMatch(/403/);
  });

  it("sends the same idempotency key on a retry, so the provider sends one mail", async () => {
    const to = address();
    const t = transport();
    await t.send(message(to), { idempotencyKey: "kw-test-retry-1" + to });
    await t.send(message(to), { idempotencyKey: "kw-test-retry-1" + to });
    expect(await received(to)).toHaveLength(1);
  });

  it("gives up on a slow provider when the caller's deadline passes", async () => {
    const controller = new AbortController();
    const pending = transport().send(message(address("slow3000")), { signal: controller.signal });
    setTimeout(() => controller.abort(), 100);
    const err = await failure(pending);
    expect(err.message).toMatch(/timed out/);
    expect(err.permanent).toBe(false);
  });
});
