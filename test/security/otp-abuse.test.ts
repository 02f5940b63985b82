import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  admin,
  Browser,
  call,
  comparableHeaders,
  dumpShard,
  generateWithContext,
  mailbox,
  pkce,
  registerClient,
  type Store,
  sealedIdPart,
  sha256,
  shardStub,
  sql,
  type TestEnv,
  uniqueEmail,
  withVars,
  writeBehindStub,
} from "../support/harness";

// Checklist A5 (the answer does not depend on the mail) and A9 (no plaintext code at rest; the HMAC
// secret, like every required secret, is checked before anything is served). A1-A4, A6-A8 and A10-A13
// are proven in test/login/email-code.test.ts and test/stores/challenge-store.test.ts.

/** Comparable parts of an answer: status, body and every header but the per-response ones. */
async function answer(res: Response) {
  const headers = comparableHeaders(res);
  return { status: res.status, body: await res.text(), headers };
}

/** EmailCodeGenerate sent straight to op-auth, so the test sees the response before `waitUntil` work ends. */
async function generateRaw(testEnv: TestEnv, browser: Browser, tx: string, email: string) {
  const { response, afterResponse } = generateWithContext(testEnv, browser, tx, email);
  const res = await Promise.race([
    response,
    new Promise<"no response">((resolve) => setTimeout(() => resolve("no response"), 3_000)),
  ]);
  return { res, done: afterResponse };
}

describe("A5: known and unknown addresses get the same answer", () => {
  // That real mail goes out after the response, never delaying it, is proven with a slow provider in
  // test/mail/retry.test.ts. Captured mail (this dev transport) is kept with the code, in the same call.
  for (const signup of ["open", "invite"] as const) {
    it(`answers the same for a known and an unknown address, and mails only whom it may (SIGNUP=${signup})`, async () => {
      const e = withVars({ SIGNUP: signup });
      const client = await registerClient({}, e);
      const known = uniqueEmail("a5known");
      expect((await admin("/users", { method: "POST", json: { email: known } })).status).toBe(201);
      const unknown = uniqueEmail("a5unknown");

      const answers = [];
      for (const email of [known, unknown]) {
        const browser = new Browser({ env: e });
        const tx = await browser.startLogin(client, (await pkce()).challenge);
        const { res, done } = await generateRaw(e, browser, tx, email);
        expect(res).toBeInstanceOf(Response);
        answers.push(await answer(res as Response));
        await done();
      }
      expect(answers[0]?.status).toBe(200);
      expect(answers[1]).toEqual(answers[0]);
      expect(await mailbox(known, e)).toHaveLength(1);
      expect(await mailbox(unknown, e)).toHaveLength(signup === "open" ? 1 : 0);
    });
  }
});

const STORES: Store[] = ["session", "challenge", "code", "revocation", "refresh"];

afterEach(() => {
  vi.restoreAllMocks();
});

/** Captures what a misconfigured Worker logs (it says why it answers 503), keeping the test output clean. */
const configLog = () => vi.spyOn(console, "error").mockImplementation(() => undefined);
const logged = (spy: ReturnType<typeof configLog>) => spy.mock.calls.map((c) => String(c[0])).join("\n");

describe("A9: no plaintext code at rest, and the HMAC secret is required at start-up", () => {
  it("keeps the code out of every Durable Object and every D1 table, the captured mail included", async () => {
    const client = await registerClient();
    const browser = new Browser();
    const email = uniqueEmail("a9");
    const tx = await browser.startLogin(client, (await pkce()).challenge);
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    const code = (await mailbox(email))[0]?.code as string;
    // A wrong code and then the right one, so failure counters, a session and a user exist too.
    const wrong = String((Number(code) + 1) % 1_000_000).padStart(6, "0");
    expect((await browser.postJson("/email-code/verify", { tx, email, code: wrong })).status).toBe(400);
    expect((await browser.postJson("/email-code/verify", { tx, email, code })).status).toBe(200);

    const shards = JSON.parse(env.SHARDS) as Record<Store, number[]>;
    const dumps: string[] = [];
    for (const store of STORES)
      for (let g = 0; g < shards[store].length; g++)
        for (let i = 0; i < (shards[store][g] as number); i++) dumps.push(await dumpShard(shardStub(store, g, i)));
    for (const kind of ["mail", "audit"] as const)
      for (let i = 0; i < 4; i++) dumps.push(await dumpShard(writeBehindStub(kind, i)));
    const { results: tables } = await env.DB.prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf_%' AND name NOT LIKE 'sqlite_%' AND name != 'd1_migrations'",
    ).all<{ name: string }>();
    expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(["users", "clients"]));
    for (const { name } of tables)
      dumps.push(JSON.stringify((await env.DB.prepare(`SELECT * FROM "${name}"`).all()).results));

    const all = dumps.join("\n");
    expect(all).toContain('"code_mac"'); // the scan saw the stores ...
    expect(all).toContain('"sealed"'); // ... the captured mail, sealed in the MailOutbox ...
    expect(all).toContain(email); // ... and D1 (users holds the address once signed in)
    const asNumber = new RegExp(`(?<![0-9])${code}(?![0-9])`);
    expect(all).not.toMatch(asNumber);
  });

  /** The test env without some variables, or with others. */
  const variant = (vars: Record<string, string | undefined>): TestEnv => {
    const e: Record<string, unknown> = { ...env };
    for (const [k, v] of Object.entries(vars)) {
      if (v === undefined) delete e[k];
      else e[k] = v;
    }
    return e as unknown as TestEnv;
  };
  const random = (n: number) => btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(n)))).slice(0, n);

  it("answers 503 everywhere and issues no code without a usable OTP_HMAC_SECRET or another required secret", async () => {
    const client = await registerClient();
    const good = new Browser();
    const tx = await good.startLogin(client, (await pkce()).challenge);
    const email = uniqueEmail("a9secret");

    const broken: Record<string, string | undefined>[] = [
      { OTP_HMAC_SECRET: undefined },
      { OTP_HMAC_SECRET: "" },
      { OTP_HMAC_SECRET: random(31) },
      { OTP_HMAC_SECRET: "x".repeat(48) },
      { OTP_HMAC_SECRET: "changeme".repeat(4) },
      { OTP_HMAC_SECRET: "secret".repeat(8) },
      { ADMIN_TOKEN: undefined },
      { ADMIN_TOKEN: "test" },
      { KEY_ENCRYPTION_SECRET: undefined },
      { MAIL_OUTBOX_SECRET: undefined },
      { SIGNING_KEY_RS256: undefined },
      { SIGNING_KEY_ES256: '{"kty":"EC"}' },
      { ISSUER: undefined },
      { SHARDS: "{}" },
      { POLICY: JSON.stringify({ otp_ttl_seconds: 3600 }) },
      { POLICY: JSON.stringify({ ip_generate_per_minute: 0 }) },
    ];
    const log = configLog();
    for (const vars of broken) {
      const bad = variant(vars);
      const browser = new Browser({ env: bad, ip: good.ip });
      for (const [k, v] of good.cookies) browser.cookies.set(k, v);
      const label = JSON.stringify(vars);
      const responses = [
        await browser.postJson("/email-code/generate", { tx, email }),
        await browser.postJson("/email-code/verify", { tx, email, code: "123456" }),
        await browser.fetch(`/authorize?client_id=${client.client_id}`),
        await call("/.well-known/openid-configuration", {}, bad),
        await call("/jwks.json", {}, bad),
        await call("/token", { method: "POST", body: "grant_type=x" }, bad),
        await call(`/admin/v1/users?email=${encodeURIComponent(email)}`, {}, bad),
        await admin("/users", { method: "POST", json: { email } }, bad),
        await call(`/__dev/mailbox/${encodeURIComponent(email)}`, {}, bad),
      ];
      for (const res of responses) {
        expect(res.status, label).toBe(503);
        expect(Number(res.headers.get("retry-after")), label).toBeGreaterThan(0);
        expect(await res.json()).toMatchObject({ error: "temporarily_unavailable" });
      }
      // The operator learns which variable is wrong; the client does not.
      expect(logged(log)).toMatch(new RegExp(`${Object.keys(vars)[0]}[.:]`));
      log.mockClear();
    }
    // No code was made or mailed, the transaction was not touched, no user was created.
    expect(await mailbox(email)).toHaveLength(0);
    const txHash = await sha256(sealedIdPart(tx));
    for (let s = 0; s < 3; s++)
      expect(await sql(shardStub("challenge", 0, s), "SELECT * FROM otp_codes WHERE tx_hash = ?", txHash)).toEqual([]);
    expect(await env.DB.prepare("SELECT id FROM users WHERE email = ?").bind(email).first()).toBeNull();
    // With the secret in place, the same transaction goes on.
    expect((await good.postJson("/email-code/generate", { tx, email })).status).toBe(200);
  });

  it("refuses production with an http issuer or the dev mailbox, and serves a complete production config", async () => {
    const production = (vars: Record<string, string | undefined> = {}) =>
      variant({
        ENVIRONMENT: "production",
        ISSUER: "https://id.example.com",
        MAIL_FROM: "login@example.com",
        MAIL_TRANSPORT: "http",
        MAIL_API_KEY: "re_0123456789abcdef",
        ...vars,
      });
    const log = configLog();
    const ok = await call("/.well-known/openid-configuration", {}, production());
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { issuer: string }).issuer).toBe("https://id.example.com");
    for (const vars of [
      { ISSUER: "http://id.example.com" },
      { ISSUER: "http://127.0.0.1:8787" },
      { MAIL_TRANSPORT: "dev" },
      { MAIL_TRANSPORT: "smtp", SMTP_HOST: "smtp.example.com", SMTP_STARTTLS: "off" },
    ]) {
      const bad = production(vars);
      for (const path of [
        "/.well-known/openid-configuration",
        "/jwks.json",
        "/admin/v1/shards",
        "/__dev/mailbox/a%40example.com",
      ]) {
        const res = await call(path, { headers: { Authorization: `Bearer ${env.ADMIN_TOKEN}` } }, bad);
        expect(res.status, `${JSON.stringify(vars)} ${path}`).toBe(503);
      }
      expect(logged(log)).toMatch(new RegExp(`${Object.keys(vars)[0]}[.:]`));
    }
  });

  it("refuses, in production, a code request or check that did not come through Cloudflare's edge", async () => {
    const prod = variant({
      ENVIRONMENT: "production",
      ISSUER: "https://id.example.com",
      MAIL_FROM: "login@example.com",
      MAIL_TRANSPORT: "http",
      MAIL_API_KEY: "re_0123456789abcdef",
    });
    const client = await registerClient({}, prod);
    const browser = new Browser({ env: prod });
    const tx = await browser.startLogin(client, (await pkce()).challenge);
    const email = uniqueEmail("edge");
    // No CF-Connecting-IP (the edge always sets one): refused, not counted in a shared "unknown" bucket.
    for (const path of ["/email-code/generate", "/email-code/verify"]) {
      const res = await browser.postJson(path, { tx, email, code: "123456" }, { "CF-Connecting-IP": "" });
      expect(res.status, path).toBe(400);
      expect(((await res.json()) as { error_description: string }).error_description).toContain("client address");
    }
    // With it, the same transaction is served (a code that was never sent is simply wrong).
    const verified = await browser.postJson("/email-code/verify", { tx, email, code: "123456" });
    expect(((await verified.json()) as { error: string }).error).toBe("invalid_code");
  });
});
