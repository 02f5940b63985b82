import { abortAllDurableObjects, env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import {
  Browser,
  call,
  fullLogin,
  latestCode,
  loginForCode,
  pkce,
  redeem,
  registerClient,
  type TestEnv,
  uniqueEmail,
  userinfo,
} from "../support/harness";

/**
 * Fault injection: the real bindings, wrapped so that chosen calls fail the way the platform reports
 * failures (a Durable Object's `overloaded` error, D1's D1_ERROR). Nothing else is replaced.
 */
function overloadedNamespace(real: DurableObjectNamespace): DurableObjectNamespace {
  return new Proxy(real, {
    get(target, prop) {
      if (prop !== "get") return Reflect.get(target, prop).bind?.(target) ?? Reflect.get(target, prop);
      return () =>
        new Proxy(
          {},
          {
            get() {
              return () => {
                const err = new Error("Durable Object is overloaded. Too many requests queued.");
                Object.assign(err, { overloaded: true, retryable: false });
                return Promise.reject(err);
              };
            },
          },
        );
    },
  });
}

function unavailableD1(): D1Database {
  const fail = () => Promise.reject(new Error("D1_ERROR: Network connection lost."));
  const statement = { bind: () => statement, first: fail, all: fail, run: fail, raw: fail };
  return { prepare: () => statement, batch: fail, exec: fail } as unknown as D1Database;
}

const faulty = (overrides: Partial<Record<string, unknown>>) => ({ ...env, ...overrides }) as TestEnv;

describe("faults (checklist H1-H3)", () => {
  it("H1: a Durable Object reset between every step loses nothing and issues nothing twice", async () => {
    const client = await registerClient();
    const email = uniqueEmail("reset");
    const browser = new Browser();
    const { verifier, challenge } = await pkce();
    const tx = await browser.startLogin(client, challenge);
    await abortAllDurableObjects();
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    await abortAllDurableObjects();
    const code = await latestCode(email);
    const verify = await browser.postJson("/email-code/verify", { tx, email, code });
    expect(verify.status).toBe(200);
    await abortAllDurableObjects();
    // The code was consumed before the reset: it does not work a second time.
    const again = await browser.postJson("/email-code/verify", { tx, email, code });
    expect(again.status).toBe(400);
    const { redirect_to } = (await verify.json()) as { redirect_to: string };
    const fin = await browser.fetch(redirect_to);
    expect(fin.status).toBe(302);
    const authCode = new URL(fin.headers.get("location") as string).searchParams.get("code") as string;
    await abortAllDurableObjects();
    const tokens = await redeem(client, authCode, verifier);
    expect(tokens.status).toBe(200);
    await abortAllDurableObjects();
    // Still single use after a reset, and the reuse revokes the first redemption's tokens.
    expect((await redeem(client, authCode, verifier)).status).toBe(400);
    const { access_token } = (await tokens.json()) as { access_token: string };
    expect((await userinfo(access_token)).status).toBe(401);
  });

  it("H2: an overloaded Durable Object answers 503 with Retry-After, at once and without retrying", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    // AuthorizeInit touches no store (the transaction is sealed); the first store call is the code's.
    const overloaded = faulty({
      CHALLENGES: overloadedNamespace(env.CHALLENGES as unknown as DurableObjectNamespace),
    });
    const browser = new Browser({ env: overloaded });
    const tx = await browser.startLogin(client, challenge);
    const res = await browser.postJson("/email-code/generate", { tx, email: uniqueEmail("h2") });
    expect(res.status).toBe(503);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await res.json()).toMatchObject({ error: "temporarily_unavailable" });

    // The token endpoint too: either store of its one round trip overloaded (the login's revocation
    // shard, or the refresh family's, whose row spends the code: issue 28) is 503, and the code is not
    // spent (a family made while the other call failed is forgotten), so a retry redeems it.
    const login = await fullLogin(client);
    expect(login.tokens.access_token).toBeTruthy();
    for (const binding of ["REVOCATIONS", "REFRESH_TOKENS"] as const) {
      const second = await loginForCode(client);
      const codes = faulty({ [binding]: overloadedNamespace(env[binding] as unknown as DurableObjectNamespace) });
      const busy = await redeem(client, second.code, second.verifier, {}, codes);
      expect(busy.status, binding).toBe(503);
      expect(busy.headers.get("retry-after")).toBeTruthy();
      expect(busy.headers.get("cache-control")).toBe("no-store");
      expect((await redeem(client, second.code, second.verifier)).status, binding).toBe(200);
    }
  });

  it("H3: with D1 unavailable no token is issued: 503 with Retry-After", async () => {
    const client = await registerClient();
    const login = await loginForCode(client);
    const noD1 = faulty({ DB: unavailableD1() });
    const res = await redeem(client, login.code, login.verifier, {}, noD1);
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBeTruthy();
    expect(await res.json()).toMatchObject({ error: "temporarily_unavailable" });
    // Userinfo needs the user from D1: 503, never a 200 without the check.
    const { tokens } = await fullLogin(client);
    const info = await call("/userinfo", { headers: { Authorization: `Bearer ${tokens.access_token}` } }, noD1);
    expect(info.status).toBe(503);
    // The code was not spent by the failed attempt (client lookup failed first).
    expect((await redeem(client, login.code, login.verifier)).status).toBe(200);
  });
});
