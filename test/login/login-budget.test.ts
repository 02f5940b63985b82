import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { OUTBOX_SWAP_AT } from "../../durable-objects/audit-outbox";
import { address, httpVars, type ReceivedHttp, received } from "../mail/support";
import { codeSignInToOffer, enrol, ORIGIN, RP_ID } from "../passkeys/support";
import { signInChallengeOf } from "../support/authenticator";
import {
  type AuthorizeExtra,
  admin,
  authorizeQuery,
  Browser,
  call,
  fullLogin,
  latestCode,
  mailbox,
  pinClock,
  pkce,
  redeem,
  registerClient,
  shardStub,
  stubForId,
  type TestClient,
  type TestEnv,
  uniqueEmail,
  withVars,
  writeBehindStub,
} from "../support/harness";
import { createTenant, registerTenantClient } from "../tenants/support";

/**
 * The cost of a login, from the counters an operator sees: `GET /admin/v1/stats` counts every call
 * served by every Durable Object shard a login can touch (the five stores, the MailOutbox and the
 * AuditBuffer) and the D1 statements of the Workers. A change that adds a call fails here.
 */

interface StoreStats {
  total: number;
  rows_written: number;
  imbalance: number | null;
  shards: { generation: number; shard: number; served: number; rows_written: number }[];
}
interface Stats {
  stores: Record<string, StoreStats>;
  totals: { durable_object_calls: number; rows_written: number; table_rows_written: number; d1_queries: number };
}

async function stats(): Promise<Stats> {
  const res = await admin("/stats");
  expect(res.status).toBe(200);
  return (await res.json()) as Stats;
}

/** What `step` cost: Durable Object calls by store, in all, rows written and D1 statements. */
async function measure(step: () => Promise<unknown>) {
  const before = await stats();
  await step();
  const after = await stats();
  const byStore = Object.fromEntries(
    Object.keys(after.stores)
      .map((s) => [s, (after.stores[s]?.total ?? 0) - (before.stores[s]?.total ?? 0)] as const)
      .filter(([, n]) => n > 0),
  );
  return {
    byStore,
    calls: after.totals.durable_object_calls - before.totals.durable_object_calls,
    // The rows a login writes; making an expiry bucket's or an outbox's table (2 rows, when a shard's
    // first row of a period lands) is shared by every row the table takes, and counted apart.
    rows:
      after.totals.rows_written -
      before.totals.rows_written -
      (after.totals.table_rows_written - before.totals.table_rows_written),
    tableRows: after.totals.table_rows_written - before.totals.table_rows_written,
    d1: after.totals.d1_queries - before.totals.d1_queries,
  };
}

/**
 * Runs now every alarm due in the shards a login touches (the test suite's 3 per store, 4 AuditBuffers),
 * so the flushes and sweeps owed to earlier logins happen before a measured one, not inside it.
 */
async function drainAlarms(): Promise<void> {
  // In the order their audit events fall due (issue 44): a login's family first (5 s after it is
  // made), then its session (once its code is past use), then its code's address (past the code's
  // expiry). An alarm run before anything of its shard is due writes all its shard carries.
  const stubs = [
    ...(["refresh", "session", "challenge", "code", "revocation"] as const).flatMap((store) =>
      [0, 1, 2].map((n) => shardStub(store, 0, n)),
    ),
    ...[0, 1, 2, 3].map((n) => writeBehindStub("audit", n)),
  ];
  for (const stub of stubs) await runDurableObjectAlarm(stub);
}

/**
 * The five steps of CONTRACT §2 as k6/full-login.js makes them, each measured on its own, at the
 * origin's endpoints or a tenant's (`base` = `/t/<tenant>`).
 */
async function measuredLogin(
  e: TestEnv,
  client: TestClient,
  email: string,
  base = "",
  extra: AuthorizeExtra = {},
  readCode: () => Promise<string> = () => latestCode(email, e, base),
  /** RFC 9126: the request is pushed first, and AuthorizeInit names it by its request_uri. */
  pushed = false,
) {
  const browser = new Browser({ env: e, base });
  const { verifier, challenge } = await pkce();
  let tx = "";
  let code = "";
  let redirectTo = "";
  let authCode = "";
  let requestUri = "";
  const push = pushed
    ? {
        Push: await measure(async () => {
          const res = await browser.postForm(
            "/par",
            Object.fromEntries(new URLSearchParams(authorizeQuery(client, challenge, extra))),
          );
          expect(res.status, await res.clone().text()).toBe(201);
          requestUri = ((await res.json()) as { request_uri: string }).request_uri;
        }),
      }
    : {};
  const steps = {
    ...push,
    AuthorizeInit: await measure(async () => {
      if (!pushed) tx = await browser.startLogin(client, challenge, extra);
      else {
        const query = new URLSearchParams({ client_id: client.client_id, request_uri: requestUri });
        const res = await browser.fetch(`/authorize?${query}`, { headers: { Accept: "application/json" } });
        expect(res.status, await res.clone().text()).toBe(200);
        tx = ((await res.json()) as { tx: string }).tx;
      }
    }),
    EmailCodeGenerate: await measure(async () => {
      expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    }),
    // Reading the captured mail stands in for a person reading it: not a step of the login.
    mailboxRead: await measure(async () => {
      code = await readCode();
    }),
    EmailCodeVerify: await measure(async () => {
      const res = await browser.postJson("/email-code/verify", { tx, email, code });
      expect(res.status).toBe(200);
      redirectTo = ((await res.json()) as { redirect_to: string }).redirect_to;
    }),
    AuthorizeCode: await measure(async () => {
      const res = await browser.fetch(redirectTo);
      expect(res.status).toBe(302);
      authCode = new URL(res.headers.get("location") as string).searchParams.get("code") as string;
    }),
    Token: await measure(async () => {
      const res = await redeem(client, authCode, verifier, {}, e, base);
      expect(res.status, await res.clone().text()).toBe(200);
      expect(((await res.json()) as { refresh_token?: string }).refresh_token).toBeTruthy();
    }),
  };
  return steps;
}

/**
 * A returning user's login costs what the first test below explains step by step: no call to begin,
 * one to the email's shard for each of generate and verify, one to store the session, and one round
 * trip of two at the token endpoint; 5 calls and no D1 query in all.
 */
function expectTheLoginsCalls(login: Omit<Awaited<ReturnType<typeof measuredLogin>>, "mailboxRead">): void {
  expect(login.AuthorizeInit).toMatchObject({ calls: 0, d1: 0 });
  expect(login.EmailCodeGenerate).toMatchObject({ calls: 1, byStore: { challenge: 1 }, d1: 0 });
  expect(login.EmailCodeVerify).toMatchObject({ calls: 1, byStore: { challenge: 1 }, d1: 0 });
  expect(login.AuthorizeCode).toMatchObject({ calls: 1, byStore: { session: 1 }, d1: 0 });
  expect(login.Token).toMatchObject({ calls: 2, byStore: { revocation: 1, refresh: 1 }, d1: 0 });
  expect(Object.values(login).reduce((a, s) => a + s.calls, 0)).toBe(5);
  expect(Object.values(login).reduce((a, s) => a + s.d1, 0)).toBe(0);
}

afterEach(() => {
  vi.useRealTimers();
});

describe("a login's budget (GET /admin/v1/stats)", () => {
  it("a returning user's login: at most 5 Durable Object calls, at most 1 round trip per step, and no D1 query", async () => {
    // The default policy (the test suite's own turns the client cache off), but for a resend
    // interval short enough that a second code for the address can follow within the client cache.
    const e = withVars({ POLICY: JSON.stringify({ resend_interval_seconds: 10 }) });
    const client = await registerClient({ token_endpoint_auth_method: "none" }, e);
    const email = uniqueEmail("budget");
    const at = pinClock();
    // The first login creates the user; its client and user are now known to the isolate and shard.
    await fullLogin(client, email, { env: e });
    at(11_000);
    await drainAlarms();

    const steps = await measuredLogin(e, client, email);
    const { mailboxRead, ...login } = steps;
    const calls = Object.values(login).reduce((a, s) => a + s.calls, 0);
    const rows = Object.values(login).reduce((a, s) => a + s.rows, 0);
    const d1 = Object.values(login).reduce((a, s) => a + s.d1, 0);
    console.info(
      `login budget: ${calls} Durable Object calls, ${rows} rows written, ${d1} D1 queries;`,
      Object.fromEntries(Object.entries(steps).map(([k, v]) => [k, { ...v.byStore, rows: v.rows }])),
    );

    // The sealed transaction: beginning a login costs nothing stored.
    expect(login.AuthorizeInit).toMatchObject({ calls: 0, d1: 0 });
    // The email's shard: limits, code and captured mail (with its code_sent event) in one call.
    expect(login.EmailCodeGenerate).toMatchObject({ calls: 1, byStore: { challenge: 1 }, d1: 0 });
    // The code (and the user the shard knows); the login it makes travels sealed in `redirect_to`.
    expect(login.EmailCodeVerify).toMatchObject({ calls: 1, byStore: { challenge: 1 }, d1: 0 });
    // The session is stored, once per transaction; the code carries its grant sealed.
    expect(login.AuthorizeCode).toMatchObject({ calls: 1, byStore: { session: 1 }, d1: 0 });
    // The login's revocation shard checks it still stands, while the refresh family is created as
    // the code's spend (its id derived from the code's): one round trip of two calls (issue 28).
    expect(login.Token).toMatchObject({ calls: 2, byStore: { revocation: 1, refresh: 1 }, d1: 0 });
    expect(calls).toBeLessThanOrEqual(5);
    expect(d1).toBe(0);
    // Rows as SQLite counts them (indexes included), the alarm's later sweeps not yet: a regression guard.
    expect(rows).toBeLessThanOrEqual(12);
    expect(mailboxRead).toMatchObject({ calls: 1, byStore: { challenge: 1 }, d1: 0 });
  });

  it("a returning user's login with a pushed request (RFC 9126): one call and one row more, at AuthorizeInit (issue 41)", async () => {
    const e = withVars({ POLICY: JSON.stringify({ resend_interval_seconds: 10 }) });
    const client = await registerClient({ token_endpoint_auth_method: "none" }, e);
    const email = uniqueEmail("par-budget");
    const at = pinClock();
    await measuredLogin(e, client, email);
    at(11_000);
    await drainAlarms();
    const plain = await measuredLogin(e, client, email);
    at(22_000);
    await drainAlarms();
    const { Push, mailboxRead, ...login } = await measuredLogin(e, client, email, "", {}, undefined, true);
    const sum = (o: Record<string, { calls: number; rows: number } | undefined>, k: "calls" | "rows") =>
      Object.values(o).reduce((a, s) => a + (s?.[k] ?? 0), 0);
    const { mailboxRead: _, ...plainLogin } = plain;
    console.info(
      `PAR login: push ${Push?.calls} calls ${Push?.rows} rows; login ${sum(login, "calls")} calls ${sum(login, "rows")} rows; plain ${sum(plainLogin, "calls")} calls ${sum(plainLogin, "rows")} rows`,
    );
    // Pushing seals the request into the request_uri: nothing stored, no D1 (the client is cached).
    expect(Push).toMatchObject({ calls: 0, rows: 0, d1: 0 });
    // The request_uri is spent in its own RevocationStore shard: one call, one row.
    expect(login.AuthorizeInit).toMatchObject({ calls: 1, byStore: { revocation: 1 }, rows: 1, d1: 0 });
    const { AuthorizeInit, ...rest } = login;
    const { AuthorizeInit: plainInit, ...plainRest } = plainLogin;
    expect(plainInit).toMatchObject({ calls: 0, rows: 0 });
    expect(sum(rest, "calls")).toBe(sum(plainRest, "calls"));
    expect(sum(login, "calls")).toBe(sum(plainLogin, "calls") + 1);
    expect(sum(login, "rows")).toBeLessThanOrEqual(sum(plainLogin, "rows") + 2);
    expect(mailboxRead.calls).toBe(1);
    expect(AuthorizeInit.d1).toBe(0);
  });

  it("a returning user's login for an organization, with template claims from entity grants: the same 5 calls, no D1 query, no EntityStore call (issue 24)", async () => {
    const e = withVars({ POLICY: JSON.stringify({ resend_interval_seconds: 10 }) });
    const email = uniqueEmail("org-budget");
    const user = (await (await admin("/users", { method: "POST", json: { email } }, e)).json()) as { id: string };
    const org = (await (
      await admin("/organizations", { method: "POST", json: { name: "Budget Inc", attributes: { plan: "gold" } } }, e)
    ).json()) as { id: string };
    expect(
      (
        await admin(
          `/organizations/${org.id}/members`,
          { method: "POST", json: { user_id: user.id, roles: ["admin"] } },
          e,
        )
      ).status,
    ).toBe(201);
    await admin("/entity-types", { method: "POST", json: { name: "team" } }, e);
    const team = (await (
      await admin("/entities", { method: "POST", json: { type: "team", name: "Core" } }, e)
    ).json()) as {
      id: string;
    };
    expect(
      (await admin("/grants", { method: "POST", json: { user_id: user.id, target_id: team.id, roles: ["lead"] } }, e))
        .status,
    ).toBe(201);
    const client = await registerClient(
      {
        token_endpoint_auth_method: "none",
        token_claims: {
          claims: [
            { claim: "plan", source: "organization.attributes.plan" },
            { claim: "teams", source: "grants.team.names" },
          ],
        },
      },
      e,
    );
    const at = pinClock();
    await fullLogin(client, email, { env: e, extra: { organization: org.id } });
    at(11_000);
    await drainAlarms();
    const { mailboxRead, ...login } = await measuredLogin(e, client, email, "", { organization: org.id });
    expectTheLoginsCalls(login);
    expect(mailboxRead.calls).toBe(1);
  });

  it("a returning user's login at a tenant that is not `default`: the same 5 calls and no D1 query (issue 23)", async () => {
    const e = withVars({ POLICY: JSON.stringify({ resend_interval_seconds: 10 }) });
    const tenant = await createTenant({}, e);
    const client = await registerTenantClient(tenant.id, { token_endpoint_auth_method: "none" }, e);
    const email = uniqueEmail("tenant-budget");
    const at = pinClock();
    // The first login creates the user; the tenant's record, keys and client are now in the isolate's cache.
    await measuredLogin(e, client, email, `/t/${tenant.id}`);
    at(11_000);
    const { mailboxRead, ...login } = await measuredLogin(e, client, email, `/t/${tenant.id}`);
    expectTheLoginsCalls(login);
    expect(mailboxRead.calls).toBe(1);
  });

  it("a returning user's login on branded pages in another language: the same 5 calls and no D1 query (issue 26)", async () => {
    const e = withVars({ POLICY: JSON.stringify({ resend_interval_seconds: 10 }) });
    const tenant = await createTenant(
      { locale: "ar", branding: { logo_uri: "https://cdn.acme.test/logo.svg", primary_color: "#aa3300" } },
      e,
    );
    const client = await registerTenantClient(
      tenant.id,
      {
        token_endpoint_auth_method: "none",
        branding: { product_name: "Acme Cloud", support_uri: "https://acme.test/help" },
      },
      e,
    );
    const email = uniqueEmail("branded-budget");
    const at = pinClock();
    await measuredLogin(e, client, email, `/t/${tenant.id}`, { ui_locales: "fr" });
    at(11_000);
    const { mailboxRead, ...login } = await measuredLogin(e, client, email, `/t/${tenant.id}`, { ui_locales: "fr" });
    expectTheLoginsCalls(login);
    expect(mailboxRead.calls).toBe(1);
    // The mail went out in the language and brand the login began with.
    const [mail] = (await mailbox(email, e, `/t/${tenant.id}`)) as unknown as { subject: string }[];
    expect(mail?.subject).toMatch(/^\d{6} est votre code de connexion à Acme Cloud$/);
  });

  it("a returning user's login with a webhook endpoint subscribed to sign-ins: the same 5 calls and no D1 query (issue 25)", async () => {
    const e = withVars({ POLICY: JSON.stringify({ resend_interval_seconds: 10 }) });
    const client = await registerClient({ token_endpoint_auth_method: "none" }, e);
    const hook = await admin(
      "/webhooks",
      { method: "POST", json: { url: "http://127.0.0.1:9/hooks", events: ["user.signed_in", "user.created"] } },
      e,
    );
    expect(hook.status).toBe(201);
    const email = uniqueEmail("hook-budget");
    const at = pinClock();
    await measuredLogin(e, client, email);
    at(11_000);
    const { mailboxRead: _, ...login } = await measuredLogin(e, client, email);
    // Hand-offs to the webhook queues come from the stores' audit flushes (alarms, seconds after the
    // events), never from a login's request: on a slow machine the first login's may land in this
    // window, so they are not the login's calls.
    const handOffs = Object.values(login).reduce((a, s) => a + ((s.byStore as Record<string, number>).webhook ?? 0), 0);
    expect(Object.values(login).reduce((a, s) => a + s.calls, 0) - handOffs).toBe(5);
    expect(Object.values(login).reduce((a, s) => a + s.d1, 0)).toBe(0);
    expect(login.AuthorizeCode).toMatchObject({
      calls: 1 + ((login.AuthorizeCode.byStore as Record<string, number>).webhook ?? 0),
      d1: 0,
    });
    expect(login.AuthorizeCode.byStore).toMatchObject({ session: 1 });
    const { id } = (await hook.json()) as { id: string };
    expect((await admin(`/webhooks/${id}`, { method: "DELETE" }, e)).status).toBe(204);
  });

  it("a returning user whose last sign-in was 30 days ago: the same 5 calls and no D1 query (issue 28)", async () => {
    const e = withVars({ POLICY: "{}" });
    const client = await registerClient({ token_endpoint_auth_method: "none" }, e);
    const email = uniqueEmail("month");
    const at = pinClock();
    await measuredLogin(e, client, email);
    at(30 * 86_400_000);
    // The client's registration is cached per isolate for 30 s: another user's login warms it, as traffic would.
    await fullLogin(client, uniqueEmail("warm"), { env: e });
    const { mailboxRead: _, ...login } = await measuredLogin(e, client, email);
    expect(Object.values(login).reduce((a, s) => a + s.d1, 0)).toBe(0);
    expect(Object.values(login).reduce((a, s) => a + s.calls, 0)).toBe(5);
  });

  it("the production path (issue 28): a real mail transport, a returning user the same day and 30 days on: 5 calls, 5 rows written now (issue 44), no D1 query", async () => {
    const e = withVars({
      ...httpVars({ MAIL_FROM: "login@keyway.test" }),
      POLICY: JSON.stringify({ resend_interval_seconds: 10 }),
    });
    const client = await registerClient({ token_endpoint_auth_method: "none" }, e);
    const used = new Set<string>();
    // The code from the mail provider (the local Resend peer), as a person reads it: no Keyway call.
    const mailed = (email: string) => async () => {
      for (let i = 0; i < 100; i++) {
        const codes = ((await received(email)) as ReceivedHttp[]).map((m) => /^(\d{6}) /.exec(m.body.subject)?.[1]);
        const code = codes.find((c) => c && !used.has(`${email}:${c}`));
        if (code) {
          used.add(`${email}:${code}`);
          return code;
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`no mail for ${email}`);
    };
    const email = address();
    const at = pinClock();
    await measuredLogin(e, client, email, "", {}, mailed(email));
    at(11_000);
    // Twice: the first run writes what is due, the second finds nothing due and writes whatever its
    // shards still carry (the earlier tests' logins too), so the window below holds this login alone.
    await drainAlarms();
    await drainAlarms();
    const billed = async () => {
      const all = (await (await admin("/stats", {}, e)).json()) as {
        billing: Record<string, number>;
        totals: { table_rows_written: number };
      };
      return { ...all.billing, table_rows_written: all.totals.table_rows_written } as Record<string, number>;
    };
    const beforeAll = await billed();
    const { mailboxRead, ...login } = await measuredLogin(e, client, email, "", {}, mailed(email));
    const calls = Object.values(login).reduce((a, s) => a + s.calls, 0);
    const rows = Object.values(login).reduce((a, s) => a + s.rows, 0);
    console.info(
      `production-path login: ${calls} Durable Object calls, ${rows} rows written now;`,
      Object.fromEntries(Object.entries(login).map(([k, v]) => [k, { ...v.byStore, rows: v.rows }])),
    );
    // The code_sent event goes with the code (no AuditBuffer call after the mail); reading mail costs Keyway nothing.
    expect(login.EmailCodeGenerate).toMatchObject({ calls: 1, byStore: { challenge: 1 }, d1: 0 });
    expect(mailboxRead).toMatchObject({ calls: 0, d1: 0 });
    expect(login.EmailCodeVerify).toMatchObject({ calls: 1, byStore: { challenge: 1 }, d1: 0 });
    expect(calls).toBe(5);
    expect(Object.values(login).reduce((a, s) => a + s.d1, 0)).toBe(0);
    // Rows written in the login's own calls (indexes included; the flushes, sweeps and D1 rows that
    // follow are measured by npm run cost): a regression guard. Measured 5 (issue 44: the code, the
    // address's limits with its code_sent, the code's spend, the session, the family; no outbox row).
    expect(rows).toBeLessThanOrEqual(5);
    // A lone login, its events flushed alone (no other login shares its shards' flushes): its whole
    // bill in rows, D1 and the flushes' deletes included, less the tables a period makes. Alarms set
    // are apart: draining runs every shard of the suite, which re-arms each for its own sweeps, so
    // they are not this login's alone (by the code: 2 per shard that flushes, 6). npm run cost
    // measures logins that share flushes (docs/cost.md); this is the other end.
    await drainAlarms();
    const afterAll = await billed();
    const d = (k: string) => (afterAll[k] ?? 0) - (beforeAll[k] ?? 0);
    const lone =
      d("durable_object_rows_written") -
      d("durable_object_alarms_set") -
      d("table_rows_written") +
      d("durable_object_pending_deletes") +
      d("d1_rows_written");
    console.info(
      `a lone production-path login, flushed: ${lone} billed rows besides alarms (D1 ${d("d1_rows_written")}, later deletes ${d("durable_object_pending_deletes")}); alarms set meanwhile ${d("durable_object_alarms_set")}`,
    );
    // Issue 44, measured: 7 (5 in its calls; in D1 the login's one row and its page). It was 17 (8 in
    // its calls, 3 outbox deletes, 3 events and 3 pages in D1).
    expect(lone).toBeLessThanOrEqual(7);

    // 30 days on: the same calls, still no D1 query, and the same rows: the address's limits are
    // overwritten (kept 90 days past their windows), its known user is not extended (six months), and
    // nothing expired meanwhile is deleted row by row (buckets are dropped whole).
    at(30 * 86_400_000);
    // The client's registration is cached per isolate for 30 s: another user's login warms it, as traffic would.
    const warm = address();
    await measuredLogin(e, client, warm, "", {}, mailed(warm));
    // The month's sweeps and the warm login's flushes run now, not inside the measured login.
    await drainAlarms();
    const { mailboxRead: _, ...later } = await measuredLogin(e, client, email, "", {}, mailed(email));
    console.info(
      "production-path login 30 days on:",
      Object.fromEntries(Object.entries(later).map(([k, v]) => [k, { ...v.byStore, rows: v.rows }])),
    );
    expect(Object.values(later).reduce((a, s) => a + s.calls, 0)).toBe(5);
    expect(Object.values(later).reduce((a, s) => a + s.d1, 0)).toBe(0);
    expect(Object.values(later).reduce((a, s) => a + s.rows, 0)).toBeLessThanOrEqual(5);
  });

  it("a first login reads and writes D1 for its user, once, and remembers it in the email's shard", async () => {
    const e = withVars({ POLICY: "{}" });
    const client = await registerClient({ token_endpoint_auth_method: "none" }, e);
    // Warm the client cache with another user's login.
    await fullLogin(client, uniqueEmail("warm"), { env: e });
    const steps = await measuredLogin(e, client, uniqueEmail("first"));
    // A lookup and the insert of the new user; the shard learns the user after the response.
    expect(steps.EmailCodeVerify.d1).toBe(2);
    expect(steps.EmailCodeVerify.byStore).toEqual({ challenge: 2 });
    expect(steps.Token.d1).toBe(0);
  });

  it("a returning user's passkey login (issue 42): at most 4 Durable Object calls, at most 8 rows, no D1 query, no mail", async () => {
    const e = withVars({ POLICY: JSON.stringify({ resend_interval_seconds: 10 }) });
    const client = await registerClient({ token_endpoint_auth_method: "none" }, e);
    const email = uniqueEmail("passkey-budget");
    const at = pinClock();
    // The first sign-in (a code) creates the user and makes a passkey; a code login is measured beside.
    const offer = await codeSignInToOffer(client, email, { env: e });
    const { authenticator, res } = await enrol(offer);
    expect(res.status).toBe(303);
    at(11_000);
    await drainAlarms();
    const { mailboxRead, ...codeLogin } = await measuredLogin(e, client, email);
    at(22_000);
    await drainAlarms();
    const mails = (await mailbox(email, e)).length;

    const browser = new Browser({ env: e });
    const { verifier, challenge } = await pkce();
    let tx = "";
    let redirectTo = "";
    let authCode = "";
    const login = {
      AuthorizeInit: await measure(async () => {
        tx = await browser.startLogin(client, challenge);
      }),
      PasskeyVerify: await measure(async () => {
        const credential = await authenticator.assert({
          challenge: await signInChallengeOf(tx),
          origin: ORIGIN,
          rpId: RP_ID,
        });
        const res = await browser.postJson("/passkey/verify", { tx, credential });
        expect(res.status, await res.clone().text()).toBe(200);
        redirectTo = ((await res.json()) as { redirect_to: string }).redirect_to;
      }),
      AuthorizeCode: await measure(async () => {
        const res = await browser.fetch(redirectTo);
        expect(res.status).toBe(302);
        authCode = new URL(res.headers.get("location") as string).searchParams.get("code") as string;
      }),
      Token: await measure(async () => {
        const res = await redeem(client, authCode, verifier, {}, e);
        expect(res.status, await res.clone().text()).toBe(200);
      }),
    };
    const sum = (
      o: Record<string, { calls: number; rows: number; d1: number } | undefined>,
      k: "calls" | "rows" | "d1",
    ) => Object.values(o).reduce((a, s) => a + (s?.[k] ?? 0), 0);
    console.info(
      `passkey login: ${sum(login, "calls")} calls, ${sum(login, "rows")} rows, ${sum(login, "d1")} D1; code login: ${sum(codeLogin, "calls")} calls, ${sum(codeLogin, "rows")} rows;`,
      Object.fromEntries(Object.entries(login).map(([k, v]) => [k, { ...v.byStore, rows: v.rows }])),
    );
    expect(login.AuthorizeInit).toMatchObject({ calls: 0, d1: 0 });
    // The credential's shard: the assertion checked, the challenge spent and the counter moved, in one call.
    expect(login.PasskeyVerify).toMatchObject({ calls: 1, byStore: { challenge: 1 }, d1: 0 });
    expect(login.AuthorizeCode).toMatchObject({ calls: 1, byStore: { session: 1 }, d1: 0 });
    expect(login.Token).toMatchObject({ calls: 2, byStore: { revocation: 1, refresh: 1 }, d1: 0 });
    expect(sum(login, "calls")).toBeLessThanOrEqual(4);
    expect(sum(login, "rows")).toBeLessThanOrEqual(8);
    expect(sum(login, "d1")).toBe(0);
    // No mail: nothing captured for the address, no MailOutbox call.
    expect((await mailbox(email, e)).length).toBe(mails);
    expect(Object.values(login).every((s) => !("mail" in s.byStore))).toBe(true);
    expect(mailboxRead.calls).toBe(1);
  });

  it("a user created or imported through the admin API signs in the first time without D1", async () => {
    const e = withVars({ POLICY: "{}" });
    const client = await registerClient({ token_endpoint_auth_method: "none" }, e);
    await fullLogin(client, uniqueEmail("warm"), { env: e });
    const created = uniqueEmail("created");
    const imported = uniqueEmail("imported");
    expect((await admin("/users", { method: "POST", json: { email: created } }, e)).status).toBe(201);
    const res = await admin("/users/import", { method: "POST", json: { users: [{ email: imported }] } }, e);
    expect(await res.json()).toEqual({ created: 1, existing: 0 });
    for (const email of [created, imported]) {
      const steps = await measuredLogin(e, client, email);
      expect(steps.EmailCodeVerify).toMatchObject({ d1: 0, byStore: { challenge: 1 } });
    }
  });

  it("counts what Cloudflare bills (issue 28): requests, calls, rows written and read, later deletes, alarms, D1 rows", async () => {
    const e = withVars({ POLICY: JSON.stringify({ resend_interval_seconds: 10 }) });
    const client = await registerClient({ token_endpoint_auth_method: "none" }, e);
    const email = uniqueEmail("billing");
    const at = pinClock();
    await fullLogin(client, email, { env: e });
    at(11_000);
    const read = async () =>
      (await (await admin("/stats", {}, e)).json()) as {
        billing: Record<string, number>;
        totals: { durable_object_calls: number; rows_written: number; d1_queries: number };
      };
    const before = await read();
    const { tx } = await fullLogin(client, email, { env: e });
    const after = await read();
    const delta = (k: string) => (after.billing[k] ?? Number.NaN) - (before.billing[k] ?? Number.NaN);
    // The five steps, the mailbox read and the second stats call are the requests the Workers served.
    expect(delta("worker_requests")).toBe(7);
    // Every store call is a billed request (alarm runs too), and every row written is billed, plus one per alarm set.
    const calls = after.totals.durable_object_calls - before.totals.durable_object_calls;
    expect(calls).toBeGreaterThanOrEqual(6);
    expect(delta("durable_object_requests")).toBe(calls + delta("durable_object_alarm_runs"));
    const rows = after.totals.rows_written - before.totals.rows_written;
    expect(rows).toBeGreaterThan(0);
    expect(delta("durable_object_rows_written")).toBe(rows + delta("durable_object_alarms_set"));
    expect(delta("durable_object_rows_read")).toBeGreaterThan(0);
    // Rows a sweep or a flush deletes later, in the login's session shard, counted in the same
    // synchronous turn (no alarm can run in between): sessions from before expiry buckets (none: a
    // bucket is dropped whole), and the events waiting in its outbox while too few to swap its table.
    const pending = await runInDurableObject(stubForId("session", tx), (instance) => {
      const store = instance as unknown as { stats(o: object): { pending_deletes: number }; sql: SqlStorage };
      const count = (t: string) => store.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${t}`).one().n;
      const outbox = store.sql
        .exec<{ name: string }>("SELECT name FROM sqlite_master WHERE name GLOB 'audit_outbox__g*'")
        .toArray()
        .map((t) => count(t.name));
      const waiting = outbox.length === 1 && (outbox[0] ?? 0) < OUTBOX_SWAP_AT ? (outbox[0] ?? 0) : 0;
      return {
        counted: store.stats({ pendingDeletes: true }).pending_deletes,
        rows: count("sessions") + count("audit_outbox") + waiting,
        outbox,
        cheap: store.stats({}).pending_deletes,
        backlog: (instance as unknown as { auditBacklog(): number }).auditBacklog(),
      };
    });
    expect(pending.counted).toBe(pending.rows);
    // The login's sign_in event waits for its flush, on the session's row (issue 44), not in the outbox.
    expect(pending.backlog).toBeGreaterThanOrEqual(1);
    expect(pending.outbox.reduce((a, b) => a + b, 0)).toBe(0);
    // The shard controller's reads do not count them (they read every expiring table).
    expect(pending.cheap).toBe(0);
    // A returning user's login reads no D1 from the Workers (the stores' audit flushes may, at any time).
    expect(after.totals.d1_queries - before.totals.d1_queries).toBe(0);
    for (const k of ["d1_rows_written", "d1_rows_read", "durable_object_storage_bytes", "d1_size_bytes"])
      expect(after.billing[k], k).toBeTypeOf("number");
  });

  it("lists every shard of every store and of the write-behind objects", async () => {
    const { stores, totals } = await stats();
    expect(Object.keys(stores).sort()).toEqual([
      "audit",
      "challenge",
      "code",
      "entity",
      "mail",
      "refresh",
      "revocation",
      "session",
      "webhook",
    ]);
    for (const store of ["challenge", "code", "refresh", "revocation", "session"])
      expect(stores[store]?.shards).toHaveLength(3);
    for (const store of ["mail", "audit", "webhook"]) expect(stores[store]?.shards).toHaveLength(4);
    // The entity store (issue 24): its default count, which no login calls.
    expect(stores.entity?.shards).toHaveLength(16);
    expect(totals.durable_object_calls).toBe(Object.values(stores).reduce((a, s) => a + s.total, 0));
  });

  it("requires the admin token", async () => {
    expect((await call("/admin/v1/stats")).status).toBe(401);
    expect((await call("/admin/v1/stats", { headers: { Authorization: "Bearer nope" } })).status).toBe(401);
  });
});
