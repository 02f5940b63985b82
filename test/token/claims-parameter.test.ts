import { describe, expect, it } from "vitest";
import {
  admin,
  authorizeQuery,
  call,
  fullLogin,
  pkce,
  registerClient,
  uniqueEmail,
  userinfo,
  verifyJwt,
} from "../support/harness";

/**
 * The `claims` request parameter (OIDC Core §5.5; issue 40): email, email_verified and name asked for
 * by name reach the ID token and userinfo even where the scopes would not put them; unknown names are
 * ignored; a malformed value is invalid_request at the client.
 */
describe("the claims request parameter (OIDC Core §5.5)", () => {
  it("puts the claims asked for in the ID token and at userinfo, beyond the scope", async () => {
    const email = uniqueEmail("claims");
    expect((await admin("/users", { method: "POST", json: { email, name: "Ada Lovelace" } })).status).toBe(201);
    const client = await registerClient();
    const claims = JSON.stringify({
      id_token: { name: { essential: true }, email: null, unknown_claim: null },
      userinfo: { name: null },
    });
    const { tokens } = await fullLogin(client, email, { extra: { scope: "openid", claims } });
    const id = (await verifyJwt(tokens.id_token)).payload;
    expect(id).toMatchObject({ name: "Ada Lovelace", email, email_verified: true });
    expect(id).not.toHaveProperty("unknown_claim");
    const info = (await (await userinfo(tokens.access_token)).json()) as Record<string, unknown>;
    expect(info).toEqual({ sub: id.sub, name: "Ada Lovelace" });

    // Without a claims request, scope openid alone gives neither.
    const other = uniqueEmail("claims-plain");
    expect((await admin("/users", { method: "POST", json: { email: other, name: "Grace Hopper" } })).status).toBe(201);
    const plain = await fullLogin(client, other, { extra: { scope: "openid" } });
    const plainId = (await verifyJwt(plain.tokens.id_token)).payload;
    expect(plainId).not.toHaveProperty("name");
    expect(plainId).not.toHaveProperty("email");
    expect(await (await userinfo(plain.tokens.access_token)).json()).toEqual({ sub: plainId.sub });
  });

  it("refuses a malformed claims value at the client, and discovery says the parameter is supported", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    for (const claims of ["not json", "[1]", '{"id_token": 3}', '{"userinfo": {"name": 1}}', "x".repeat(5000)]) {
      const res = await call(`/authorize?${authorizeQuery(client, challenge, { claims })}`);
      expect(res.status, claims).toBe(302);
      expect(new URL(res.headers.get("location") as string).searchParams.get("error"), claims).toBe("invalid_request");
    }
    const doc = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, unknown>;
    expect(doc.claims_parameter_supported).toBe(true);
  });
});
