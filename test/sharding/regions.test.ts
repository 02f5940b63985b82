import { env } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { sentEventsOf } from "../../durable-objects/challenge/sent-events";
import { hmac } from "../../durable-objects/contract/crypto";
import { loadConfig } from "../../workers/shared/config/config";
import { ConfigError } from "../../workers/shared/config/vars";
import { regionLetter } from "../../workers/shared/oauth/device";

import { regionFor } from "../../workers/shared/routing/placement";
import { routeKey } from "../../workers/shared/routing/shard-refs";
import { shard } from "../../workers/shared/routing/stores";
import {
  admin,
  authorizeQuery,
  Browser,
  call,
  idParts,
  latestCode,
  pinClock,
  pkce,
  policy,
  redeem,
  refreshGrant,
  registerClient,
  sha256,
  shardStub,
  sql,
  uniqueEmail,
  uniqueIp,
  userinfo,
  withVars,
} from "../support/harness";

// Issue 12: a login's state is placed in the region its first request maps to, EU residents' state
// stays in the EU jurisdiction, ids keep their route when the region table changes, and per-address
// limits hold across regions.

const REGIONS = {
  regions: { global: {}, apac: { hint: "apac" }, wnam: { hint: "wnam" }, eu: { jurisdiction: "eu" } },
  default: "global",
  continents: { AS: "apac", OC: "apac", NA: "wnam" },
  countries: { NZ: "apac" },
  residency: { region: "eu", countries: ["EEA", "CH"] },
};
const regional = (regions: object = REGIONS, extra: Record<string, string> = {}) =>
  withVars({ REGIONS: JSON.stringify(regions), ...extra });

const SECRET = loadConfig(env).OTP_HMAC_SECRET;
const JAPAN = { country: "JP", continent: "AS" };
const GERMANY = { country: "DE", continent: "EU" };

describe("placement: which region a request maps to", () => {
  const config = loadConfig(regional());
  it("takes residency first, then countries, then continents, then the default", () => {
    expect(regionFor(config.REGIONS, { country: "DE", continent: "EU" })).toBe("eu");
    expect(regionFor(config.REGIONS, { country: "NO", continent: "EU" })).toBe("eu"); // EEA, not EU
    expect(regionFor(config.REGIONS, { country: "CH", continent: "EU" })).toBe("eu"); // listed by hand
    expect(regionFor(config.REGIONS, { country: "GB", continent: "EU" })).toBe("global"); // no EU continent row
    expect(regionFor(config.REGIONS, { country: "JP", continent: "AS" })).toBe("apac");
    expect(regionFor(config.REGIONS, { country: "NZ", continent: "OC" })).toBe("apac");
    expect(regionFor(config.REGIONS, { country: "US", continent: "NA" })).toBe("wnam");
    expect(regionFor(config.REGIONS, { country: "XX", continent: null })).toBe("global");
    expect(regionFor(config.REGIONS, undefined)).toBe("global");
  });

  it("refuses a config that names unknown regions, a residency region without a jurisdiction, or bad hints", () => {
    const bad = [
      { ...REGIONS, default: "mars" },
      { ...REGIONS, countries: { JP: "nowhere" } },
      { ...REGIONS, residency: { region: "apac", countries: ["DE"] } },
      { ...REGIONS, regions: { ...REGIONS.regions, moon: { hint: "moon" } } },
      { ...REGIONS, regions: { ...REGIONS.regions, global: { hint: "wnam" } } },
      // A jurisdiction is part of a region's name, so config cannot move a region's live objects.
      { ...REGIONS, regions: { ...REGIONS.regions, apac: { jurisdiction: "eu" } } },
      { ...REGIONS, regions: { ...REGIONS.regions, eu: { hint: "weur" } } },
      { ...REGIONS, regions: { ...REGIONS.regions, useast: { hint: "enam" } } },
      { ...REGIONS, extra: 1 },
    ];
    for (const regions of bad)
      expect(() => loadConfig(regional(regions)), JSON.stringify(regions)).toThrow(ConfigError);
    const shards = JSON.stringify({
      session: [3],
      challenge: [3],
      code: [3],
      revocation: [3],
      refresh: [3],
      regions: { mars: { session: [2] } },
    });
    expect(() => loadConfig(regional(REGIONS, { SHARDS: shards }))).toThrow(/mars is not in REGIONS/);
  });
});

/** The session row of a session cookie, read from the shard its id names (built independently). */
async function sessionRow(sessionId: string, jurisdiction?: "eu") {
  const { gen, shard, region } = idParts(sessionId);
  const stub = shardStub("session", gen, shard, region, jurisdiction);
  return sql(stub, "SELECT sub FROM sessions WHERE session_hash = ?", await sha256(sessionId));
}

describe("placement: how a region's objects are asked for", () => {
  it("asks the namespace for the region's jurisdiction and passes its location hint (the real namespace behind)", async () => {
    const config = loadConfig(regional());
    const real = env.SESSIONS as unknown as DurableObjectNamespace;
    const asked: { jurisdiction: string[]; hints: (string | undefined)[] } = { jurisdiction: [], hints: [] };
    const recording = {
      idFromName: (name: string) => real.idFromName(name),
      get: (id: DurableObjectId, opts?: { locationHint?: string }) => {
        asked.hints.push(opts?.locationHint);
        return real.get(id, opts as never);
      },
      jurisdiction: (j: DurableObjectJurisdiction) => {
        asked.jurisdiction.push(j);
        return real.jurisdiction(j);
      },
    };
    const e = { SESSIONS: recording } as never;
    const apac = shard(e, "session", routeKey(config, "session", "k", "apac"));
    const eu = shard(e, "session", routeKey(config, "session", "k", "eu"));
    const global = shard(e, "session", routeKey(config, "session", "k", "global"));
    expect(asked.hints).toEqual(["apac", undefined, undefined]);
    // The EU shard was asked of the eu jurisdiction (workerd has none, so stores.ts named it `eu/...`).
    expect(asked.jurisdiction).toEqual(["eu"]);
    // Three distinct objects, each answering.
    const ids = [apac, eu, global].map((s) => s.id.toString());
    expect(new Set(ids).size).toBe(3);
    for (const s of [apac, eu, global]) expect((await s.stats()).served).toBeGreaterThanOrEqual(0);
  });
});

describe("placement: a login's objects live in its region", () => {
  it("an apac login's transaction, session, code, sid, jtis and refresh family are on apac shards", async () => {
    const e = regional();
    const client = await registerClient();
    const browser = new Browser({ env: e, geo: JAPAN });
    const email = uniqueEmail("apac");
    const { tokens, code } = await loginIn(browser, client, email);
    const session = browser.cookies.get("kw_session");
    expect(session).toBeTruthy();
    expect(idParts(session as string).region).toBe("apac");
    expect(idParts(code).region).toBe("apac");
    expect(idParts(tokens.refresh_token as string).region).toBe("apac");
    const at = JSON.parse(atob((tokens.access_token.split(".")[1] as string).replace(/-/g, "+").replace(/_/g, "/")));
    expect(idParts(at.sid).region).toBe("apac");
    expect(idParts(at.jti).region).toBe("apac");
    // Stored where the id says: the session in `session:apac:g0:s<n>`, not in the global shard of that number.
    expect(await sessionRow(session as string)).toHaveLength(1);
    const { gen, shard } = idParts(session as string);
    expect(
      await sql(
        shardStub("session", gen, shard),
        "SELECT sub FROM sessions WHERE session_hash = ?",
        await sha256(session as string),
      ),
    ).toHaveLength(0);
    // The refresh family, in its apac shard; /token was called without any geography (a back end elsewhere).
    const fam = idParts(tokens.refresh_token as string);
    const families = await sql(
      shardStub("refresh", fam.gen, fam.shard, "apac"),
      "SELECT COUNT(*) AS n FROM families WHERE family_hash = ?",
      await sha256((tokens.refresh_token as string).split(".")[0] as string),
    );
    expect(families[0]?.n).toBe(1);
    // The email's challenge shard is apac's too.
    const key = await hmac(SECRET, `email:${email}`);
    const ref = routeKey(loadConfig(e), "challenge", key, "apac");
    const limits = await sql(
      shardStub("challenge", ref.gen, ref.shard, "apac"),
      "SELECT sends FROM email_limits WHERE email_key = ?",
      key,
    );
    expect(limits[0]?.sends).toBe(1);
    expect((await userinfo(tokens.access_token, e)).status).toBe(200);
  });

  it("an EU login's state, its challenge and its audit outbox are in the eu jurisdiction", async () => {
    const e = regional();
    const client = await registerClient();
    const browser = new Browser({ env: e, geo: GERMANY });
    const email = uniqueEmail("eu");
    const { tokens } = await loginIn(browser, client, email);
    const session = browser.cookies.get("kw_session") as string;
    expect(idParts(session).region).toBe("eu");
    expect(await sessionRow(session, "eu")).toHaveLength(1);
    // The same name outside the jurisdiction is another object, which holds nothing of it.
    expect(await sessionRow(session)).toHaveLength(0);
    // The code's challenge shard, whose limits row carries the `code_sent` event (issue 44: events ride
    // on the records a login writes; the row keeps them until its bucket goes, flushed to D1 or not).
    const key = await hmac(SECRET, `email:${email}`);
    const ref = routeKey(loadConfig(e), "challenge", key, "eu");
    const challenge = shardStub("challenge", ref.gen, ref.shard, "eu", "eu");
    const [limits] = await sql<{ sends: number; audit: string | null }>(
      challenge,
      "SELECT sends, audit FROM email_limits WHERE email_key = ?",
      key,
    );
    expect(limits).toBeDefined();
    const carried = Object.values(sentEventsOf(limits?.audit)).flat();
    expect(carried.map((ev) => ev.kind)).toEqual(["code_sent"]);
    expect(
      await sql(
        shardStub("challenge", ref.gen, ref.shard, "eu"),
        "SELECT 1 FROM email_limits WHERE email_key = ?",
        key,
      ),
    ).toHaveLength(0);
    const fam = idParts(tokens.refresh_token as string);
    expect(fam.region).toBe("eu");
  });
});

describe("placement: the store trace (development and tests only)", () => {
  it("names each Durable Object call of a step with its store, region and order, only when asked", async () => {
    const e = regional();
    const client = await registerClient();
    const browser = new Browser({ env: e, geo: JAPAN });
    const { challenge } = await pkce();
    const tx = await browser.startLogin(client, challenge);
    const email = uniqueEmail("trace");
    const plain = await browser.postJson("/email-code/generate", { tx, email });
    expect(plain.headers.get("x-keyway-store-trace")).toBeNull();
    const code = await latestCode(email, e);
    const traced = await browser.postJson("/email-code/verify", { tx, email, code }, { "X-Keyway-Trace": "1" });
    expect(traced.status).toBe(200);
    // The code's check, then (a new user) remembering who the address is, after the response: its end
    // is not known when the header is written (-1), which marks it off the critical path.
    expect(traced.headers.get("x-keyway-store-trace")).toBe(
      "challenge@apac.verifyChallenge:1-2, challenge@apac.rememberUser:3--1",
    );
  });
});

describe("placement: ids keep their route when the region table changes", () => {
  it("routes old ids after countries move, and refuses ids of a region removed from config cleanly", async () => {
    const before = regional();
    const client = await registerClient();
    const browser = new Browser({ env: before, geo: JAPAN });
    const { tokens } = await loginIn(browser, client, uniqueEmail("moved"));
    expect(idParts(tokens.refresh_token as string).region).toBe("apac");

    // Asia now goes to wnam: the apac login's refresh token still rotates in apac, its new one too.
    const moved = regional({ ...REGIONS, continents: { AS: "wnam", OC: "wnam", NA: "wnam" } });
    const rotated = await refreshGrant(client, tokens.refresh_token as string, {}, moved);
    expect(rotated.status, await rotated.clone().text()).toBe(200);
    const next = (await rotated.json()) as { refresh_token: string; access_token: string };
    expect(idParts(next.refresh_token).region).toBe("apac");
    expect((await userinfo(next.access_token, moved)).status).toBe(200);
    // A new login from Japan now lands in wnam.
    const fresh = await loginIn(new Browser({ env: moved, geo: JAPAN }), client, uniqueEmail("moved"));
    expect(idParts(fresh.tokens.refresh_token as string).region).toBe("wnam");

    // apac removed: its ids are refused as malformed (400/401), never re-routed, never a 500.
    const { apac: _, ...rest } = REGIONS.regions;
    const removed = regional({ ...REGIONS, regions: rest, continents: { NA: "wnam" }, countries: {} });
    const refused = await refreshGrant(client, next.refresh_token, {}, removed);
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: string }).error).toBe("invalid_grant");
    expect((await userinfo(next.access_token, removed)).status).toBe(401);
    // Its session cookie is no session: a silent authorization answers login_required, not an error page.
    const later = new Browser({ env: removed, geo: JAPAN });
    for (const [k, v] of browser.cookies) later.cookies.set(k, v);
    const { challenge } = await pkce();
    const silent = await later.fetch(`/authorize?${authorizeQuery(client, challenge, { prompt: "none" })}`);
    expect(silent.status).toBe(302);
    expect(new URL(silent.headers.get("location") as string).searchParams.get("error")).toBe("login_required");
  });
});

describe("placement: devices and the admin view", () => {
  it("a device's request lives in the device's region; its user code, typed by a person elsewhere, finds it", async () => {
    const e = regional();
    const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
    const client = await registerClient(
      {
        redirect_uris: [],
        post_logout_redirect_uris: [],
        token_endpoint_auth_method: "none",
        grant_types: [DEVICE_GRANT],
        scope: "openid email",
      },
      e,
    );
    const form = (path: string, params: Record<string, string>, geo?: typeof JAPAN) =>
      call(
        path,
        {
          method: "POST",
          headers: { "Content-Type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams(params),
          ...(geo ? { cf: geo } : {}),
        },
        e,
      );
    const res = await form("/device_authorization", { client_id: client.client_id }, JAPAN);
    expect(res.status, await res.clone().text()).toBe(200);
    const started = (await res.json()) as { device_code: string; user_code: string };
    expect(idParts(started.device_code).region).toBe("apac");
    expect(started.user_code[0]).toBe(regionLetter("apac"));
    // A person in Germany types it: found in apac, signs in (in the eu region), approves.
    const browser = new Browser({ env: e, geo: GERMANY });
    const email = uniqueEmail("device-eu");
    const entry = await browser.fetch(`/device?user_code=${started.user_code}`);
    const tx = /name="tx" value="([^"]+)"/.exec(await entry.text())?.[1] as string;
    expect(idParts(tx).region).toBe("eu");
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    const verify = await browser.postJson("/email-code/verify", { tx, email, code: await latestCode(email, e) });
    const back = await browser.fetch(((await verify.json()) as { redirect_to: string }).redirect_to);
    await browser.fetch(back.headers.get("location") as string);
    const decided = await browser.fetch("/device/decision", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Origin: env.ISSUER },
      body: new URLSearchParams({ user_code: started.user_code, decision: "approve" }),
    });
    expect(decided.status, await decided.clone().text()).toBe(200);
    const tokens = await form("/token", {
      grant_type: DEVICE_GRANT,
      device_code: started.device_code,
      client_id: client.client_id,
    });
    expect(tokens.status, await tokens.clone().text()).toBe(200);
    const at = (await tokens.json()) as { access_token: string };
    // The access token belongs to the person's login: its sid in the eu region.
    const claims = JSON.parse(atob((at.access_token.split(".")[1] as string).replace(/-/g, "+").replace(/_/g, "/")));
    expect(idParts(claims.sid).region).toBe("eu");
  });

  it("GET /admin/v1/shards shows each region's placement and counts", async () => {
    const shards = JSON.stringify({
      session: [3],
      challenge: [3],
      code: [3],
      revocation: [3],
      refresh: [3],
      regions: { apac: { session: [2] } },
    });
    const res = await admin("/shards", {}, regional(REGIONS, { SHARDS: shards }));
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      regions: Record<
        string,
        { hint?: string; jurisdiction?: string; own_counts: boolean; stores: Record<string, { shards: number }> }
      >;
      default_region: string;
      home_region: string;
    };
    expect(body.regions.apac).toMatchObject({
      hint: "apac",
      own_counts: true,
      stores: { session: { shards: 2 }, code: { shards: 3 } },
    });
    expect(body.regions.eu).toMatchObject({ jurisdiction: "eu", own_counts: false });
    expect(body).toMatchObject({ default_region: "global", home_region: "global" });
  });
});

describe("per-address limits across regions (issue 12 item 3)", () => {
  it("guesses for one address spread over every region meet one hourly limit: at most limit + regions - 1", async () => {
    const limit = 6;
    const e = regional(REGIONS, {
      POLICY: policy({
        email_failures_per_hour: limit,
        email_failures_per_hour_all_sources: limit,
        otp_max_attempts: 10,
      }),
    });
    const client = await registerClient();
    const victim = uniqueEmail("spread");
    const places = [undefined, JAPAN, { country: "US", continent: "NA" }, GERMANY];
    // One login (and code) per region, each guessed at from fresh sources.
    const logins = [];
    for (const geo of places) {
      const browser = new Browser({ env: e, ...(geo ? { geo } : {}) });
      const { challenge } = await pkce();
      const tx = await browser.startLogin(client, challenge);
      const gen = await browser.postJson("/email-code/generate", { tx, email: victim });
      expect(gen.status, await gen.clone().text()).toBe(200);
      logins.push({ browser, tx });
    }
    const real = await latestCode(victim, e);
    const wrong = real === "000000" ? "111111" : "000000";
    let failures = 0;
    const open = new Set(logins.keys());
    for (let round = 0; round < 20 && open.size; round++) {
      for (const i of [...open]) {
        const { browser, tx } = logins[i] as (typeof logins)[number];
        const res = await browser.postJson(
          "/email-code/verify",
          { tx, email: victim, code: wrong },
          {
            "CF-Connecting-IP": uniqueIp(),
          },
        );
        if (res.status === 400) failures++;
        else {
          expect(res.status, await res.clone().text()).toBe(429);
          open.delete(i);
        }
      }
    }
    expect(open.size).toBe(0);
    expect(failures).toBeGreaterThanOrEqual(limit);
    expect(failures).toBeLessThanOrEqual(limit + places.length - 1);
    // The home shard counted every one of them.
    const key = await hmac(SECRET, `email:${victim}`);
    const home = routeKey(loadConfig(e), "challenge", key, "global");
    const [row] = await sql<{ failures: number }>(
      shardStub("challenge", home.gen, home.shard),
      "SELECT failures FROM email_limits WHERE email_key = ?",
      key,
    );
    expect(row?.failures).toBe(failures);
    // Locked everywhere, the right code included, in every region.
    for (const { browser, tx } of logins) {
      const res = await browser.postJson("/email-code/verify", { tx, email: victim, code: real });
      expect(res.status).toBe(429);
    }
  });

  it("one source cannot lock an address out by spreading its guesses over three regions (issue 27 item 5)", async () => {
    // The attack as found: one IP tried wrong codes in each of three regions; the victim, from her own
    // IP, then got 429 for an hour. The home counts per source too, so that IP meets its own limit
    // (10) plus at most one more per other region, far below the all-sources limit (30).
    const e = regional(REGIONS, { POLICY: policy({ otp_max_attempts: 10 }) });
    const client = await registerClient();
    const victim = uniqueEmail("victim");
    const advance = pinClock();
    const attackerIp = uniqueIp();
    const places = [undefined, JAPAN, GERMANY];
    let failures = 0;
    for (const geo of places) {
      const browser = new Browser({ env: e, ip: attackerIp, ...(geo ? { geo } : {}) });
      const { challenge } = await pkce();
      const tx = await browser.startLogin(client, challenge);
      const gen = await browser.postJson("/email-code/generate", { tx, email: victim });
      if (gen.status === 429) continue; // the source is already locked for the address here
      expect(gen.status, await gen.clone().text()).toBe(200);
      const real = await latestCode(victim, e);
      const wrong = real === "000000" ? "111111" : "000000";
      for (let i = 0; i < 10; i++) {
        const res = await browser.postJson("/email-code/verify", { tx, email: victim, code: wrong });
        if (res.status === 429) break;
        expect(res.status, await res.clone().text()).toBe(400);
        failures++;
      }
    }
    expect(failures).toBeGreaterThanOrEqual(10);
    expect(failures).toBeLessThanOrEqual(10 + places.length - 1);
    // The home counted them for that source as well as in all.
    const key = await hmac(SECRET, `email:${victim}`);
    const home = routeKey(loadConfig(e), "challenge", key, "global");
    const stub = shardStub("challenge", home.gen, home.shard);
    const [all] = await sql<{ failures: number }>(stub, "SELECT failures FROM email_limits WHERE email_key = ?", key);
    expect(all?.failures).toBe(failures);
    const bySource = await sql<{ failures: number }>(
      stub,
      "SELECT failures FROM source_failures WHERE email_key = ?",
      key,
    );
    expect(bySource.map((r) => r.failures)).toEqual([failures]);
    // The victim signs in from her own address, in the home region and in the EU, once the attacker's
    // codes' resend interval has passed (well within the hour the failures count in).
    for (const [i, geo] of [undefined, GERMANY].entries()) {
      advance(61_000 + i * 1000); // the pinned clock moves on, so the mailbox's newest code is this one
      const browser = new Browser({ env: e, ...(geo ? { geo } : {}) });
      const { challenge } = await pkce();
      const tx = await browser.startLogin(client, challenge);
      const gen = await browser.postJson("/email-code/generate", { tx, email: victim });
      expect(gen.status, await gen.clone().text()).toBe(200);
      const ok = await browser.postJson("/email-code/verify", { tx, email: victim, code: await latestCode(victim, e) });
      expect(ok.status, `${JSON.stringify(geo)} ${await ok.clone().text()}`).toBe(200);
    }
    vi.useRealTimers();
  });

  it("a right code after a wrong one in another region than the home signs in (one report, settled)", async () => {
    const e = regional();
    const client = await registerClient();
    const browser = new Browser({ env: e, geo: JAPAN });
    const email = uniqueEmail("typo");
    const { challenge, verifier } = await pkce();
    const tx = await browser.startLogin(client, challenge);
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    const real = await latestCode(email, e);
    const typo = await browser.postJson("/email-code/verify", {
      tx,
      email,
      code: real === "000000" ? "111111" : "000000",
    });
    expect(typo.status).toBe(400);
    const ok = await browser.postJson("/email-code/verify", { tx, email, code: real });
    expect(ok.status, await ok.clone().text()).toBe(200);
    const { redirect_to } = (await ok.json()) as { redirect_to: string };
    const fin = await browser.fetch(redirect_to);
    const code = new URL(fin.headers.get("location") as string).searchParams.get("code") as string;
    expect((await redeem(client, code, verifier, {}, e)).status).toBe(200);
  });
});

/** The five steps from `browser` (its geography), redeemed by a back end with none. */
async function loginIn(browser: Browser, client: Awaited<ReturnType<typeof registerClient>>, email: string) {
  const { verifier, challenge } = await pkce();
  const tx = await browser.startLogin(client, challenge);
  expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
  const ver = await browser.postJson("/email-code/verify", { tx, email, code: await latestCode(email, browser.env) });
  expect(ver.status, await ver.clone().text()).toBe(200);
  const fin = await browser.fetch(((await ver.json()) as { redirect_to: string }).redirect_to);
  expect(fin.status).toBe(302);
  const code = new URL(fin.headers.get("location") as string).searchParams.get("code") as string;
  const res = await redeem(client, code, verifier, {}, browser.env);
  expect(res.status, await res.clone().text()).toBe(200);
  const tokens = (await res.json()) as { access_token: string; refresh_token?: string; id_token: string };
  return { tokens, code, tx };
}
