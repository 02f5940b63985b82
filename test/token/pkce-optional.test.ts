import { describe, expect, it } from "vitest";
import {
  admin,
  Browser,
  basicAuth,
  call,
  loginForCode,
  pkce,
  registerClient,
  type TestClient,
  uniqueEmail,
  verifyJwt,
} from "../support/harness";

/**
 * Issue 40: PKCE stays required for public clients and by default; a confidential client may be
 * registered without it (`require_pkce: false`), as OIDC Core's code flow and the OpenID Foundation's
 * plans expect (RFC 9700 §2.1.1: such a client relies on the nonce). Its codes then take no verifier,
 * so a challenge cannot be stripped from a request that had one (PKCE downgrade, RFC 9700 §2.1.1).
 */

/** A code for `client` from an authorization request without PKCE (the harness's request, its PKCE left out). */
async function codeWithoutPkce(client: TestClient): Promise<string> {
  const extra = { scope: "openid email", code_challenge: null, code_challenge_method: null };
  return (await loginForCode(client, uniqueEmail("pkce"), { extra })).code;
}

function redeemWith(client: TestClient, code: string, extra: Record<string, string> = {}) {
  return call("/token", {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded", Authorization: basicAuth(client) },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: client.redirect_uris[0] as string,
      ...extra,
    }),
  });
}

describe("PKCE for confidential clients (issue 40)", () => {
  it("a confidential client registered without PKCE signs in with none, and its code refuses a verifier", async () => {
    const client = await registerClient({ require_pkce: false });
    expect(client).toMatchObject({ require_pkce: false });
    const tokens = await redeemWith(client, await codeWithoutPkce(client));
    expect(tokens.status, await tokens.clone().text()).toBe(200);
    const { id_token } = (await tokens.json()) as { id_token: string };
    expect((await verifyJwt(id_token)).payload.nonce).toBe("n-456");

    // A verifier for a code issued without a challenge: refused (and the code spent), no downgrade.
    const code = await codeWithoutPkce(client);
    const refused = await redeemWith(client, code, { code_verifier: (await pkce()).verifier });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ error: "invalid_grant" });
    expect((await redeemWith(client, code)).status).toBe(400);
  });

  it("such a client that sends PKCE anyway must prove it at the token endpoint", async () => {
    const client = await registerClient({ require_pkce: false });
    const { code, verifier } = await loginForCode(client, uniqueEmail("pkce"), { extra: { scope: "openid email" } });
    const missing = await redeemWith(client, code);
    expect(missing.status).toBe(400);
    expect(await missing.json()).toMatchObject({ error: "invalid_grant" });
    // A missing verifier spends nothing: the right one still redeems the code.
    expect((await redeemWith(client, code, { code_verifier: verifier })).status).toBe(200);
  });

  it("by default, and always for a public client, a request without PKCE is refused at the client", async () => {
    const client = await registerClient();
    expect(client).toMatchObject({ require_pkce: true });
    const browser = new Browser();
    const res = await browser.fetch(
      `/authorize?${new URLSearchParams({
        response_type: "code",
        client_id: client.client_id,
        redirect_uri: client.redirect_uris[0] as string,
        scope: "openid",
        state: "s-2",
      })}`,
    );
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location") as string);
    expect(location.searchParams.get("error")).toBe("invalid_request");
    expect(location.searchParams.get("state")).toBe("s-2");

    const publicClient = await admin("/clients", {
      method: "POST",
      json: {
        client_name: "public without PKCE",
        redirect_uris: ["https://rp.example.com/cb"],
        token_endpoint_auth_method: "none",
        require_pkce: false,
      },
    });
    expect(publicClient.status).toBe(400);
    expect(await publicClient.json()).toMatchObject({ error: "invalid_request" });
    // Nor can a PATCH turn it off for one.
    const pub = await registerClient({ token_endpoint_auth_method: "none" });
    const patched = await admin(`/clients/${pub.client_id}`, { method: "PATCH", json: { require_pkce: false } });
    expect(patched.status).toBe(400);
  });
});
