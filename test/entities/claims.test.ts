import { env, runInDurableObject } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { loadConfig } from "../../workers/shared/config/config";
import { auditEmailKey } from "../../workers/shared/events/audit";
import { routeKey } from "../../workers/shared/routing/shard-refs";
import {
  authorizeQuery,
  Browser,
  codeFromSession,
  fullLogin,
  latestCode,
  loginForCode,
  pinClock,
  pkce,
  redeem,
  refreshGrant,
  registerClient,
  shardStub,
  type TestClient,
  type Tokens,
  uniqueEmail,
  verifyJwt,
} from "../support/harness";
import { addMember, createOrganization, createUser, scoped } from "./support";

/**
 * Issue 24: organization and entity claims in tokens, with no call on the login's path. The user's
 * grants reach the tokens through the snapshot pushed to the address's ChallengeStore row; a session's
 * next code and a refresh read the grants as they are now.
 */

// The same address signs in several times per test: each login a minute after the last (the resend interval).
let clock: (offset: number) => void;
let elapsed = 0;
const aMinuteLater = () => {
  elapsed += 61_000;
  clock(elapsed);
};
beforeEach(() => {
  clock = pinClock();
  elapsed = 0;
});
afterEach(() => {
  vi.useRealTimers();
});

const claimsOf = async (tokens: Tokens) => ({
  id: (await verifyJwt(tokens.id_token)).payload,
  access: (await verifyJwt(tokens.access_token, { typ: "at+jwt" })).payload,
});

async function tokensFor(client: TestClient, code: string, verifier: string): Promise<Tokens> {
  const res = await redeem(client, code, verifier);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as Tokens;
}

describe("organizations in tokens (CONTRACT §8)", () => {
  it("a user in two organizations: each login carries the organization asked for and the user's roles in it", async () => {
    const acme = await createOrganization("Acme");
    const globex = await createOrganization("Globex");
    const user = await createUser();
    await addMember(acme.id, user.id, ["admin", "billing"]);
    await addMember(globex.id, user.id, ["viewer"]);
    const client = await registerClient({ token_endpoint_auth_method: "none" });

    const first = await fullLogin(client, user.email, { extra: { organization: acme.id } });
    const a = await claimsOf(first.tokens);
    expect(a.id).toMatchObject({ org_id: acme.id, org_roles: ["admin", "billing"] });
    expect(a.access).toMatchObject({ org_id: acme.id, org_roles: ["admin", "billing"] });

    // The same session, for the other organization: read from the user's EntityStore shard.
    aMinuteLater();
    const again = await codeFromSession(first.browser, client, { organization: globex.id });
    const b = await claimsOf(await tokensFor(client, again.code, again.verifier));
    expect(b.id).toMatchObject({ org_id: globex.id, org_roles: ["viewer"] });

    // Without an organization asked for (and no template), nothing of them.
    aMinuteLater();
    const plain = await fullLogin(client, user.email);
    expect((await claimsOf(plain.tokens)).id.org_id).toBeUndefined();
  });

  it("the snapshot the verify step reads is pushed to the address's ChallengeStore row when a membership changes", async () => {
    const org = await createOrganization("Pushed");
    const user = await createUser();
    await addMember(org.id, user.id, ["member"]);
    const config = loadConfig(env);
    const emailKey = await auditEmailKey(config, user.email);
    const ref = routeKey(config, "challenge", emailKey, config.REGIONS.default);
    const row = await runInDurableObject(shardStub("challenge", ref.gen, ref.shard), (_o, state) =>
      state.storage.sql
        .exec<{ user_id: string; claims: string; claims_version: number }>(
          "SELECT user_id, claims, claims_version FROM known_users WHERE email_key = ?",
          emailKey,
        )
        .toArray(),
    );
    expect(row).toHaveLength(1);
    expect(row[0]?.user_id).toBe(user.id);
    expect(JSON.parse(row[0]?.claims as string)).toMatchObject({
      v: 1,
      grants: [{ id: org.id, type: "organization", name: "Pushed", roles: ["member"] }],
    });
  });

  it("a login for an organization the user is not in is refused with access_denied at the client", async () => {
    const org = await createOrganization("Closed");
    const user = await createUser();
    const client = await registerClient({ token_endpoint_auth_method: "none" });
    // The code is right and the session is made; the organization is what is refused.
    const { redirect: to, browser } = await loginForCode(client, user.email, { extra: { organization: org.id } });
    expect(to.searchParams.get("error")).toBe("access_denied");
    expect(to.searchParams.get("state")).toBe("st-123");
    expect(to.searchParams.get("code")).toBeNull();
    // A malformed organization is invalid_request, before any login.
    const bad = await browser.fetch(
      `/authorize?${authorizeQuery(client, (await pkce()).challenge, { organization: "not-an-org" })}`,
    );
    expect(bad.status).toBe(302);
    expect(new URL(bad.headers.get("location") as string).searchParams.get("error")).toBe("invalid_request");
  });

  it("a client that requires an organization: the only one is chosen; with several, a page lists them and the choice ends the login", async () => {
    const client = await registerClient({
      token_endpoint_auth_method: "none",
      token_claims: { organization: "required", claims: [{ claim: "org_name", source: "organization.name" }] },
    });
    const solo = await createOrganization("Solo");
    const one = await createUser();
    await addMember(solo.id, one.id, ["member"]);
    const only = await fullLogin(client, one.email);
    expect((await claimsOf(only.tokens)).id).toMatchObject({
      org_id: solo.id,
      org_roles: ["member"],
      org_name: "Solo",
    });

    const north = await createOrganization("North");
    const south = await createOrganization("South");
    const two = await createUser();
    await addMember(north.id, two.id, ["owner"]);
    await addMember(south.id, two.id, ["guest"]);
    // The verified login goes back to the authorization request, which the new session answers with the picker.
    const { browser, verifier, redirect: pickerUrl } = await loginForCode(client, two.email);
    const picker = await browser.fetch(pickerUrl.toString());
    expect(picker.status).toBe(200);
    const html = await picker.text();
    expect(html).toContain("North");
    expect(html).toContain("South");
    expect(html).toContain(`name="organization" value="${south.id}"`);
    // The choice: the same request with `organization`, as the page's form sends it.
    const action = new URL(pickerUrl);
    action.searchParams.set("organization", south.id);
    const chosen = await browser.fetch(`${action.pathname}${action.search}`);
    expect(chosen.status).toBe(302);
    const code = new URL(chosen.headers.get("location") as string).searchParams.get("code") as string;
    const tokens = await tokensFor(client, code, verifier);
    expect((await claimsOf(tokens)).access).toMatchObject({
      org_id: south.id,
      org_roles: ["guest"],
      org_name: "South",
    });
    // Silent authentication cannot show the picker (OIDC Core §3.1.2.6).
    const silent = new URL(pickerUrl);
    silent.searchParams.set("prompt", "none");
    const quiet = await browser.fetch(`${silent.pathname}${silent.search}`);
    expect(quiet.status).toBe(302);
    expect(new URL(quiet.headers.get("location") as string).searchParams.get("error")).toBe("interaction_required");

    // A user in no organization cannot sign in to it.
    const lonely = await createUser();
    const denied = await loginForCode(client, lonely.email);
    expect(denied.redirect.searchParams.get("error")).toBe("access_denied");
    expect(denied.code).toBeNull();
  });

  it("template claims from the organization's attributes and from grants of another type, within the client's size cap", async () => {
    const admin = scoped();
    expect(
      (
        await admin("/entity-types", {
          method: "POST",
          json: {
            name: "project",
            roles: { lead: { permissions: ["project:write"] }, member: { permissions: ["project:read"] } },
          },
        })
      ).status,
    ).toBeOneOf([201, 409]);
    const org = await createOrganization("Initech", { attributes: { plan: "gold", seats: 40 } });
    const user = await createUser();
    await addMember(org.id, user.id, ["member"]);
    const projects = [];
    for (const name of ["Apollo", "Gemini"]) {
      const res = await admin("/entities", {
        method: "POST",
        json: { type: "project", name, attributes: { code: name.slice(0, 3) } },
      });
      expect(res.status).toBe(201);
      projects.push((await res.json()) as { id: string });
    }
    for (const [i, p] of projects.entries()) {
      const res = await admin("/grants", {
        method: "POST",
        json: { user_id: user.id, target_id: p.id, roles: [i === 0 ? "lead" : "member"] },
      });
      expect(res.status, await res.clone().text()).toBe(201);
    }
    // A role the template does not have is refused.
    const wrong = await admin("/grants", {
      method: "POST",
      json: { user_id: user.id, target_id: projects[0]?.id, roles: ["boss"] },
    });
    expect(wrong.status).toBe(400);

    const client = await registerClient({
      token_endpoint_auth_method: "none",
      token_claims: {
        claims: [
          { claim: "plan", source: "organization.attributes.plan" },
          { claim: "projects", source: "grants.project.names" },
          { claim: "project_codes", source: "grants.project.attributes.code" },
          { claim: "perms", source: "grants.project.permissions" },
        ],
      },
    });
    const { tokens } = await fullLogin(client, user.email, { extra: { organization: org.id } });
    const { access } = await claimsOf(tokens);
    expect(access.org_id).toBe(org.id);
    expect(access.plan).toBe("gold");
    expect([...(access.projects as string[])].sort()).toEqual(["Apollo", "Gemini"]);
    expect([...(access.project_codes as string[])].sort()).toEqual(["Apo", "Gem"]);
    expect([...(access.perms as string[])].sort()).toEqual(["project:read", "project:write"]);
    expect(access.claims_truncated).toBeUndefined();

    // Over the cap: the claims that fit, in order, and `claims_truncated`.
    aMinuteLater();
    const small = await registerClient({
      token_endpoint_auth_method: "none",
      token_claims: {
        max_bytes: 256,
        claims: [
          { claim: "plan", source: "organization.attributes.plan" },
          { claim: "everything", source: "grants.project.roles" },
          { claim: "more", source: "grants.project.ids" },
        ],
      },
    });
    const cut = await claimsOf((await fullLogin(small, user.email, { extra: { organization: org.id } })).tokens);
    expect(cut.id.plan).toBe("gold");
    expect(cut.id.claims_truncated).toBe(true);
    expect(JSON.stringify(cut.id).length).toBeLessThan(1500);

    // A template naming a protocol claim is refused.
    const reserved = await admin("/clients", {
      method: "POST",
      json: {
        client_name: "bad",
        redirect_uris: ["https://rp.example.com/cb"],
        token_endpoint_auth_method: "none",
        token_claims: { claims: [{ claim: "sub", source: "organization.name" }] },
      },
    });
    expect(reserved.status).toBe(400);
  });
});

describe("reserved claim names (issue 38)", () => {
  it("a template may not name a protocol, standard or Keyway claim in any case: 400 invalid_request", async () => {
    for (const claim of [
      "Sub",
      "Iss",
      "Org_id",
      "ORG_ROLES",
      "name",
      "Name",
      "preferred_username",
      "Given_Name",
      "Email_Verified",
      "locale",
    ]) {
      const res = await scoped()("/clients", {
        method: "POST",
        json: {
          client_name: "bad",
          redirect_uris: ["https://rp.example.com/cb"],
          token_endpoint_auth_method: "none",
          token_claims: { claims: [{ claim, source: "organization.name" }] },
        },
      });
      const body = (await res.json()) as { error: string; error_description: string };
      expect(res.status, `${claim}: ${JSON.stringify(body)}`).toBe(400);
      expect(body.error).toBe("invalid_request");
      expect(body.error_description).toMatch(
        /^token_claims\.claims\.0\.claim: that name, in any case, is a protocol claim/,
      );
    }
    // A name of the template's own is still taken.
    await registerClient({
      token_endpoint_auth_method: "none",
      token_claims: { claims: [{ claim: "org_name", source: "organization.name" }] },
    });
  });

  it("a user without a name does not get the organization's name as name, even from a template stored before the rule", async () => {
    const org = await createOrganization("Initrode", { attributes: { plan: "silver" } });
    const user = await createUser();
    await addMember(org.id, user.id, ["member"]);
    const client = await registerClient({ token_endpoint_auth_method: "none" });
    // A template written before names were reserved without regard to case, as D1 still holds it.
    const legacy = {
      claims: [
        { claim: "name", source: "organization.name" },
        { claim: "Sub", source: "organization.name" },
        { claim: "plan", source: "organization.attributes.plan" },
      ],
    };
    await env.DB.prepare("UPDATE clients SET token_claims = ? WHERE client_id = ?")
      .bind(JSON.stringify(legacy), client.client_id)
      .run();
    const { tokens } = await fullLogin(client, user.email, { extra: { organization: org.id } });
    const { id, access } = await claimsOf(tokens);
    for (const token of [id, access]) {
      expect(token.name).toBeUndefined();
      expect(token.Sub).toBeUndefined();
      // The template's other claims stay.
      expect(token.plan).toBe("silver");
      expect(token.org_id).toBe(org.id);
    }
  });
});

describe("a grant change reaches the next tokens", () => {
  it("a removed membership: gone from the next login at once, and its login's refresh is refused", async () => {
    const org = await createOrganization("Leaving");
    const user = await createUser();
    await addMember(org.id, user.id, ["admin"]);
    const client = await registerClient({ token_endpoint_auth_method: "none" });
    const before = await fullLogin(client, user.email, { extra: { organization: org.id } });
    expect((await claimsOf(before.tokens)).id.org_roles).toEqual(["admin"]);

    const removed = await scoped()(`/organizations/${org.id}/members/${user.id}`, { method: "DELETE" });
    expect(removed.status).toBe(204);
    // The next login: the push happened before the admin call answered (a minute passes for the resend interval).
    aMinuteLater();
    const next = await loginForCode(client, user.email, { extra: { organization: org.id } });
    expect(next.redirect.searchParams.get("error")).toBe("access_denied");

    const refreshed = await refreshGrant(client, before.tokens.refresh_token as string);
    expect(refreshed.status).toBe(400);
    expect(await refreshed.json()).toMatchObject({ error: "invalid_grant" });
  });

  it("changed roles: the next refresh carries the new ones, never the revoked", async () => {
    const org = await createOrganization("Shifting");
    const user = await createUser();
    await addMember(org.id, user.id, ["admin", "member"]);
    const client = await registerClient({ token_endpoint_auth_method: "none" });
    const { tokens } = await fullLogin(client, user.email, { extra: { organization: org.id } });
    expect((await claimsOf(tokens)).access.org_roles).toEqual(["admin", "member"]);

    await addMember(org.id, user.id, ["member"]);
    const res = await refreshGrant(client, tokens.refresh_token as string);
    expect(res.status, await res.clone().text()).toBe(200);
    const next = await claimsOf((await res.json()) as Tokens);
    expect(next.access).toMatchObject({ org_id: org.id, org_roles: ["member"] });
    expect(next.id).toMatchObject({ org_id: org.id, org_roles: ["member"] });

    // Renaming the organization reaches the members' next tokens too (their copies are refreshed).
    const client2 = await registerClient({
      token_endpoint_auth_method: "none",
      token_claims: { claims: [{ claim: "org_name", source: "organization.name" }] },
    });
    const renamed = await scoped()(`/organizations/${org.id}`, { method: "PATCH", json: { name: "Shifted" } });
    expect(renamed.status).toBe(200);
    aMinuteLater();
    const after = await fullLogin(client2, user.email, { extra: { organization: org.id } });
    expect((await claimsOf(after.tokens)).id.org_name).toBe("Shifted");
  });
});

describe("a grant change reaches a login under way (issue 38 item 3)", () => {
  /** A login for `org` up to its verified code: the `redirect_to` that issues the code is not yet followed. */
  async function verifiedLogin(client: TestClient, email: string, org: string, scope = "openid email offline_access") {
    const browser = new Browser();
    const { verifier, challenge } = await pkce();
    const tx = await browser.startLogin(client, challenge, { organization: org, scope });
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    const ver = await browser.postJson("/email-code/verify", { tx, email, code: await latestCode(email) });
    expect(ver.status, await ver.clone().text()).toBe(200);
    const { redirect_to } = (await ver.json()) as { redirect_to: string };
    const codeOf = async () => {
      const fin = await browser.fetch(redirect_to);
      expect(fin.status).toBe(302);
      return new URL(fin.headers.get("location") as string).searchParams.get("code") as string;
    };
    return { browser, verifier, codeOf };
  }

  it("a membership removed after the verify: the login's code issues nothing, before or after the code step", async () => {
    const org = await createOrganization("Mid-login");
    const user = await createUser();
    await addMember(org.id, user.id, ["admin"]);
    const client = await registerClient({ token_endpoint_auth_method: "none" });

    // Without offline_access the code is spent in the login's RevocationStore shard (token.ts).
    // Removed between the verify and the code step.
    const early = await verifiedLogin(client, user.email, org.id, "openid email");
    aMinuteLater();
    // Removed between the code step and the redemption, on a second login.
    await addMember(org.id, user.id, ["admin"]);
    aMinuteLater();
    const late = await verifiedLogin(client, user.email, org.id, "openid email");
    const lateCode = await late.codeOf();
    aMinuteLater();
    expect((await scoped()(`/organizations/${org.id}/members/${user.id}`, { method: "DELETE" })).status).toBe(204);

    for (const [code, verifier] of [
      [await early.codeOf(), early.verifier],
      [lateCode, late.verifier],
    ] as const) {
      const res = await redeem(client, code, verifier);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ error: "invalid_grant" });
    }
  });

  it("changed roles after the verify: refused; a login verified after the change carries the new roles", async () => {
    const org = await createOrganization("Demoted");
    const user = await createUser();
    await addMember(org.id, user.id, ["admin"]);
    const client = await registerClient({ token_endpoint_auth_method: "none" });
    const stale = await verifiedLogin(client, user.email, org.id);
    aMinuteLater();
    await addMember(org.id, user.id, ["viewer"]);
    // With offline_access the code is spent by its refresh family (token.ts): the same check holds there.
    const res = await redeem(client, await stale.codeOf(), stale.verifier);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: "invalid_grant" });

    aMinuteLater();
    const fresh = await fullLogin(client, user.email, { extra: { organization: org.id } });
    expect((await claimsOf(fresh.tokens)).id).toMatchObject({ org_id: org.id, org_roles: ["viewer"] });
  });
});

describe("users without grants are unchanged", () => {
  it("a user who never had a grant signs in with no organization claims and no EntityStore shard", async () => {
    const client = await registerClient({ token_endpoint_auth_method: "none" });
    const email = uniqueEmail("plain");
    const { tokens } = await fullLogin(client, email);
    const { id } = await claimsOf(tokens);
    expect(id.org_id).toBeUndefined();
    expect(id.claims_truncated).toBeUndefined();
  });
});
