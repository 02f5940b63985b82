import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { MailOutbox } from "../../durable-objects/mail-outbox";
import { loadConfig } from "../../workers/shared/config/config";
import { auditEmailKey } from "../../workers/shared/events/audit";
import { outboxShardName } from "../../workers/shared/events/otp-mail";
import {
  Browser,
  comparableHeaders,
  generateWithContext,
  mailbox,
  pkce,
  policy,
  registerClient,
  sql,
  type TestEnv,
  withVars,
  writeBehindStub,
} from "../support/harness";
import { address, codeIn, httpVars, type ReceivedHttp, received } from "./support";

// Checklist H4: a failing or slow provider. The user gets the answer a working one gives; the code
// goes out later from the MailOutbox's alarm, a bounded number of times, and is never replaced.

const config = loadConfig(env);

async function outboxOf(email: string) {
  const name = outboxShardName(config, "global", await auditEmailKey(config, email));
  const stub = env.MAIL_OUTBOX.get(env.MAIL_OUTBOX.idFromName(name)) as DurableObjectStub<MailOutbox>;
  // The store Worker's own transport in tests is the dev mailbox; aim this outbox at the failing API.
  await runInDurableObject(stub, (instance: MailOutbox) => {
    (instance as unknown as { mailEnv: object }).mailEnv = { ...env, ...httpVars() };
  });
  return stub;
}

const storedText = (stub: DurableObjectStub<MailOutbox>) =>
  sql(stub, "SELECT * FROM outbox").then((rows) => JSON.stringify(rows));

/** Comparable parts of an EmailCodeGenerate answer. */
async function answer(res: Response) {
  const headers = comparableHeaders(res);
  return { status: res.status, body: await res.text(), headers };
}

async function generate(testEnv: TestEnv, email: string) {
  const client = await registerClient();
  const browser = new Browser({ env: testEnv });
  const tx = await browser.startLogin(client, (await pkce()).challenge);
  const res = await browser.postJson("/email-code/generate", { tx, email });
  return { browser, tx, res };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("mail retries from the MailOutbox (checklist H4)", () => {
  it("answers as on success, retries with backoff from the alarm, and delivers the same code", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const testEnv = withVars(httpVars());
    const ok = await generate(testEnv, address());
    const email = address("fail2"); // the first two attempts fail with 503
    const failing = await generate(testEnv, email);
    expect(await answer(failing.res)).toEqual(await answer(ok.res));
    expect(await received(email)).toEqual([]);

    const outbox = await outboxOf(email);
    let [pending] = await outbox.pending();
    expect(pending).toMatchObject({ attempts: 1, max_attempts: 5, retry_ms: 10_000 });
    const sealed = await storedText(outbox);

    // Not due yet: the alarm leaves it alone.
    await runDurableObjectAlarm(outbox);
    expect(await outbox.pending()).toMatchObject([{ attempts: 1 }]);

    // Second attempt (503 again): the next one waits three times longer.
    vi.setSystemTime(pending?.next_at as number);
    expect(await runDurableObjectAlarm(outbox)).toBe(true);
    [pending] = await outbox.pending();
    expect(pending?.attempts).toBe(2);
    expect((pending?.next_at as number) - Date.now()).toBe(30_000);
    expect(await received(email)).toEqual([]);

    // Third attempt goes through.
    vi.setSystemTime(pending?.next_at as number);
    await runDurableObjectAlarm(outbox);
    expect(await outbox.pending()).toEqual([]);
    const got = (await received(email)) as ReceivedHttp[];
    expect(got).toHaveLength(1);
    const code = codeIn((got[0] as ReceivedHttp).body.text);
    expect(sealed).not.toContain(code); // the outbox held the message sealed, never the code
    expect(sealed).not.toContain(email);

    // It is the code of the challenge: the login finishes with it (no second code was made).
    const ver = await failing.browser.postJson("/email-code/verify", { tx: failing.tx, email, code });
    expect(ver.status, await ver.clone().text()).toBe(200);
  });

  it("gives up after the bounded number of attempts", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const email = address("failall");
    const { res } = await generate(withVars({ ...httpVars(), POLICY: policy({ mail_attempts: 3 }) }), email);
    expect(res.status).toBe(200);
    const outbox = await outboxOf(email);
    for (const attempts of [2, 3]) {
      const [pending] = await outbox.pending();
      expect(pending?.attempts).toBe(attempts - 1);
      vi.setSystemTime(pending?.next_at as number);
      await runDurableObjectAlarm(outbox);
    }
    expect(await outbox.pending()).toEqual([]);
    expect(await runInDurableObject(outbox, (_i, state) => state.storage.getAlarm())).toBeNull();
    expect(await received(email)).toEqual([]);
  });

  it("does not retry what the provider refuses for good", async () => {
    const email = address("reject");
    const { res } = await generate(withVars(httpVars()), email);
    expect(res.status).toBe(200);
    expect(await (await outboxOf(email)).pending()).toEqual([]);
  });

  it("never delays the login response for a slow provider; the outbox takes over after the timeout", async () => {
    const testEnv = withVars({ ...httpVars(), POLICY: policy({ mail_timeout_seconds: 1 }) });
    const email = address("slow2500");
    const client = await registerClient();
    const browser = new Browser({ env: testEnv });
    const tx = await browser.startLogin(client, (await pkce()).challenge);

    const started = performance.now();
    const { response, afterResponse } = generateWithContext(testEnv, browser, tx, email);
    const res = await response;
    const answered = performance.now() - started;
    expect(res.status).toBe(200);
    expect(answered).toBeLessThan(900); // before the 1 s mail timeout, let alone the 2.5 s provider
    await afterResponse();
    expect(performance.now() - started).toBeGreaterThanOrEqual(900);

    // The first attempt was abandoned and handed over, to be retried with the same idempotency key.
    const [pending] = await (await outboxOf(email)).pending();
    expect(pending?.attempts).toBe(1);
  });

  it("keeps captured mail and its code in one call: when that call fails, neither exists and the answer is 503", async () => {
    const email = address("capturefails");
    // The email's ChallengeStore refuses the call (an overloaded object), as Cloudflare reports it.
    const refusing = new Proxy(env.CHALLENGES, {
      get(target, prop) {
        if (prop !== "get") return Reflect.get(target, prop).bind(target);
        return (id: DurableObjectId) =>
          new Proxy(target.get(id), {
            get: (stub, name) =>
              name === "issueChallenge"
                ? () => Promise.reject(Object.assign(new Error("Durable Object is overloaded."), { overloaded: true }))
                : Reflect.get(stub, name),
          });
      },
    });
    const testEnv = { ...env, CHALLENGES: refusing } as TestEnv;
    const client = await registerClient();
    const browser = new Browser({ env: testEnv });
    const tx = await browser.startLogin(client, (await pkce()).challenge);
    const { response, afterResponse } = generateWithContext(testEnv, browser, tx, email);
    const res = await response;
    await afterResponse();
    expect(res.status).toBe(503);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await mailbox(email)).toEqual([]);
    // Nothing was handed to the retry outbox either: there is no code to send.
    const key = await auditEmailKey(config, email);
    for (let s = 0; s < 4; s++)
      expect(await sql(writeBehindStub("mail", s), "SELECT key FROM outbox WHERE key = ?", key)).toEqual([]);
  });
});
