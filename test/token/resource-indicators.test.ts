import { describe, expect, it } from "vitest";
import {
  admin,
  authorizeQuery,
  Browser,
  basicAuth,
  call,
  form,
  fullLogin,
  ISSUER,
  loginForCode,
  pkce,
  redeem,
  refreshGrant,
  registerClient,
  type TestClient,
  type Tokens,
  userinfo,
  verifyJwt,
} from "../support/harness";

/** Resource indicators (RFC 8707; issue 27 item 3): `resource` names the API a token is for, its `aud`. */
const API = "https://api.example.com/";
const REPORTS = "https://reports.example.com/v1";

/** A token request with several `resource` values, which a record cannot hold. */
function tokenRequest(client: TestClient, params: [string, string][]) {
  return call("/token", {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Authorization: basicAuth(client) },
    body: new URLSearchParams(params),
  });
}

const machine = (resources: string[]) =>
  registerClient({
    redirect_uris: [],
    post_logout_redirect_uris: [],
    grant_types: ["client_credentials"],
    scope: "reports:read",
    resources,
  });

const audOf = async (token: string) => (await verifyJwt(token, { typ: "at+jwt" })).payload.aud;

describe("resource indicators: client credentials (RFC 8707 §2, issue 27 item 3)", () => {
  it("gives a machine token the resource asked for as its audience, and several as a list", async () => {
    const client = await machine([API, REPORTS]);
    expect(client.resources).toEqual([API, REPORTS]);
    const one = await form(client, { grant_type: "client_credentials", resource: API });
    expect(one.status, await one.clone().text()).toBe(200);
    expect(await audOf(((await one.json()) as Tokens).access_token)).toBe(API);

    const two = await tokenRequest(client, [
      ["grant_type", "client_credentials"],
      ["resource", API],
      ["resource", REPORTS],
    ]);
    expect(two.status, await two.clone().text()).toBe(200);
    const token = ((await two.json()) as Tokens).access_token;
    expect(await audOf(token)).toEqual([API, REPORTS]);
    // The resource server introspects it (RFC 7662), whatever its audience.
    const intro = await form(client, { token }, "/introspect");
    expect(await intro.json()).toMatchObject({ active: true, aud: [API, REPORTS], client_id: client.client_id });
  });

  it("refuses an unregistered or malformed resource with invalid_target, and issues nothing", async () => {
    const client = await machine([API]);
    const cases: [string, string][][] = [
      [["resource", "https://other.example.com/"]],
      [["resource", "relative/path"]],
      [["resource", `${API}#fragment`]],
      [["resource", ""]],
      [
        ["resource", API],
        ["resource", "https://other.example.com/"],
      ],
    ];
    for (const extra of cases) {
      const res = await tokenRequest(client, [["grant_type", "client_credentials"], ...extra]);
      expect(res.status, JSON.stringify(extra)).toBe(400);
      const body = (await res.json()) as { error: string; error_description: string; access_token?: string };
      expect(body.error, JSON.stringify(extra)).toBe("invalid_target");
      expect(body.access_token).toBeUndefined();
      expect(res.headers.get("cache-control")).toContain("no-store");
    }
    // A client with nothing registered may name no resource at all.
    const bare = await machine([]);
    const res = await form(bare, { grant_type: "client_credentials", resource: API });
    expect(((await res.json()) as { error: string }).error).toBe("invalid_target");
  });

  it("keeps the userinfo audience for a token asked for without resource", async () => {
    const client = await machine([API]);
    const res = await form(client, { grant_type: "client_credentials" });
    expect(await audOf(((await res.json()) as Tokens).access_token)).toBe(`${ISSUER}/userinfo`);
  });
});

describe("resource indicators: the code flow and refresh (RFC 8707 §2.1, §2.2)", () => {
  it("carries the authorized resource into the access token beside userinfo's audience, and through refresh", async () => {
    const client = await registerClient({ resources: [API, REPORTS] });
    const { tokens } = await fullLogin(client, undefined, { extra: { resource: API } });
    const ui = `${ISSUER}/userinfo`;
    expect(await audOf(tokens.access_token)).toEqual([API, ui]);
    // Still good at userinfo: the person's claims are the openid scope's.
    expect((await userinfo(tokens.access_token)).status).toBe(200);
    // The ID token's audience stays the client (OIDC Core §2).
    expect((await verifyJwt(tokens.id_token)).payload.aud).toBe(client.client_id);

    const refreshed = await refreshGrant(client, tokens.refresh_token as string);
    expect(refreshed.status, await refreshed.clone().text()).toBe(200);
    const next = (await refreshed.json()) as Tokens;
    expect(await audOf(next.access_token)).toEqual([API, ui]);

    // A refresh may not reach a resource the login did not authorize, though the client registered it;
    // refused before anything rotates, so the token presented still works.
    const widened = await refreshGrant(client, next.refresh_token as string, { resource: REPORTS });
    expect(widened.status).toBe(400);
    expect(((await widened.json()) as { error: string }).error).toBe("invalid_target");
    const again = await refreshGrant(client, next.refresh_token as string, { resource: API });
    expect(again.status, await again.clone().text()).toBe(200);
    expect(await audOf(((await again.json()) as Tokens).access_token)).toEqual([API, ui]);
  });

  it("stops granting a resource the client no longer registers, at refresh too", async () => {
    const client = await registerClient({ resources: [API, REPORTS] });
    const { tokens } = await fullLogin(client, undefined, { extra: { resource: [API, REPORTS] } });
    const patched = await admin(`/clients/${client.client_id}`, { method: "PATCH", json: { resources: [REPORTS] } });
    expect(patched.status).toBe(200);
    const refused = await refreshGrant(client, tokens.refresh_token as string, { resource: API });
    expect(((await refused.json()) as { error: string }).error).toBe("invalid_target");
    const refreshed = await refreshGrant(client, tokens.refresh_token as string);
    expect(refreshed.status, await refreshed.clone().text()).toBe(200);
    expect(await audOf(((await refreshed.json()) as Tokens).access_token)).toEqual([REPORTS, `${ISSUER}/userinfo`]);
  });

  it("lets the token request narrow the resources authorized, never widen them", async () => {
    const client = await registerClient({ resources: [API, REPORTS] });
    // Two resources at /authorize (a repeated parameter, §2).
    const login = await loginForCode(client, undefined, { extra: { resource: [API, REPORTS] } });
    const narrowed = await redeem(client, login.code, login.verifier, { resource: API });
    expect(narrowed.status, await narrowed.clone().text()).toBe(200);
    expect(await audOf(((await narrowed.json()) as Tokens).access_token)).toEqual([API, `${ISSUER}/userinfo`]);

    const other = await loginForCode(client, undefined, { extra: { resource: API } });
    const widened = await redeem(client, other.code, other.verifier, { resource: REPORTS });
    expect(widened.status).toBe(400);
    expect(((await widened.json()) as { error: string }).error).toBe("invalid_target");
  });

  it("redirects an unregistered resource at /authorize to the client as invalid_target", async () => {
    const client = await registerClient({ resources: [API] });
    const { challenge } = await pkce();
    const res = await new Browser().fetch(
      `/authorize?${authorizeQuery(client, challenge, { resource: "https://evil.example.com/" })}`,
    );
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location") as string);
    expect(location.origin + location.pathname).toBe(client.redirect_uris[0]);
    expect(location.searchParams.get("error")).toBe("invalid_target");
    expect(location.searchParams.get("state")).toBe("st-123");
  });

  it("refuses a token for another resource only at userinfo", async () => {
    const client = await machine([API]);
    const res = await form(client, { grant_type: "client_credentials", resource: API });
    const token = ((await res.json()) as Tokens).access_token;
    expect((await userinfo(token)).status).toBe(401);
  });
});

describe("resource indicators: registration and discovery", () => {
  it("validates registered resources and says resource indicators are supported", async () => {
    for (const resources of [["not a uri"], ["https://api.example.com/#x"], ["relative"]]) {
      const res = await admin("/clients", {
        method: "POST",
        json: {
          client_name: "r",
          redirect_uris: ["https://rp.example.com/cb"],
          token_endpoint_auth_method: "none",
          resources,
        },
      });
      expect(res.status, JSON.stringify(resources)).toBe(400);
    }
    const client = await registerClient({});
    expect(client.resources).toEqual([]);
    const patched = await admin(`/clients/${client.client_id}`, { method: "PATCH", json: { resources: [API] } });
    expect(((await patched.json()) as TestClient).resources).toEqual([API]);
    const doc = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, unknown>;
    expect(doc.resource_indicators_supported).toBe(true);
  });
});
