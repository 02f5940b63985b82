import { runDurableObjectAlarm } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  admin,
  Browser,
  call,
  ISSUER,
  latestCode,
  pinClock,
  policy,
  registerClient,
  stubForId,
  type TestClient,
  type Tokens,
  uniqueEmail,
  userinfo,
  verifyJwt,
  withVars,
} from "../support/harness";

afterEach(() => {
  vi.useRealTimers();
});

const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";

const deviceClient = (overrides: Record<string, unknown> = {}, testEnv?: object) =>
  registerClient(
    {
      redirect_uris: [],
      post_logout_redirect_uris: [],
      token_endpoint_auth_method: "none",
      grant_types: [DEVICE_GRANT, "refresh_token"],
      scope: "openid email offline_access",
      ...overrides,
    },
    testEnv,
  );

const postForm = (path: string, params: Record<string, string>) =>
  call(path, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(params),
  });

interface DeviceStart {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

async function startDevice(client: TestClient, scope = "openid email offline_access"): Promise<DeviceStart> {
  const res = await postForm("/device_authorization", { client_id: client.client_id, scope });
  expect(res.status, await res.clone().text()).toBe(200);
  expect(res.headers.get("cache-control")).toBe("no-store");
  return (await res.json()) as DeviceStart;
}

const poll = (client: TestClient, deviceCode: string) =>
  postForm("/token", { grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: client.client_id });

async function expectError(res: Response, error: string) {
  expect(res.status, await res.clone().text()).toBe(400);
  expect(res.headers.get("cache-control")).toBe("no-store");
  expect(((await res.json()) as { error: string }).error).toBe(error);
}

const decide = (browser: Browser, userCode: string, decision: "approve" | "deny", origin = ISSUER) =>
  browser.fetch("/device/decision", {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Origin: origin },
    body: new URLSearchParams({ user_code: userCode, decision }),
  });

/** A person at the verification page: types the code (as given), signs in by email code, sees the consent page. */
async function signInAtDevicePage(browser: Browser, typed: string, email: string): Promise<string> {
  const entry = await browser.fetch(`/device?user_code=${encodeURIComponent(typed)}`);
  expect(entry.status, await entry.clone().text()).toBe(200);
  const html = await entry.text();
  const tx = /name="tx" value="([^"]+)"/.exec(html)?.[1] as string;
  expect(tx, "the login page").toBeTruthy();
  expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
  const code = await latestCode(email, browser.env);
  const verify = await browser.postJson("/email-code/verify", { tx, email, code });
  expect(verify.status, await verify.clone().text()).toBe(200);
  const { redirect_to } = (await verify.json()) as { redirect_to: string };
  const back = await browser.fetch(redirect_to);
  expect(back.status).toBe(302);
  const location = back.headers.get("location") as string;
  // Absolute, under the issuer: a tenant's device page is under its own path (issue 23).
  expect(location).toMatch(new RegExp(`^${ISSUER}/device\\?user_code=[A-Z]{8}$`));
  const consent = await browser.fetch(location);
  expect(consent.status).toBe(200);
  return consent.text();
}

describe("device authorization grant (RFC 8628, issue 14)", () => {
  it("answers the device with codes, lists the endpoint in discovery, and refuses a client without the grant", async () => {
    const client = await deviceClient();
    const started = await startDevice(client);
    expect(started.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(started.device_code).toMatch(/^dc_/);
    expect(started).toMatchObject({
      verification_uri: `${ISSUER}/device`,
      verification_uri_complete: `${ISSUER}/device?user_code=${started.user_code}`,
      expires_in: 600,
      interval: 5,
    });
    const doc = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, unknown>;
    expect(doc.device_authorization_endpoint).toBe(`${ISSUER}/device_authorization`);
    expect(doc.grant_types_supported).toContain(DEVICE_GRANT);
    const login = await registerClient({ token_endpoint_auth_method: "none" });
    const refused = await postForm("/device_authorization", { client_id: login.client_id, scope: "openid" });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: string }).error).toBe("unauthorized_client");
    const noOpenid = await postForm("/device_authorization", { client_id: client.client_id, scope: "email" });
    expect(((await noOpenid.json()) as { error: string }).error).toBe("invalid_scope");
    // Without a scope: what the client registered.
    const defaulted = await postForm("/device_authorization", { client_id: client.client_id });
    expect(defaulted.status).toBe(200);
  });

  it("keeps the device pending, slows a fast poller by 5 s, then gives tokens once after the person allows", async () => {
    const at = pinClock();
    const client = await deviceClient();
    const started = await startDevice(client);
    await expectError(await poll(client, started.device_code), "authorization_pending");
    // Again at once: faster than the interval.
    await expectError(await poll(client, started.device_code), "slow_down");
    at(6_000); // 5 s is no longer enough: the interval is now 10 s
    await expectError(await poll(client, started.device_code), "slow_down");
    at(30_000);
    await expectError(await poll(client, started.device_code), "authorization_pending");

    // The person types the code in lower case without the hyphen, signs in, and allows.
    const browser = new Browser();
    const email = uniqueEmail("device");
    const consent = await signInAtDevicePage(browser, started.user_code.replace("-", "").toLowerCase(), email);
    expect(consent).toContain(`test client`);
    expect(consent).toContain(email);
    const allowed = await decide(browser, started.user_code, "approve");
    expect(allowed.status).toBe(200);
    expect(await allowed.text()).toContain("Device connected");

    at(60_000);
    const res = await poll(client, started.device_code);
    expect(res.status, await res.clone().text()).toBe(200);
    const tokens = (await res.json()) as Tokens;
    const id = await verifyJwt(tokens.id_token, { audience: client.client_id });
    expect(id.payload).toMatchObject({ email, amr: ["otp"] });
    expect(tokens.refresh_token).toBeTruthy();
    expect((await userinfo(tokens.access_token)).status).toBe(200);
    // Once.
    at(90_000);
    await expectError(await poll(client, started.device_code), "invalid_grant");
    // Another client cannot redeem a device code.
    const other = await deviceClient();
    await expectError(await poll(other, started.device_code), "invalid_grant");
  });

  it("answers access_denied once when the person denies, and expired_token after expires_in", async () => {
    const at = pinClock();
    const client = await deviceClient();
    const denied = await startDevice(client);
    const browser = new Browser();
    await signInAtDevicePage(browser, denied.user_code, uniqueEmail("deny"));
    expect(await (await decide(browser, denied.user_code, "deny")).text()).toContain("Request denied");
    at(10_000);
    await expectError(await poll(client, denied.device_code), "access_denied");
    at(20_000);
    await expectError(await poll(client, denied.device_code), "invalid_grant");

    // With a live session the code goes straight to the consent page.
    const late = await startDevice(client);
    const page = await browser.fetch(`/device?user_code=${late.user_code}`);
    expect(await page.text()).toContain("Allow");
    at(20_000 + 601_000);
    await expectError(await poll(client, late.device_code), "expired_token");
    const gone = await browser.fetch(`/device?user_code=${late.user_code}`);
    expect(gone.status).toBe(400);
  });

  it("limits POST /device_authorization per client address (issue 27 item 7)", async () => {
    const e = withVars({ POLICY: policy({ ip_device_authorization_per_minute: 3 }) });
    const client = await deviceClient({}, e);
    const from = (ip: string) =>
      call(
        "/device_authorization",
        {
          method: "POST",
          headers: { "Content-Type": "application/x-www-form-urlencoded", "CF-Connecting-IP": ip },
          body: new URLSearchParams({ client_id: client.client_id, scope: "openid" }),
        },
        e,
      );
    const ip = `10.77.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;
    for (let i = 0; i < 3; i++) expect((await from(ip)).status).toBe(200);
    const refused = await from(ip);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("60");
    expect(((await refused.json()) as { error: string }).error).toBe("too_many_requests");
    // Another address is not held back by it.
    expect((await from(`${ip.split(".").slice(0, 3).join(".")}.251`)).status).toBe(200);
  });

  it("keeps answering expired_token after the expiry sweep has run (issue 27 item 1, RFC 8628 §3.5)", async () => {
    const at = pinClock();
    const client = await deviceClient();
    const started = await startDevice(client);
    // Past expires_in, and the shard's alarm has swept what expired.
    at(600_000 + 2_000);
    await runDurableObjectAlarm(stubForId("code", started.device_code));
    await expectError(await poll(client, started.device_code), "expired_token");
    at(600_000 + 8_000);
    await runDurableObjectAlarm(stubForId("code", started.device_code));
    await expectError(await poll(client, started.device_code), "expired_token");
    // A device code no one issued stays invalid_grant.
    await expectError(await poll(client, `${started.device_code.slice(0, -4)}AAAA`), "invalid_grant");
  });

  it("tolerates a second of polling jitter, and caps how far slow_down grows the interval (issue 27 item 2)", async () => {
    const at = pinClock();
    const client = await deviceClient();
    const started = await startDevice(client);
    await expectError(await poll(client, started.device_code), "authorization_pending");
    // x/oauth2 polls on a 5 s ticker that fires a few ms early: not too fast.
    at(4_996);
    await expectError(await poll(client, started.device_code), "authorization_pending");
    // A device that keeps polling every second: slowed down, but never past 60 s between polls.
    let last = "";
    for (let i = 1; i <= 20; i++) {
      at(4_996 + i * 1_000);
      const res = await poll(client, started.device_code);
      last = ((await res.json()) as { error_description: string }).error_description;
    }
    expect(last).toContain("60 s");
  });

  it("refuses wrong and malformed user codes, a decision from another origin, and a decision without a session", async () => {
    const client = await deviceClient();
    const started = await startDevice(client);
    const browser = new Browser();
    expect((await browser.fetch("/device")).status).toBe(200);
    expect((await browser.fetch("/device?user_code=AEIO-U123")).status).toBe(400); // letters not in the alphabet
    const wrong = await browser.fetch("/device?user_code=BBBB-BBBB");
    expect(wrong.status).toBe(400);
    expect(await wrong.text()).toContain("not valid");
    // No session: nothing is decided.
    const anonymous = await decide(new Browser(), started.user_code, "approve");
    expect(await anonymous.text()).toContain("Signed out");
    await signInAtDevicePage(browser, started.user_code, uniqueEmail("origin"));
    const foreign = await decide(browser, started.user_code, "approve", "https://evil.example");
    expect(foreign.status).toBe(403);
    await expectError(await poll(client, started.device_code), "authorization_pending");
    await expectError(await poll(client, "dc_0_0_forged"), "invalid_grant");
  });

  it("registers a device client without a redirect URI, and requires openid", async () => {
    const bad = await admin("/clients", {
      method: "POST",
      json: { client_name: "tv", token_endpoint_auth_method: "none", grant_types: [DEVICE_GRANT], scope: "email" },
    });
    expect(bad.status).toBe(400);
    expect((await deviceClient()).redirect_uris).toEqual([]);
  });

  it("limits device-code lookups per address, on a page a person can read (429, Retry-After)", async () => {
    const e = withVars({ POLICY: policy({ ip_verify_per_minute: 2, client_cache_seconds: 0 }) });
    const client = await deviceClient({}, e);
    // The binding counts in wall-clock minutes: start well inside one.
    const left = 60_000 - (Date.now() % 60_000);
    if (left < 15_000) await new Promise((resolve) => setTimeout(resolve, left + 100));
    const started = (await (
      await call(
        "/device_authorization",
        {
          method: "POST",
          headers: { "Content-Type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ client_id: client.client_id }),
        },
        e,
      )
    ).json()) as DeviceStart;
    const browser = new Browser({ env: e });
    for (let i = 0; i < 2; i++)
      expect((await browser.fetch(`/device?user_code=${started.user_code}`)).status).toBe(200);
    const refused = await browser.fetch(`/device?user_code=${started.user_code}`);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("content-type")).toMatch(/^text\/html/);
    expect(refused.headers.get("retry-after")).toBe("60");
  }, 30_000);
});
