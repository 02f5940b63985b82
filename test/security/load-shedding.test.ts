import { afterEach, describe, expect, it, vi } from "vitest";
import {
  backlogMs,
  finished,
  loginEnded,
  loginsBound,
  loginsUnderWay,
  resetAdmission,
  started,
} from "../../workers/shared/request/admission";
import {
  admin,
  authorizeQuery,
  Browser,
  call,
  form,
  fullLogin,
  latestCode,
  pinClock,
  pkce,
  policy,
  registerClient,
  uniqueEmail,
  withVars,
} from "../support/harness";

afterEach(() => {
  vi.useRealTimers();
  resetAdmission();
});

describe("load shedding (checklist I2: past capacity, 503 with Retry-After, never a hang)", () => {
  it("refuses new logins past the logins under way at once, 503 with Retry-After, and lets the admitted ones finish (issue 44 item 3)", async () => {
    resetAdmission();
    const e = withVars({ POLICY: policy({ max_logins_under_way: 2, login_burst: 0, login_slot_seconds: 5 }) });
    const client = await registerClient({}, e);
    const { challenge } = await pkce();
    const path = `/authorize?${authorizeQuery(client, challenge)}`;
    const asApi = { headers: { Accept: "application/json" } };
    // Ten new logins at once: two places, so two begin and eight are refused before any work.
    const browsers = Array.from({ length: 10 }, () => new Browser({ env: e }));
    const callsBefore = await doCalls();
    const responses = await Promise.all(browsers.map((b) => b.fetch(path, asApi)));
    expect(await doCalls()).toBe(callsBefore);
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(2);
    expect(statuses.filter((s) => s === 503)).toHaveLength(8);
    for (const res of responses.filter((r) => r.status === 503)) {
      expect(res.headers.get("retry-after")).toBe("1");
      expect(await res.json()).toMatchObject({ error: "temporarily_unavailable" });
    }
    // The two admitted logins go on, every step of them, while a new login is still refused.
    const admitted = await Promise.all(
      responses
        .flatMap((r, i) => (r.status === 200 ? [{ b: browsers[i] as Browser, res: r }] : []))
        .map(async ({ b, res }) => ({
          b,
          tx: ((await res.json()) as { tx: string }).tx,
          email: uniqueEmail("admitted"),
        })),
    );
    const redirects: string[] = [];
    for (const { b, tx, email } of admitted) {
      expect((await b.postJson("/email-code/generate", { tx, email })).status).toBe(200);
      expect((await new Browser({ env: e }).fetch(path, asApi)).status).toBe(503);
      const ver = await b.postJson("/email-code/verify", { tx, email, code: await latestCode(email, e) });
      expect(ver.status, await ver.clone().text()).toBe(200);
      redirects.push(((await ver.json()) as { redirect_to: string }).redirect_to);
    }
    // A login's redirect_to ends it: its place goes to the next new login.
    const first = await (admitted[0] as { b: Browser }).b.fetch(redirects[0] as string);
    expect(first.status).toBe(302);
    expect((await new Browser({ env: e }).fetch(path, asApi)).status).toBe(200);
    expect((await new Browser({ env: e }).fetch(path, asApi)).status).toBe(503);
    // A login that began none (an error page here) does not keep a place.
    resetAdmission();
    const bad = await new Browser({ env: e }).fetch(
      `/authorize?${authorizeQuery(client, challenge, { redirect_uri: "https://elsewhere.example/cb" })}`,
    );
    expect(bad.status).not.toBe(200);
    expect((await new Browser({ env: e }).fetch(path, asApi)).status).toBe(200);
    expect((await new Browser({ env: e }).fetch(path, asApi)).status).toBe(200);
    expect((await new Browser({ env: e }).fetch(path, asApi)).status).toBe(503);
    // An abandoned login frees its place after login_slot_seconds.
    const advance = pinClock();
    advance(5_000);
    expect((await new Browser({ env: e }).fetch(path, asApi)).status).toBe(200);
  });

  it("counts no more than one place for a login, whatever refuses or answers it", async () => {
    resetAdmission();
    const now = Date.now();
    expect(loginsUnderWay(5_000, now)).toBe(0);
    // More ends than logins (a redirect_to of a login another isolate admitted) leave the count at 0.
    loginEnded();
    expect(loginsUnderWay(5_000, now)).toBe(0);
  });

  it("does not count a request whose body is still arriving, and gives its body a deadline (408)", async () => {
    const e = withVars({ POLICY: policy({ max_inflight_requests: 2, body_deadline_seconds: 1 }) });
    const client = await registerClient({}, e);
    // Six posts that declare a body and send one byte of it, on the endpoints that read one.
    const trickle = () =>
      new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode("{"));
        },
      });
    const started = Date.now();
    const stalled = ["/email-code/generate", "/email-code/verify", "/token", "/token", "/introspect", "/revoke"].map(
      (path) =>
        call(
          path,
          {
            method: "POST",
            headers: {
              "Content-Type": path.startsWith("/email") ? "application/json" : "application/x-www-form-urlencoded",
            },
            body: trickle(),
            duplex: "half",
          } as RequestInit,
          e,
        ),
    );
    // Meanwhile new logins are admitted: the trickling requests hold no slot.
    const { challenge } = await pkce();
    const path = `/authorize?${authorizeQuery(client, challenge)}`;
    for (let i = 0; i < 3; i++)
      expect((await new Browser({ env: e }).fetch(path, { headers: { Accept: "application/json" } })).status).toBe(200);
    // And every trickle ends at the deadline with 408, not a hang.
    for (const res of await Promise.all(stalled)) {
      expect(res.status).toBe(408);
      expect(await res.json()).toMatchObject({ error: "invalid_request" });
    }
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("refuses new work while recent latency is past the bound, before any storage call, with Retry-After from the backlog (issue 27 item 17)", async () => {
    const e = withVars({ POLICY: policy({ admission_latency_ms: 500 }) });
    const client = await registerClient({}, e);
    const { tokens } = await fullLogin(client, undefined, { env: e });
    // A login under way: its transaction began before the backlog.
    const person = new Browser({ env: e });
    const email = uniqueEmail("underway");
    const tx = await person.startLogin(client, (await pkce()).challenge);
    const advance = pinClock();
    // A route that takes 5 ms when nothing waits, whose recent requests took 3 s: a queue of about 3 s,
    // twenty times the bound. One slow request alone would not do it (a median).
    for (let i = 0; i < 5; i++) {
      started();
      finished(5, 200, true, "GET /authorize");
    }
    for (let i = 0; i < 20; i++) {
      started();
      finished(3_000, 200, true, "GET /authorize");
    }
    const { challenge } = await pkce();
    const path = `/authorize?${authorizeQuery(client, challenge)}`;
    const callsBefore = await doCalls();
    const refused = [
      await new Browser({ env: e }).fetch(path, { headers: { Accept: "application/json" } }),
      await call("/userinfo", { headers: { Authorization: `Bearer ${tokens.access_token}` } }, e),
      await form(client, { grant_type: "refresh_token", refresh_token: tokens.refresh_token as string }, "/token", e),
      await form(client, { token: tokens.access_token }, "/introspect", e),
    ];
    // Refused before any Durable Object call.
    expect(await doCalls()).toBe(callsBefore);
    for (const res of refused) {
      expect(res.status, await res.clone().text()).toBe(503);
      expect(await res.json()).toMatchObject({ error: "temporarily_unavailable" });
      // About the backlog: 3 s of latency, six times past the bound (capped at 30 s).
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(3);
      expect(Number(res.headers.get("retry-after"))).toBeLessThanOrEqual(30);
    }
    // The login under way is not shed: its code is sent and checked.
    expect((await person.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    const verified = await person.postJson("/email-code/verify", { tx, email, code: await latestCode(email, e) });
    expect(verified.status, await verified.clone().text()).toBe(200);
    // Once nothing has completed for a while, the backlog has drained: new work is admitted again.
    advance(10_000);
    const after = await new Browser({ env: e }).fetch(path, { headers: { Accept: "application/json" } });
    expect(after.status, await after.clone().text()).toBe(200);
  });
});

describe("the bound on logins under way, by runtime (issue 44 item 3)", () => {
  it("is 16 on the local one-thread runtime, 512 in production, and what the policy sets anywhere", () => {
    expect(loginsBound(undefined, "test")).toBe(16);
    expect(loginsBound(undefined, "development")).toBe(16);
    expect(loginsBound(undefined, "production")).toBe(512);
    expect(loginsBound(20, "production")).toBe(20);
    expect(loginsBound(3, "test")).toBe(3);
  });
});

describe("the backlog estimate (issue 27 item 17)", () => {
  it("sees a queue, not a slow route or one slow request", () => {
    const now = Date.now();
    const record = (ms: number, route: string, n = 1) => {
      for (let i = 0; i < n; i++) {
        started();
        finished(ms, 200, true, route, now);
      }
    };
    // A route that is slow by nature (far-away Durable Objects): no queue.
    record(400, "POST /token", 20);
    expect(backlogMs(now)).toBe(0);
    // One slow request among fast ones: no queue.
    resetAdmission();
    record(5, "GET /authorize", 19);
    record(2_000, "GET /authorize");
    expect(backlogMs(now)).toBe(0);
    // Most requests slower than their route's floor: a queue of about that much.
    record(805, "GET /authorize", 30);
    expect(backlogMs(now)).toBe(800);
    // Nothing completed for a while: nothing to go by.
    expect(backlogMs(now + 3_000)).toBe(0);
    resetAdmission();
  });
});

/** Durable Object calls served so far, as GET /admin/v1/stats counts them. */
async function doCalls(): Promise<number> {
  const res = await admin("/stats");
  return ((await res.json()) as { totals: { durable_object_calls: number } }).totals.durable_object_calls;
}
