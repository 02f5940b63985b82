import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { sentEventsOf } from "../../durable-objects/challenge/sent-events";
import authApp from "../../workers/op-auth/src/index";
import { loadConfig } from "../../workers/shared/config/config";
import { auditEmailKey } from "../../workers/shared/events/audit";
import { routeKey } from "../../workers/shared/routing/shard-refs";
import {
  admin,
  Browser,
  call,
  codeFromSession,
  comparableHeaders,
  fullLogin,
  ISSUER,
  latestCode,
  loginForCode,
  mailbox,
  openSealed,
  pinClock,
  pkce,
  policy,
  registerClient,
  sealedIdPart,
  setCookieOf,
  sha256,
  shardStub,
  sql,
  stubForId,
  type TestClient,
  type TestEnv,
  uniqueEmail,
  withVars,
} from "../support/harness";

afterEach(() => {
  vi.useRealTimers();
});

/** Pins Date (worker and Durable Objects alike) at `ms`; later calls to `at` move it. */
async function started(client: TestClient, opts: { env?: TestEnv; browser?: Browser } = {}) {
  const browser = opts.browser ?? new Browser(opts.env ? { env: opts.env } : {});
  const { challenge, verifier } = await pkce();
  const tx = await browser.startLogin(client, challenge);
  return { browser, tx, verifier };
}

/** Captured messages in every ChallengeStore shard (the test config has 3, generation 0). */
async function mailCount(): Promise<number> {
  let n = 0;
  for (let s = 0; s < 3; s++)
    n += (await sql<{ n: number }>(shardStub("challenge", 0, s), "SELECT COUNT(*) AS n FROM captured"))[0]?.n ?? 0;
  return n;
}

/** The ChallengeStore shard of an email's HMAC, as the router places it (current generation). */
function challengeShardOf(emailKey: string) {
  const ref = routeKey(loadConfig(env), "challenge", emailKey, "global");
  return shardStub("challenge", ref.gen, ref.shard);
}

async function expectJsonError(res: Response, status: number, error: string) {
  expect(res.status, await res.clone().text()).toBe(status);
  expect(res.headers.get("cache-control")).toBe("no-store");
  expect(((await res.json()) as { error: string }).error).toBe(error);
}

function retryAfter(res: Response): number {
  const v = Number(res.headers.get("retry-after"));
  expect(Number.isInteger(v) && v >= 1).toBe(true);
  return v;
}

/**
 * Waits, if need be, until the current minute has at least 15 s left: the Rate Limiting binding counts
 * in wall-clock minutes (Miniflare's own clock, which pinClock does not move), and a test of a
 * per-minute quota must not straddle two of them.
 */
async function freshRateLimitWindow(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 15_000) await new Promise((resolve) => setTimeout(resolve, left + 100));
}

/** Room for freshRateLimitWindow's wait (up to 15 s) on top of the test itself. */
const RATE_LIMIT_TEST_TIMEOUT_MS = 30_000;

/** A wrong code that is surely not the mailed one. */
const wrong = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, "0");

describe("EmailCodeGenerate (CONTRACT §2.2)", () => {
  it("answers 200 with sent, expires_in and resend_after, no-store, and mails a 6-digit code", async () => {
    const client = await registerClient();
    const { browser, tx } = await started(client);
    const email = uniqueEmail();
    const res = await browser.postJson("/email-code/generate", { tx, email });
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(await res.json()).toEqual({ sent: true, expires_in: 300, resend_after: 60 });
    const messages = await mailbox(email);
    expect(messages).toHaveLength(1);
    expect(messages[0]?.code).toMatch(/^[0-9]{6}$/);
    expect(messages[0]?.to).toBe(email);
    // The email's shard holds a code for this transaction (keyed by an HMAC, not the address).
    const key = await auditEmailKey(loadConfig(env), email);
    const [row] = await sql<{ tx_hash: string; attempts: number }>(
      challengeShardOf(key),
      "SELECT tx_hash, attempts FROM otp_codes WHERE email_key = ?",
      key,
    );
    expect(row).toEqual({ tx_hash: await sha256(sealedIdPart(tx)), attempts: 0 });
  });

  it("captures dev mail sealed in the email's ChallengeStore shard, beside its code, with its code_sent event, for an hour", async () => {
    const client = await registerClient();
    const at = pinClock();
    const { browser, tx } = await started(client);
    const email = uniqueEmail("captured");
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    const [message] = await mailbox(email);
    expect(message?.code).toMatch(/^[0-9]{6}$/);

    // The address's shard holds the message, sealed (no code, no address), and its audit event.
    const key = await auditEmailKey(loadConfig(env), email);
    const found = [];
    for (let s = 0; s < 3; s++) {
      const shardStore = shardStub("challenge", 0, s);
      const captured = await sql<{ sealed: string }>(
        shardStore,
        "SELECT sealed FROM captured WHERE email_key = ?",
        key,
      );
      // Issue 44: the address's limits row carries its code_sent events (no outbox row of their own).
      const carried = await sql<{ audit: string | null }>(
        shardStore,
        "SELECT audit FROM email_limits WHERE email_key = ?",
        key,
      );
      const events = carried.flatMap((r) => Object.values(sentEventsOf(r.audit)).flat());
      if (captured.length || events.length) found.push({ shard: s, captured, events: events.map((e) => e.kind) });
    }
    expect(found[0]?.shard).toBe(routeKey(loadConfig(env), "challenge", key, "global").shard);
    expect(found).toHaveLength(1);
    expect(found[0]?.captured).toHaveLength(1);
    expect(found[0]?.events).toEqual(["code_sent"]);
    expect(JSON.stringify(found)).not.toContain(message?.code as string);
    expect(JSON.stringify(found)).not.toContain(email);

    at(3_600_000 - 1_000);
    expect(await mailbox(email)).toHaveLength(1);
    at(3_600_000 + 1);
    expect(await mailbox(email)).toHaveLength(0);
  });

  it("answers a known and an unknown email identically (A5)", async () => {
    const client = await registerClient();
    const known = uniqueEmail("known");
    expect((await admin("/users", { method: "POST", json: { email: known } })).status).toBe(201);
    const answers = [];
    for (const email of [known, uniqueEmail("unknown")]) {
      const { browser, tx } = await started(client);
      const res = await browser.postJson("/email-code/generate", { tx, email });
      answers.push({ status: res.status, headers: comparableHeaders(res), body: await res.text() });
    }
    expect(answers[1]).toEqual(answers[0]);
  });

  it("with invite-only signup, answers an unknown email the same but mails nothing", async () => {
    const e = withVars({ SIGNUP: "invite" });
    const client = await registerClient({}, e);
    const known = uniqueEmail("invited");
    expect((await admin("/users", { method: "POST", json: { email: known } }, e)).status).toBe(201);
    const unknown = uniqueEmail("stranger");
    const answers = [];
    for (const email of [known, unknown]) {
      const { browser, tx } = await started(client, { env: e });
      const res = await browser.postJson("/email-code/generate", { tx, email });
      answers.push({ status: res.status, headers: comparableHeaders(res), body: await res.text() });
    }
    expect(answers[0]?.status).toBe(200);
    expect(answers[1]).toEqual(answers[0]);
    expect(await mailbox(known, e)).toHaveLength(1);
    expect(await mailbox(unknown, e)).toHaveLength(0);
  });

  it("refuses a missing, malformed, unknown or foreign tx with 400 invalid_request (A8)", async () => {
    const client = await registerClient();
    const email = uniqueEmail();
    const { browser, tx } = await started(client);
    const other = await started(client);
    const before = await mailCount();
    await expectJsonError(await browser.postJson("/email-code/generate", { email }), 400, "invalid_request");
    await expectJsonError(
      await browser.postJson("/email-code/generate", { tx: "nope", email }),
      400,
      "invalid_request",
    );
    await expectJsonError(await browser.postJson("/email-code/generate", { tx: 42, email }), 400, "invalid_request");
    // Another browser's tx: the cookie does not match.
    await expectJsonError(
      await browser.postJson("/email-code/generate", { tx: other.tx, email }),
      400,
      "invalid_request",
    );
    // The right tx without its cookie.
    await expectJsonError(
      await call("/email-code/generate", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ tx, email }),
      }),
      400,
      "invalid_request",
    );
    // A well-formed tx this server never issued, with a matching cookie: its sealed request altered ...
    const forged = `${tx.slice(0, -5)}${tx.endsWith("AAAAA") ? "BBBBB" : "AAAAA"}`;
    await expectJsonError(
      await browser.postJson("/email-code/generate", { tx: forged, email }),
      400,
      "invalid_request",
    );
    // ... or another transaction's sealed request moved onto this browser's id (it is bound to its own id).
    const moved = `${sealedIdPart(tx)}.${other.tx.slice(other.tx.indexOf(".") + 1)}`;
    await expectJsonError(await browser.postJson("/email-code/generate", { tx: moved, email }), 400, "invalid_request");
    expect(await mailCount()).toBe(before);
    // The real one still works.
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
  });

  it("refuses an expired tx with 400 invalid_request", async () => {
    const client = await registerClient();
    const at = pinClock();
    const { browser, tx } = await started(client);
    at(900_000);
    await expectJsonError(
      await browser.postJson("/email-code/generate", { tx, email: uniqueEmail() }),
      400,
      "invalid_request",
    );
  });

  it("refuses anything but one email address with 400, and mails nothing (A11)", async () => {
    const client = await registerClient();
    const { browser, tx } = await started(client);
    const before = await mailCount();
    const bad: unknown[] = [
      "",
      "not-an-email",
      "a@b",
      "victim@example.com\r\nBcc: attacker@example.com",
      "victim@example.com\nx",
      `${"a".repeat(64)}@${"b".repeat(186)}.com`, // 255 characters
      "a@example.com, b@example.com",
      "<a@example.com>",
      42,
      null,
      ["a@example.com"],
    ];
    for (const email of bad)
      await expectJsonError(await browser.postJson("/email-code/generate", { tx, email }), 400, "invalid_request");
    await expectJsonError(await browser.postJson("/email-code/generate", { tx }), 400, "invalid_request");
    expect(await mailCount()).toBe(before);
  });

  it("refuses a second code within the resend interval with 429 slow_down and Retry-After, and mails nothing (A3)", async () => {
    const client = await registerClient();
    const email = uniqueEmail();
    const { browser, tx } = await started(client);
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    const again = await browser.postJson("/email-code/generate", { tx, email });
    expect(retryAfter(again)).toBeLessThanOrEqual(60);
    await expectJsonError(again, 429, "slow_down");
    // Per email, not per browser.
    const other = await started(client);
    await expectJsonError(
      await other.browser.postJson("/email-code/generate", { tx: other.tx, email }),
      429,
      "slow_down",
    );
    expect(await mailbox(email)).toHaveLength(1);
  });

  it("allows 10 codes per email per hour, then 429 too_many_requests (A4)", async () => {
    const client = await registerClient();
    const email = uniqueEmail();
    const at = pinClock();
    const { browser, tx } = await started(client);
    for (let i = 0; i < 10; i++) {
      at(i * 61_000);
      expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    }
    at(10 * 61_000);
    const res = await browser.postJson("/email-code/generate", { tx, email });
    expect(retryAfter(res)).toBe(3600 - 610);
    await expectJsonError(res, 429, "too_many_requests");
    expect(await mailbox(email)).toHaveLength(10);
  });

  it(
    "limits generate per IP per minute, per IP, through the Rate Limiting binding (A4)",
    async () => {
      const e = withVars({ POLICY: policy({ ip_generate_per_minute: 3 }) });
      const client = await registerClient({}, e);
      await freshRateLimitWindow();
      const { browser, tx } = await started(client, { env: e });
      for (let i = 0; i < 3; i++)
        expect((await browser.postJson("/email-code/generate", { tx, email: uniqueEmail() })).status).toBe(200);
      const res = await browser.postJson("/email-code/generate", { tx, email: uniqueEmail() });
      // The binding's window is a minute; it does not say when the current one ends.
      expect(retryAfter(res)).toBe(60);
      await expectJsonError(res, 429, "too_many_requests");
      // Another address is not affected.
      const other = await started(client, { env: e });
      expect(
        (await other.browser.postJson("/email-code/generate", { tx: other.tx, email: uniqueEmail() })).status,
      ).toBe(200);
    },
    RATE_LIMIT_TEST_TIMEOUT_MS,
  );

  it("refuses a cross-origin or cross-site post with 403 (E4)", async () => {
    const client = await registerClient();
    const { browser, tx } = await started(client);
    const email = uniqueEmail();
    for (const headers of [
      { Origin: "https://evil.example.com" },
      { Origin: "null" },
      { "Sec-Fetch-Site": "cross-site" },
    ] as Record<string, string>[]) {
      const res = await browser.postJson("/email-code/generate", { tx, email }, headers);
      expect(res.status).toBe(403);
      const res2 = await browser.postJson("/email-code/verify", { tx, email, code: "123456" }, headers);
      expect(res2.status).toBe(403);
    }
    // The login page's own form gets the refusal as a page, not JSON.
    const page = await browser.postForm("/email-code/generate", { tx, email }, { Origin: "https://evil.example.com" });
    expect(page.status).toBe(403);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(await mailbox(email)).toHaveLength(0);
    expect((await browser.postJson("/email-code/generate", { tx, email }, { Origin: ISSUER })).status).toBe(200);
  });
});

describe("EmailCodeVerify (CONTRACT §2.3)", () => {
  async function generated(client: TestClient, email = uniqueEmail(), opts: { env?: TestEnv } = {}) {
    const s = await started(client, opts);
    const res = await s.browser.postJson("/email-code/generate", { tx: s.tx, email });
    expect(res.status, await res.clone().text()).toBe(200);
    const messages = await mailbox(email, s.browser.env);
    return { ...s, email, code: messages[0]?.code as string };
  }

  it("makes a session: redirect_to carries it sealed, the cookie names it, following redirect_to stores it", async () => {
    const client = await registerClient();
    const { browser, tx, email, code } = await generated(client);
    const res = await browser.postJson("/email-code/verify", { tx, email, code });
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const { redirect_to } = (await res.json()) as { redirect_to: string };
    const prefix = `${ISSUER}/authorize?tx=`;
    expect(redirect_to.startsWith(prefix)).toBe(true);
    const done = decodeURIComponent(redirect_to.slice(prefix.length));
    // The same transaction id, with the login sealed under another purpose than the transaction's.
    expect(sealedIdPart(done)).toBe(sealedIdPart(tx));
    expect(await openSealed("tx", done)).toBeNull();
    const cookie = setCookieOf(res, "kw_session");
    expect(cookie?.value).toMatch(/^ses_/);
    expect(cookie?.attrs).toEqual(expect.arrayContaining(["HttpOnly", "SameSite=Lax", "Path=/"]));
    expect(cookie?.attrs.some((a) => /^domain=/i.test(a))).toBe(false);

    const user = await env.DB.prepare("SELECT id, email FROM users WHERE email = ?")
      .bind(email)
      .first<{ id: string }>();
    expect(user).toBeTruthy();
    const sessionId = cookie?.value as string;
    const sealed = await openSealed<{ session: { sub: string; sid: string }; session_hash: string }>(
      "verified-tx",
      done,
    );
    expect(sealed).toMatchObject({ session: { sub: user?.id }, session_hash: await sha256(sessionId) });
    // The session lives in the tx's shard, keyed by the hash of the cookie, once redirect_to is followed.
    expect(stubForId("session", sessionId).id.toString()).toBe(stubForId("session", tx).id.toString());
    const stored = () =>
      sql<{ sub: string; sid: string; auth_time: number; expires_at: number }>(
        stubForId("session", sessionId),
        "SELECT sub, sid, auth_time, expires_at FROM sessions WHERE session_hash = ?",
        sessionHash,
      );
    const sessionHash = await sha256(sessionId);
    expect(await stored()).toEqual([]);
    expect((await browser.fetch(redirect_to)).status).toBe(302);
    const [session] = await stored();
    expect(session?.sub).toBe(user?.id);
    expect(session?.sid).toBe(sealed?.session.sid);
    expect(session?.sid).toMatch(/^sid_/);
    expect((session?.expires_at as number) - (session?.auth_time as number) * 1000).toBeGreaterThanOrEqual(86_400_000);
    expect((session?.expires_at as number) - (session?.auth_time as number) * 1000).toBeLessThan(86_401_000);
    // The challenge is consumed.
    const again = await browser.postJson("/email-code/verify", { tx, email, code });
    expect(again.status).toBe(400);
  });

  it("answers a wrong code with 400 invalid_code and a malformed one with 400 (A10)", async () => {
    const client = await registerClient();
    const { browser, tx, email, code } = await generated(client);
    await expectJsonError(
      await browser.postJson("/email-code/verify", { tx, email, code: wrong(code) }),
      400,
      "invalid_code",
    );
    for (const bad of ["", "12345", "1234567", "12a456", " 123456", "１２３４５６", 123456, null])
      expect((await browser.postJson("/email-code/verify", { tx, email, code: bad })).status).toBe(400);
    expect((await browser.postJson("/email-code/verify", { tx, email })).status).toBe(400);
    // Still usable: malformed input never reached the challenge, one wrong code did.
    expect((await browser.postJson("/email-code/verify", { tx, email, code })).status).toBe(200);
  });

  it("answers an expired code with 400 invalid_code (A6)", async () => {
    const client = await registerClient();
    const at = pinClock();
    const { browser, tx, email, code } = await generated(client);
    at(300_000);
    await expectJsonError(await browser.postJson("/email-code/verify", { tx, email, code }), 400, "invalid_code");
  });

  it("answers an already used code with 400 invalid_code, like a wrong one (A6)", async () => {
    const client = await registerClient();
    const { browser, tx, email, code } = await generated(client);
    expect((await browser.postJson("/email-code/verify", { tx, email, code })).status).toBe(200);
    // A replay of the same request ...
    await expectJsonError(await browser.postJson("/email-code/verify", { tx, email, code }), 400, "invalid_code");
    // ... and the used code in a new login transaction for the same email.
    const next = await started(client);
    await next.browser.postJson("/email-code/generate", { tx: next.tx, email }); // 429: within the resend interval
    await expectJsonError(
      await next.browser.postJson("/email-code/verify", { tx: next.tx, email, code }),
      400,
      "invalid_code",
    );
  });

  it("does not accept a code with another login transaction, nor without the tx cookie (A8)", async () => {
    const client = await registerClient();
    const a = await generated(client);
    // Browser B asks for a code for the same email (refused: resend interval) and presents A's code.
    const b = await started(client);
    expect((await b.browser.postJson("/email-code/generate", { tx: b.tx, email: a.email })).status).toBe(429);
    await expectJsonError(
      await b.browser.postJson("/email-code/verify", { tx: b.tx, email: a.email, code: a.code }),
      400,
      "invalid_code",
    );
    await expectJsonError(
      await b.browser.postJson("/email-code/verify", { tx: a.tx, email: a.email, code: a.code }),
      400,
      "invalid_request",
    );
    await expectJsonError(
      await call("/email-code/verify", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ tx: a.tx, email: a.email, code: a.code }),
      }),
      400,
      "invalid_request",
    );
    // A code for one email does not log in another.
    await expectJsonError(
      await a.browser.postJson("/email-code/verify", { tx: a.tx, email: uniqueEmail(), code: a.code }),
      400,
      "invalid_code",
    );
    expect((await a.browser.postJson("/email-code/verify", { tx: a.tx, email: a.email, code: a.code })).status).toBe(
      200,
    );
  });

  it("kills the challenge after 5 wrong codes: the right code then gets 400 invalid_code (A1)", async () => {
    const client = await registerClient();
    const { browser, tx, email, code } = await generated(client);
    for (let i = 0; i < 5; i++)
      await expectJsonError(
        await browser.postJson("/email-code/verify", { tx, email, code: wrong(code) }),
        400,
        "invalid_code",
      );
    await expectJsonError(await browser.postJson("/email-code/verify", { tx, email, code }), 400, "invalid_code");
  });

  it("locks the email for the source after 10 failures across codes: 429 too_many_attempts until the hour passes (A2)", async () => {
    const client = await registerClient();
    const at = pinClock();
    const email = uniqueEmail();
    const { browser, tx, code: first } = await generated(client, email);
    for (let i = 0; i < 5; i++) await browser.postJson("/email-code/verify", { tx, email, code: wrong(first) });
    at(61_000);
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    const second = (await mailbox(email))[0]?.code as string;
    for (let i = 0; i < 5; i++)
      await expectJsonError(
        await browser.postJson("/email-code/verify", { tx, email, code: wrong(second) }),
        400,
        "invalid_code",
      );
    // Locked: even the right code, from any browser at that address.
    const locked = await browser.postJson("/email-code/verify", { tx, email, code: second });
    expect(retryAfter(locked)).toBe(3600 - 61);
    await expectJsonError(locked, 429, "too_many_attempts");
    // A new code does not reset the count.
    at(200_000);
    const gen = await browser.postJson("/email-code/generate", { tx, email });
    expect(retryAfter(gen)).toBe(3600 - 200);
    expect(gen.status).toBe(429);
    const other = await started(client, { browser: new Browser({ ip: browser.ip }) });
    expect((await other.browser.postJson("/email-code/generate", { tx: other.tx, email })).status).toBe(429);
    // After the hour: a new code works.
    at(3_600_000);
    const fresh = await generated(client, email);
    expect((await fresh.browser.postJson("/email-code/verify", { tx: fresh.tx, email, code: fresh.code })).status).toBe(
      200,
    );
  });

  it("lets no one source lock a person out: her own code from elsewhere still signs her in (issue 15)", async () => {
    const client = await registerClient();
    const at = pinClock();
    const email = uniqueEmail("victim");
    // The attacker starts a login for her address and spends its ten failures on two codes she is sent.
    const attacker = new Browser();
    for (const t of [0, 61_000]) {
      at(t);
      const { tx } = await started(client, { browser: attacker });
      expect((await attacker.postJson("/email-code/generate", { tx, email })).status).toBe(200);
      const sent = (await mailbox(email))[0]?.code as string; // only to be sure each guess is wrong
      for (let i = 0; i < 5; i++)
        await expectJsonError(
          await attacker.postJson("/email-code/verify", { tx, email, code: wrong(sent) }),
          400,
          "invalid_code",
        );
    }
    // She, from her own network, asks for a code and signs in.
    at(122_000);
    const own = await started(client);
    expect(own.browser.ip).not.toBe(attacker.ip);
    expect((await own.browser.postJson("/email-code/generate", { tx: own.tx, email })).status).toBe(200);
    const code = (await mailbox(email))[0]?.code as string;
    expect((await own.browser.postJson("/email-code/verify", { tx: own.tx, email, code })).status).toBe(200);
    // The attacker's address stays locked out of hers for the hour.
    const again = await started(client, { browser: attacker });
    const refused = await attacker.postJson("/email-code/generate", { tx: again.tx, email });
    await expectJsonError(refused, 429, "too_many_requests");
  });

  it("lets a success reset the failure count (A2)", async () => {
    const e = withVars({ POLICY: policy({ email_failures_per_hour: 3, resend_interval_seconds: 10 }) });
    const client = await registerClient({}, e);
    const at = pinClock();
    const email = uniqueEmail();
    const a = await generated(client, email, { env: e });
    for (let i = 0; i < 2; i++)
      await a.browser.postJson("/email-code/verify", { tx: a.tx, email, code: wrong(a.code) });
    expect((await a.browser.postJson("/email-code/verify", { tx: a.tx, email, code: a.code })).status).toBe(200);
    at(11_000);
    const b = await generated(client, email, { env: e });
    for (let i = 0; i < 2; i++)
      await expectJsonError(
        await b.browser.postJson("/email-code/verify", { tx: b.tx, email, code: wrong(b.code) }),
        400,
        "invalid_code",
      );
    // Without the reset this would be the 5th failure of 3; it is the 2nd, so the right code works.
    expect((await b.browser.postJson("/email-code/verify", { tx: b.tx, email, code: b.code })).status).toBe(200);
  });

  it("voids the older code when a new one is sent (A13)", async () => {
    const client = await registerClient();
    const at = pinClock();
    const { browser, tx, email, code: old } = await generated(client);
    at(60_000);
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    const fresh = (await mailbox(email))[0]?.code as string;
    if (fresh !== old)
      await expectJsonError(
        await browser.postJson("/email-code/verify", { tx, email, code: old }),
        400,
        "invalid_code",
      );
    expect((await browser.postJson("/email-code/verify", { tx, email, code: fresh })).status).toBe(200);
  });

  it(
    "limits verify per IP per minute",
    async () => {
      const e = withVars({ POLICY: policy({ ip_verify_per_minute: 2 }) });
      const client = await registerClient({}, e);
      await freshRateLimitWindow();
      const { browser, tx, email, code } = await generated(client, uniqueEmail(), { env: e });
      for (let i = 0; i < 2; i++)
        expect((await browser.postJson("/email-code/verify", { tx, email, code: wrong(code) })).status).toBe(400);
      const res = await browser.postJson("/email-code/verify", { tx, email, code });
      expect(retryAfter(res)).toBe(60);
      await expectJsonError(res, 429, "too_many_requests");
    },
    RATE_LIMIT_TEST_TIMEOUT_MS,
  );

  it("gives two simultaneous verifies of the right code exactly one session (A7)", async () => {
    const client = await registerClient();
    const { browser, tx, email, code } = await generated(client);
    const results = await Promise.all([0, 1, 2].map(() => browser.postJson("/email-code/verify", { tx, email, code })));
    expect(results.map((r) => r.status).sort()).toEqual([200, 400, 400]);
    const ok = results.find((r) => r.status === 200) as Response;
    const { redirect_to } = (await ok.json()) as { redirect_to: string };
    // Its redirect_to followed three times at once: one session, one code.
    const followed = await Promise.all([0, 1, 2].map(() => browser.fetch(redirect_to)));
    expect(followed.map((r) => r.status).sort()).toEqual([302, 400, 400]);
    const user = await env.DB.prepare("SELECT id FROM users WHERE email = ?").bind(email).first<{ id: string }>();
    const sessions = await sql(stubForId("session", tx), "SELECT sid FROM sessions WHERE sub = ?", user?.id);
    expect(sessions).toHaveLength(1);
  });

  it("reaches one account from case variants of an address (A12)", async () => {
    const client = await registerClient();
    const lower = uniqueEmail("mixed");
    const upper = lower.toUpperCase();
    const at = pinClock();
    const first = await loginForCode(client, upper);
    at(61_000);
    const second = await loginForCode(client, `  ${lower.replace(/^m/, "M")} `);
    const { results } = await env.DB.prepare("SELECT id, email FROM users WHERE lower(email) = ?").bind(lower).all();
    expect(results).toEqual([{ id: expect.any(String), email: lower }]);
    expect(first.code).not.toBe(second.code);
  });

  it("replaces a session cookie sent with the request, never reuses it (E2)", async () => {
    const client = await registerClient();
    const at = pinClock();
    const { browser } = await loginForCode(client);
    const oldSession = browser.cookies.get("kw_session") as string;
    expect(oldSession).toBeTruthy();

    at(61_000);
    const { challenge } = await pkce();
    const tx = await browser.startLogin(client, challenge, { prompt: "login" });
    const email = uniqueEmail();
    await browser.postJson("/email-code/generate", { tx, email });
    const code = (await mailbox(email))[0]?.code as string;
    const res = await browser.postJson("/email-code/verify", { tx, email, code });
    expect(res.status).toBe(200);
    const newSession = setCookieOf(res, "kw_session")?.value;
    expect(newSession).toMatch(/^ses_/);
    expect(newSession).not.toBe(oldSession);
    const { redirect_to } = (await res.json()) as { redirect_to: string };
    expect((await browser.fetch(redirect_to)).status).toBe(302);
    // The old session is over: expired in storage with nothing of the person left (its row may still
    // carry its login's audit events to D1, issue 44), and it no longer answers prompt=none.
    expect(
      await sql(
        stubForId("session", oldSession),
        "SELECT expires_at, email, sub FROM sessions WHERE session_hash = ?",
        await sha256(oldSession),
      ),
    ).toEqual([{ expires_at: 0, email: "", sub: "" }]);
    const stale = new Browser();
    stale.cookies.set("kw_session", oldSession);
    const none = await stale.fetch(
      `/authorize?${new URLSearchParams({
        response_type: "code",
        client_id: client.client_id,
        redirect_uri: client.redirect_uris[0] as string,
        scope: "openid",
        code_challenge: challenge,
        code_challenge_method: "S256",
        prompt: "none",
      })}`,
    );
    expect(new URL(none.headers.get("location") as string).searchParams.get("error")).toBe("login_required");
    // The new one works.
    expect((await codeFromSession(browser, client)).code).toMatch(/^ac_/);
  });
});

describe("a verify whose answer never reached the person (issue 38 item 12d)", () => {
  /**
   * Posts a verify straight to op-auth as `browser`, with a request signal the test aborts: before the
   * request (the client had gone while it queued), or at the first `waitUntil` the verify makes, which
   * comes after the code is spent (ending the browser's earlier session), as a client's timeout would.
   */
  async function verifyCutOff(browser: Browser, body: object, abortAt: "before" | "after-spend") {
    const controller = new AbortController();
    if (abortAt === "before") controller.abort();
    const real = createExecutionContext();
    const ctx = {
      ...real,
      waitUntil(p: Promise<unknown>) {
        controller.abort();
        real.waitUntil(p);
      },
      passThroughOnException: () => real.passThroughOnException(),
    } as ExecutionContext;
    const res = await authApp.fetch(
      new Request(`${ISSUER}/email-code/verify`, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          Cookie: [...browser.cookies].map(([k, v]) => `${k}=${v}`).join("; "),
          "CF-Connecting-IP": browser.ip,
        },
        body: JSON.stringify(body),
        signal: controller.signal,
      }),
      env as never,
      ctx,
    );
    await waitOnExecutionContext(real);
    expect(controller.signal.aborted).toBe(true);
    return res;
  }

  it("the code stays usable: cut off after the spend, or before it, trying it again signs in", async () => {
    const client = await registerClient();
    // The browser's earlier session makes the verify end it in a waitUntil, after the code is spent.
    const { browser } = await fullLogin(client);
    for (const abortAt of ["after-spend", "before"] as const) {
      const email = uniqueEmail(`cut-${abortAt}`);
      const { challenge } = await pkce();
      // prompt=login: the session would otherwise answer the request at once.
      const tx = await browser.startLogin(client, challenge, { prompt: "login" });
      expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
      const code = await latestCode(email);
      const cut = await verifyCutOff(browser, { tx, email, code }, abortAt);
      // What the request answered reached no one; what matters is the code afterwards.
      expect(cut.status, abortAt).toBe(abortAt === "before" ? 503 : 200);
      const again = await browser.postJson("/email-code/verify", { tx, email, code });
      expect(again.status, `${abortAt}: ${await again.clone().text()}`).toBe(200);
      // Delivered once, the code is spent as before.
      await expectJsonError(await browser.postJson("/email-code/verify", { tx, email, code }), 400, "invalid_code");
    }
  });
});

describe("another login cannot lock out a chosen address or void its code", () => {
  async function started2(client: TestClient, opts: { env?: TestEnv; ip?: string } = {}) {
    const browser = new Browser(opts);
    const { challenge } = await pkce();
    return { browser, tx: await browser.startLogin(client, challenge) };
  }
  async function generated(client: TestClient) {
    const s = await started2(client);
    const email = uniqueEmail();
    expect((await s.browser.postJson("/email-code/generate", { tx: s.tx, email })).status).toBe(200);
    return { ...s, email, code: (await mailbox(email))[0]?.code as string };
  }

  it("keeps a person's own code working when another login sends the address a new one", async () => {
    const client = await registerClient();
    const at = pinClock();
    const { browser, tx, email, code } = await generated(client);
    at(61_000);
    const attacker = await started2(client);
    expect((await attacker.browser.postJson("/email-code/generate", { tx: attacker.tx, email })).status).toBe(200);
    expect((await browser.postJson("/email-code/verify", { tx, email, code })).status).toBe(200);
  });

  it("counts no failure for a login whose generate was refused, however many codes it tries", async () => {
    const client = await registerClient();
    const { browser, tx, email, code } = await generated(client);
    const attacker = await started2(client);
    const refused = await attacker.browser.postJson("/email-code/generate", { tx: attacker.tx, email });
    await expectJsonError(refused, 429, "slow_down");
    for (let i = 0; i < 12; i++)
      await expectJsonError(
        await attacker.browser.postJson("/email-code/verify", { tx: attacker.tx, email, code: wrong(code) }),
        400,
        "invalid_code",
      );
    const key = await auditEmailKey(loadConfig(env), email);
    const [limits] = await sql<{ failures: number; consecutive: number }>(
      challengeShardOf(key),
      "SELECT failures, consecutive FROM email_limits WHERE email_key = ?",
      key,
    );
    expect(limits).toMatchObject({ failures: 0, consecutive: 0 });
    expect((await browser.postJson("/email-code/verify", { tx, email, code })).status).toBe(200);
  });

  it(
    "groups IPv6 verifies by /48 and generates by /64",
    async () => {
      const e = withVars({ POLICY: policy({ ip_verify_per_minute: 2, ip_generate_per_minute: 2 }) });
      const client = await registerClient({}, e);
      await freshRateLimitWindow();
      const site = `2001:db8:${Math.floor(Math.random() * 0xffff).toString(16)}`;
      // Three /64s of one /48: the third verify is over the /48's quota.
      const statuses: number[] = [];
      for (const subnet of ["1", "2", "3"]) {
        const { browser, tx } = await started2(client, { env: e, ip: `${site}:${subnet}::1` });
        const res = await browser.postJson("/email-code/verify", { tx, email: uniqueEmail(), code: "123456" });
        statuses.push(res.status);
      }
      expect(statuses).toEqual([400, 400, 429]);
      // Generates count per /64: each of those /64s still has its own two.
      for (const subnet of ["1", "2", "3"]) {
        const { browser, tx } = await started2(client, { env: e, ip: `${site}:${subnet}::1` });
        expect((await browser.postJson("/email-code/generate", { tx, email: uniqueEmail() })).status).toBe(200);
      }
    },
    RATE_LIMIT_TEST_TIMEOUT_MS,
  );
});

describe("the HTML login page, form-encoded (CONTRACT §2, a person in a browser)", () => {
  const hidden = (html: string, name: string) =>
    new RegExp(`<input type="hidden" name="${name}" value="([^"]*)">`).exec(html)?.[1]?.replace(/&#64;/g, "@");

  it("goes from the login page to tokens with form posts, a 303 and cookies only", async () => {
    const client = await registerClient();
    const browser = new Browser();
    const { challenge, verifier } = await pkce();
    const page = await browser.fetch(
      `/authorize?${new URLSearchParams({
        response_type: "code",
        client_id: client.client_id,
        redirect_uri: client.redirect_uris[0] as string,
        scope: "openid email",
        state: "html-state",
        code_challenge: challenge,
        code_challenge_method: "S256",
      })}`,
      { headers: { Accept: "text/html" } },
    );
    expect(page.status).toBe(200);
    const tx = hidden(await page.text(), "tx") as string;
    expect(sealedIdPart(tx)).toBe(browser.cookies.get("kw_tx"));

    const email = uniqueEmail("html");
    const codePage = await browser.postForm("/email-code/generate", { tx, email }, { Origin: ISSUER });
    expect(codePage.status).toBe(200);
    expect(codePage.headers.get("content-type")).toMatch(/^text\/html/);
    expect(codePage.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    const html = await codePage.text();
    expect(html).toContain('action="/email-code/verify"');
    expect(hidden(html, "tx")).toBe(tx);
    expect(hidden(html, "email")).toBe(email);
    const code = (await mailbox(email))[0]?.code as string;

    // A wrong code: the code page again, 400, with a message.
    const wrongPage = await browser.postForm("/email-code/verify", { tx, email, code: wrong(code) });
    expect(wrongPage.status).toBe(400);
    expect(wrongPage.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await wrongPage.text()).toContain('role="alert"');

    const done = await browser.postForm("/email-code/verify", { tx, email, code }, { Origin: ISSUER });
    expect(done.status).toBe(303);
    expect(
      done.headers.get("location")?.startsWith(`${ISSUER}/authorize?tx=${encodeURIComponent(sealedIdPart(tx))}.`),
    ).toBe(true);
    expect(setCookieOf(done, "kw_session")?.attrs).toEqual(
      expect.arrayContaining(["HttpOnly", "SameSite=Lax", "Path=/"]),
    );

    const fin = await browser.fetch(done.headers.get("location") as string);
    expect(fin.status).toBe(302);
    const redirect = new URL(fin.headers.get("location") as string);
    expect(redirect.searchParams.get("state")).toBe("html-state");
    expect(redirect.searchParams.get("iss")).toBe(ISSUER);
    const token = await call("/token", {
      method: "POST",
      headers: {
        "Content-Type": "application/x-www-form-urlencoded",
        Authorization: `Basic ${btoa(`${client.client_id}:${client.client_secret}`)}`,
      },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code: redirect.searchParams.get("code") as string,
        redirect_uri: client.redirect_uris[0] as string,
        code_verifier: verifier,
      }),
    });
    expect(token.status).toBe(200);
  });

  it("shows errors of form posts as pages: resend 429 with Retry-After, bad tx 400", async () => {
    const client = await registerClient();
    const { browser, tx } = await started(client);
    const email = uniqueEmail();
    expect((await browser.postForm("/email-code/generate", { tx, email })).status).toBe(200);
    const again = await browser.postForm("/email-code/generate", { tx, email });
    expect(again.status).toBe(429);
    expect(retryAfter(again)).toBeLessThanOrEqual(60);
    expect(again.headers.get("content-type")).toMatch(/^text\/html/);
    const bad = await browser.postForm("/email-code/generate", { tx: "tx_0_0_nope", email });
    expect(bad.status).toBe(400);
    expect(bad.headers.get("content-type")).toMatch(/^text\/html/);
    const invalidEmail = await browser.postForm("/email-code/generate", { tx, email: "nope" });
    expect(invalidEmail.status).toBe(400);
    expect(invalidEmail.headers.get("content-type")).toMatch(/^text\/html/);
  });
});
