import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { webhookEventsOf } from "../../workers/shared/events/webhooks/catalogue";
import {
  type AssertionOptions,
  FLAG_UP,
  FLAG_UV,
  SoftAuthenticator,
  signInChallengeOf,
} from "../support/authenticator";
import {
  admin,
  auditEvents,
  Browser,
  call,
  mailbox,
  pinClock,
  pkce,
  registerClient,
  runAlarmSettled,
  shardStub,
  type TestClient,
  uniqueEmail,
  withVars,
  writeBehindStub,
} from "../support/harness";
import { createTenant, registerTenantClient } from "../tenants/support";
import { claimsOf, codeSignInToOffer, enrol, finish, NAVIGATE, ORIGIN, passkeyLogin, RP_ID } from "./support";

/**
 * Passkeys (issue 42) in workerd: the offer after an email-code sign-in, the registration ceremony's
 * checks, a passkey sign-in that continues as a verified code does (the same session, code, tokens
 * and claims) with no mail, and every check of the assertion: challenge, origin, RP id, user
 * verification, signature, counter, tenant.
 */

afterEach(() => {
  vi.useRealTimers();
});

/** The audit events of `kinds` once every buffer and outbox has flushed to D1 (what the alarms do). */
async function audited(...kinds: string[]): Promise<{ kind: string; user_id: string | null; detail: string }[]> {
  const stubs = [
    ...[0, 1, 2, 3].map((s) => writeBehindStub("audit", s)),
    ...(["session", "challenge"] as const).flatMap((store) => [0, 1, 2, 3].map((s) => shardStub(store, 0, s))),
  ];
  for (const stub of stubs) await runAlarmSettled(stub);
  const { results } = await env.DB.prepare(
    `SELECT kind, user_id, detail FROM ${await auditEvents()} WHERE kind IN (${kinds.map(() => "?").join(",")}) ORDER BY at`,
  )
    .bind(...kinds)
    .all<{ kind: string; user_id: string | null; detail: string }>();
  return results;
}

const publicClient = () => registerClient({ token_endpoint_auth_method: "none" });

async function enrolled(client: TestClient, email = uniqueEmail("pk")) {
  const offer = await codeSignInToOffer(client, email);
  const { authenticator, res } = await enrol(offer);
  expect(res.status, await res.clone().text()).toBe(303);
  const location = res.headers.get("location") as string;
  const tokens = await finish(offer.browser, client, location, offer.verifier);
  return { email, offer, authenticator, tokens };
}

describe("the offer after an email-code sign-in", () => {
  it("offers a discoverable credential with user verification and attestation none, on the issuer's host", async () => {
    const client = await publicClient();
    const email = uniqueEmail("offer");
    const offer = await codeSignInToOffer(client, email);
    expect(offer.html).toMatch(/<button[^>]*id="passkey"[^>]*>Create a passkey<\/button>/);
    expect(offer.html).toContain("Not now");
    expect(offer.options.rp.id).toBe(RP_ID);
    expect(offer.options.user.name).toBe(email);
    expect(offer.options.authenticatorSelection).toMatchObject({
      residentKey: "required",
      userVerification: "required",
    });
    expect(offer.options.attestation).toBe("none");
    // The user handle names a shard and an address's HMAC, never the address.
    expect(atob(offer.options.user.id.replace(/-/g, "+").replace(/_/g, "/"))).not.toContain("@");
  });

  it("a form post without Sec-Fetch-Dest (a script, a library) still gets CONTRACT §2's 303", async () => {
    const client = await publicClient();
    const email = uniqueEmail("noffer");
    const browser = new Browser();
    const { challenge } = await pkce();
    const tx = await browser.startLogin(client, challenge);
    await browser.postJson("/email-code/generate", { tx, email });
    const code = (await mailbox(email))[0]?.code as string;
    const res = await browser.postForm("/email-code/verify", { tx, email, code }, { Origin: ORIGIN });
    expect(res.status).toBe(303);
  });

  it('"Not now" goes on to the client and is remembered in this browser; policy `always` asks anyway, `off` never', async () => {
    const client = await publicClient();
    const email = uniqueEmail("later");
    const at = pinClock();
    const offer = await codeSignInToOffer(client, email);
    const later = await offer.browser.postForm("/passkey/later", { tx: offer.tx, done: offer.done }, NAVIGATE);
    expect(later.status).toBe(303);
    expect(later.headers.get("set-cookie")).toMatch(/kw_passkey_later=1;.*Max-Age=2592000/);
    await finish(offer.browser, client, later.headers.get("location") as string, offer.verifier);
    // The same browser signs in again: no offer.
    at(61_000);
    const { challenge } = await pkce();
    const tx = await offer.browser.startLogin(client, challenge, { prompt: "login" });
    await offer.browser.postJson("/email-code/generate", { tx, email });
    const code = (await mailbox(email))[0]?.code as string;
    const again = await offer.browser.postForm("/email-code/verify", { tx, email, code }, NAVIGATE);
    expect(again.status).toBe(303);

    // A tenant that asks every time, and one that never does.
    const always = await createTenant({ policy: { passkey_offer: "always" } });
    const alwaysClient = await registerTenantClient(always.id, { token_endpoint_auth_method: "none" });
    const b = new Browser({ base: `/t/${always.id}` });
    b.cookies.set("kw_passkey_later", "1");
    const offered = await codeSignInToOffer(alwaysClient, uniqueEmail("always"), { browser: b });
    expect(offered.html).toContain("Create a passkey");
    const off = await createTenant({ policy: { passkey_offer: "off" } });
    const offClient = await registerTenantClient(off.id, { token_endpoint_auth_method: "none" });
    const ob = new Browser({ base: `/t/${off.id}` });
    const { challenge: c2 } = await pkce();
    const tx2 = await ob.startLogin(offClient, c2);
    const offEmail = uniqueEmail("off");
    await ob.postJson("/email-code/generate", { tx: tx2, email: offEmail });
    const code2 = (await mailbox(offEmail, undefined, `/t/${off.id}`))[0]?.code as string;
    expect((await ob.postForm("/email-code/verify", { tx: tx2, email: offEmail, code: code2 }, NAVIGATE)).status).toBe(
      303,
    );
  });

  it("refuses a registration for another origin, without user verification, or with another challenge", async () => {
    const client = await publicClient();
    const offer = await codeSignInToOffer(client, uniqueEmail("badreg"));
    const bad = async (o: { origin?: string; flags?: number; challenge?: string }) => {
      const a = await SoftAuthenticator.create();
      const credential = await a.register({
        challenge: o.challenge ?? offer.options.challenge,
        origin: o.origin ?? ORIGIN,
        rpId: offer.options.rp.id,
        userHandle: offer.options.user.id,
        ...(o.flags !== undefined ? { flags: o.flags } : {}),
      });
      const res = await offer.browser.postForm(
        "/passkey/register",
        { tx: offer.tx, done: offer.done, credential: JSON.stringify(credential) },
        NAVIGATE,
      );
      expect(res.status).toBe(400);
      expect(await res.text()).toContain("No passkey was created");
    };
    await bad({ origin: "https://evil.example" });
    await bad({ flags: FLAG_UP });
    await bad({ challenge: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" });
  });
  it("the offer's forms need this login's transaction and the session cookie its verify set", async () => {
    const client = await publicClient();
    const offer = await codeSignInToOffer(client, uniqueEmail("bound"));
    // Another browser with the transaction's cookie but not the session's.
    const other = new Browser();
    for (const [k, v] of offer.browser.cookies) if (k !== "kw_session") other.cookies.set(k, v);
    const later = await other.postForm("/passkey/later", { tx: offer.tx, done: offer.done }, NAVIGATE);
    expect(later.status).toBeGreaterThanOrEqual(400);
    expect(later.headers.get("location")).toBeNull();
    // Another transaction's verified login.
    const second = await codeSignInToOffer(client, uniqueEmail("bound2"));
    const mixed = await offer.browser.postForm("/passkey/later", { tx: offer.tx, done: second.done }, NAVIGATE);
    expect(mixed.status).toBeGreaterThanOrEqual(400);
    // JSON callers hear it as JSON.
    const json = await other.postJson("/passkey/register", { tx: offer.tx, done: offer.done, credential: {} });
    expect(json.status).toBe(400);
    expect(await json.json()).toMatchObject({ error: "invalid_request" });
  });
});

describe("a passkey sign-in", () => {
  it("signs in without mail and continues as a verified code does: the same user, session and claims", async () => {
    const client = await publicClient();
    const { email, authenticator, tokens: first } = await enrolled(client);
    const mailBefore = (await mailbox(email)).length;
    const { browser, verifier, verify } = await passkeyLogin(client, authenticator);
    expect(verify.status, await verify.clone().text()).toBe(200);
    expect(verify.headers.get("set-cookie")).toMatch(/kw_session=/);
    const { redirect_to } = (await verify.json()) as { redirect_to: string };
    expect(redirect_to).toMatch(/\/authorize\?tx=/);
    const tokens = await finish(browser, client, redirect_to, verifier);
    const a = claimsOf(first.id_token);
    const b = claimsOf(tokens.id_token);
    expect(b.sub).toBe(a.sub);
    expect(b.email).toBe(email);
    expect(b.sid).not.toBe(a.sid);
    expect((await mailbox(email)).length).toBe(mailBefore);
    // The sign_in event says how (`user.signed_in` carries it).
    const signIns = (await audited("sign_in")).filter((e) => e.user_id === a.sub).map((e) => JSON.parse(e.detail));
    expect(signIns.map((d) => d.method)).toEqual(["email_code", "passkey"]);
  });

  it("a form post answers 303 to redirect_to, as the code's form does", async () => {
    const client = await publicClient();
    const { authenticator } = await enrolled(client);
    const browser = new Browser();
    const { challenge } = await pkce();
    const tx = await browser.startLogin(client, challenge);
    const credential = await authenticator.assert({
      challenge: await signInChallengeOf(tx),
      origin: ORIGIN,
      rpId: RP_ID,
    });
    const res = await browser.postForm("/passkey/verify", { tx, credential: JSON.stringify(credential) }, NAVIGATE);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toMatch(/\/authorize\?tx=/);
  });

  it("refuses a wrong origin, RP id, missing user verification, a bad signature, a wrong type or challenge", async () => {
    const client = await publicClient();
    const { authenticator } = await enrolled(client);
    const refused = async (assertion: Partial<AssertionOptions>) => {
      const { verify } = await passkeyLogin(client, authenticator, { assertion });
      expect(verify.status, JSON.stringify(assertion)).toBe(400);
      expect(await verify.json()).toMatchObject({ error: "invalid_request" });
    };
    await refused({ origin: "https://evil.example" });
    await refused({ rpId: "evil.example" });
    await refused({ flags: FLAG_UP });
    await refused({ type: "webauthn.create" });
    await refused({ challenge: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" });
    // Another key's signature: a second authenticator claiming the first's credential id.
    const other = await SoftAuthenticator.create();
    const { browser, tx } = await passkeyLogin(client, authenticator, {});
    void browser;
    void tx;
    const b2 = new Browser();
    const { challenge } = await pkce();
    const tx2 = await b2.startLogin(client, challenge);
    const forged = await other.assert({
      challenge: await signInChallengeOf(tx2),
      origin: ORIGIN,
      rpId: RP_ID,
      userHandle: authenticator.userHandle,
    });
    forged.id = authenticator.id;
    forged.rawId = authenticator.id;
    expect((await b2.postJson("/passkey/verify", { tx: tx2, credential: forged })).status).toBe(400);
    // After all of that, the passkey still signs in.
    expect((await passkeyLogin(client, authenticator)).verify.status).toBe(200);
  });

  it("spends the challenge once: the same assertion again, or a transaction older than the last one used, is refused", async () => {
    const client = await publicClient();
    const { authenticator } = await enrolled(client);
    const older = new Browser();
    const { challenge: c1 } = await pkce();
    const oldTx = await older.startLogin(client, c1);
    const oldAssertion = await authenticator.assert({
      challenge: await signInChallengeOf(oldTx),
      origin: ORIGIN,
      rpId: RP_ID,
    });
    await new Promise((r) => setTimeout(r, 5));
    const { browser, tx, credential, verify } = await passkeyLogin(client, authenticator);
    expect(verify.status).toBe(200);
    expect((await browser.postJson("/passkey/verify", { tx, credential })).status).toBe(400);
    expect((await older.postJson("/passkey/verify", { tx: oldTx, credential: oldAssertion })).status).toBe(400);
  });

  it("refuses a signature counter that did not rise, and audits it", async () => {
    const client = await publicClient();
    const { authenticator } = await enrolled(client);
    expect((await passkeyLogin(client, authenticator)).verify.status).toBe(200);
    expect((await passkeyLogin(client, authenticator)).verify.status).toBe(200);
    const stale = authenticator.counter - 1;
    const { verify } = await passkeyLogin(client, authenticator, { assertion: { counter: stale } });
    expect(verify.status).toBe(400);
    expect((await audited("passkey_counter_regression")).map((e) => JSON.parse(e.detail))).toContainEqual(
      expect.objectContaining({ credential_id: authenticator.id, presented: stale }),
    );
    // The counter moves on from the highest seen.
    expect((await passkeyLogin(client, authenticator)).verify.status).toBe(200);
  });

  it("a tenant's passkey never signs in at another tenant (same host, path tenants)", async () => {
    const client = await publicClient();
    const { authenticator } = await enrolled(client);
    const tenant = await createTenant({});
    const tenantClient = await registerTenantClient(tenant.id, { token_endpoint_auth_method: "none" });
    const { verify } = await passkeyLogin(tenantClient, authenticator, { base: `/t/${tenant.id}` });
    expect(verify.status).toBe(400);
  });

  it("a tenant on its own host (TENANT_HOSTS): the RP id is that host; an assertion for the main host is refused", async () => {
    const t = await createTenant({});
    const host = `login.${t.id}.test`;
    const origin = `http://${host}`;
    const e = withVars({ TENANT_HOSTS: JSON.stringify({ [host]: t.id }) });
    const client = await registerTenantClient(t.id, { token_endpoint_auth_method: "none" }, e);
    const email = uniqueEmail("host");
    // The tenant's endpoints (the token endpoint's too) are at its host's root.
    const browser = new Browser({ env: e, base: origin });
    const { verifier, challenge } = await pkce();
    const authorize = (c: string) =>
      `${origin}/authorize?${new URLSearchParams({
        response_type: "code",
        client_id: client.client_id,
        redirect_uri: client.redirect_uris[0] as string,
        scope: "openid email",
        state: "s",
        code_challenge: c,
        code_challenge_method: "S256",
      })}`;
    const init = await browser.fetch(authorize(challenge), { headers: { Accept: "application/json" } });
    const { tx } = (await init.json()) as { tx: string };
    expect((await browser.postJson(`${origin}/email-code/generate`, { tx, email })).status).toBe(200);
    const box = (await (await call(`${origin}/__dev/mailbox/${encodeURIComponent(email)}`, {}, e)).json()) as {
      messages: { code: string }[];
    };
    const nav = { ...NAVIGATE, Origin: origin };
    const offerRes = await browser.postForm(
      `${origin}/email-code/verify`,
      { tx, email, code: box.messages[0]?.code as string },
      nav,
    );
    const html = await offerRes.text();
    expect(offerRes.status, html).toBe(200);
    const options = JSON.parse(
      (/data-options="([^"]*)"/.exec(html)?.[1] ?? "").replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n))),
    ) as { rp: { id: string }; challenge: string; user: { id: string } };
    expect(options.rp.id).toBe(host);
    const done = (/name="done" value="([^"]*)"/.exec(html)?.[1] ?? "").replace(/&#(\d+);/g, (_, n) =>
      String.fromCharCode(Number(n)),
    );
    const authenticator = await SoftAuthenticator.create();
    const credential = await authenticator.register({
      challenge: options.challenge,
      origin,
      rpId: host,
      userHandle: options.user.id,
    });
    const made = await browser.postForm(
      `${origin}/passkey/register`,
      { tx, done, credential: JSON.stringify(credential) },
      nav,
    );
    expect(made.status, await made.clone().text()).toBe(303);
    await finish(browser, client, made.headers.get("location") as string, verifier);

    const signIn = async (rpId: string, o: string) => {
      const b = new Browser({ env: e });
      const p = await pkce();
      const r = await b.fetch(authorize(p.challenge), { headers: { Accept: "application/json" } });
      const { tx: t2 } = (await r.json()) as { tx: string };
      const a = await authenticator.assert({ challenge: await signInChallengeOf(t2), origin: o, rpId });
      return b.postJson(`${origin}/passkey/verify`, { tx: t2, credential: a }, { Origin: origin });
    };
    expect((await signIn(RP_ID, ORIGIN)).status).toBe(400);
    expect((await signIn(host, origin)).status).toBe(200);
  });

  it("several passkeys per person; the admin API lists and removes them; a removed passkey is refused", async () => {
    const client = await publicClient();
    const at = pinClock();
    const { email, authenticator } = await enrolled(client);
    at(61_000);
    const offer = await codeSignInToOffer(client, email, { extra: { prompt: "login" } });
    const second = await enrol(offer);
    expect(second.res.status).toBe(303);
    const user = (
      (await (await admin(`/users?email=${encodeURIComponent(email)}`)).json()) as { users: { id: string }[] }
    ).users[0] as { id: string };
    const listed = await admin(`/users/${user.id}/passkeys`);
    expect(listed.status).toBe(200);
    const { passkeys } = (await listed.json()) as { passkeys: { id: string; user_id: string }[] };
    expect(passkeys.map((p) => p.id).sort()).toEqual([authenticator.id, second.authenticator.id].sort());
    expect(JSON.stringify(passkeys)).not.toContain("public_key");

    expect((await admin(`/users/${user.id}/passkeys/${authenticator.id}`, { method: "DELETE" })).status).toBe(204);
    expect((await admin(`/users/${user.id}/passkeys/${authenticator.id}`, { method: "DELETE" })).status).toBe(404);
    expect((await passkeyLogin(client, authenticator)).verify.status).toBe(400);
    expect((await passkeyLogin(client, second.authenticator)).verify.status).toBe(200);
    // GET /admin/v1/stats counts them (issue 42): by the verbs' outcomes, and what the shards hold.
    const stats = (await (await admin("/stats")).json()) as { passkeys: Record<string, number> };
    expect(stats.passkeys).toMatchObject({
      sign_ins: expect.any(Number),
      refused: expect.any(Number),
      registered: expect.any(Number),
      removed: expect.any(Number),
      stored: expect.any(Number),
    });
    expect(stats.passkeys.registered).toBeGreaterThanOrEqual(2);
    expect(stats.passkeys.removed).toBeGreaterThanOrEqual(1);
    expect(stats.passkeys.sign_ins).toBeGreaterThanOrEqual(1);
    expect(stats.passkeys.refused).toBeGreaterThanOrEqual(1);
    expect(stats.passkeys.stored).toBeGreaterThanOrEqual(1);
    const events = (await audited("passkey_created", "passkey_deleted")).filter((e) => e.user_id === user.id);
    expect(events.map((e) => e.kind).sort()).toEqual(["passkey_created", "passkey_created", "passkey_deleted"]);
  });

  it("a deleted user's passkeys are gone", async () => {
    const client = await publicClient();
    const { email, authenticator } = await enrolled(client);
    const user = (
      (await (await admin(`/users?email=${encodeURIComponent(email)}`)).json()) as { users: { id: string }[] }
    ).users[0] as { id: string };
    expect((await admin(`/users/${user.id}`, { method: "DELETE" })).status).toBe(204);
    expect((await passkeyLogin(client, authenticator)).verify.status).toBe(400);
    expect((await admin(`/users/${user.id}/passkeys`)).status).toBe(404);
  });

  it("the email page offers the passkey button and autofill, and still works without script", async () => {
    const client = await publicClient();
    const { challenge } = await pkce();
    const browser = new Browser();
    const res = await browser.fetch(
      `/authorize?${new URLSearchParams({ response_type: "code", client_id: client.client_id, redirect_uri: client.redirect_uris[0] as string, scope: "openid", code_challenge: challenge, code_challenge_method: "S256", state: "s", nonce: "n" })}`,
    );
    const html = await res.text();
    expect(html).toContain('autocomplete="username webauthn"');
    expect(html).toMatch(/<button[^>]*id="passkey"[^>]*>Sign in with a passkey<\/button>/);
    expect(html).toContain('action="/passkey/verify"');
    expect(html).toContain('action="/email-code/generate"');
  });

  it("an unknown credential, a user handle naming nothing, or a malformed credential are refused alike", async () => {
    const client = await publicClient();
    const stranger = await SoftAuthenticator.create();
    stranger.userHandle = "MC5nbG9iYWwuQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQQ";
    expect((await passkeyLogin(client, stranger)).verify.status).toBe(400);
    stranger.userHandle = "bm90IGEgaGFuZGxl";
    expect((await passkeyLogin(client, stranger)).verify.status).toBe(400);
    const browser = new Browser();
    const { challenge } = await pkce();
    const tx = await browser.startLogin(client, challenge);
    expect((await browser.postJson("/passkey/verify", { tx, credential: { id: "x" } })).status).toBe(400);
    expect((await browser.postJson("/passkey/verify", { tx, credential: "{not json" })).status).toBe(400);
  });
});

void withVars;
void FLAG_UV;

describe("passkey events as webhooks (docs/webhooks.md)", () => {
  it("passkey.created, passkey.deleted, and user.signed_in with its method", () => {
    const base = { id: "e", at: 1, user_id: "usr_1", email_key: "k", client_id: null, ip: "10.0.0.1" };
    expect(webhookEventsOf({ ...base, kind: "passkey_created", detail: { credential_id: "c1", aaguid: "a" } })).toEqual(
      [{ type: "passkey.created", data: { user_id: "usr_1", id: "c1", aaguid: "a" } }],
    );
    expect(
      webhookEventsOf({ ...base, kind: "passkey_deleted", detail: { credential_id: "c1", via: "admin_api" } }),
    ).toEqual([{ type: "passkey.deleted", data: { user_id: "usr_1", id: "c1", via: "admin_api" } }]);
    expect(webhookEventsOf({ ...base, kind: "sign_in", detail: { sid: "s", method: "passkey" } })).toEqual([
      { type: "user.signed_in", data: { user_id: "usr_1", sid: "s", ip: "10.0.0.1", method: "passkey" } },
    ]);
    // A sign-in sealed before passkeys: the email code.
    expect(webhookEventsOf({ ...base, kind: "sign_in", detail: { sid: "s" } })[0]?.data.method).toBe("email_code");
  });
});
