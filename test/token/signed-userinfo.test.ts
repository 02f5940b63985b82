import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from "jose";
import { describe, expect, it } from "vitest";
import { admin, call, fullLogin, ISSUER, registerClient, userinfo, verifyJwt } from "../support/harness";
import {
  clientRow,
  mintRegistrationToken,
  readRegistration,
  registerAt,
  registerDynamic,
} from "../support/registration";
import { at, createTenant, registerTenantClient, tenantAdmin, tenantFullLogin } from "../tenants/support";

/**
 * Signed userinfo (OIDC Core §5.3.2, OIDC Registration §2 `userinfo_signed_response_alg`): a client
 * that registered RS256 or ES256 gets userinfo as a JWT of `application/jwt`, signed by its tenant's
 * current key of that algorithm, with the userinfo claims and `iss` and `aud`. Others get JSON.
 */

/** Verifies a signed userinfo response against a tenant's published keys: its header and claims. */
async function signedUserinfo(res: Response, jwksPath = "/jwks.json", issuer = ISSUER) {
  expect(res.status, await res.clone().text()).toBe(200);
  expect(res.headers.get("content-type")).toBe("application/jwt");
  expect(res.headers.get("cache-control")).toBe("no-store");
  const jwt = await res.text();
  const jwks = createLocalJWKSet((await (await call(jwksPath)).json()) as never);
  const { payload, protectedHeader } = await jwtVerify(jwt, jwks, { issuer });
  return { payload: payload as Record<string, unknown>, header: protectedHeader, jwt };
}

describe("signed userinfo (OIDC Core §5.3.2)", () => {
  for (const alg of ["RS256", "ES256"] as const)
    it(`a client registered with userinfo_signed_response_alg ${alg} gets a JWT signed by the current ${alg} key, with iss and aud`, async () => {
      const client = await registerClient({ userinfo_signed_response_alg: alg, id_token_signed_response_alg: alg });
      expect(client.userinfo_signed_response_alg).toBe(alg);
      expect((await clientRow(client.client_id)).userinfo_signed_response_alg).toBe(alg);
      const { tokens, email } = await fullLogin(client);
      const { sub } = (await verifyJwt(tokens.id_token)).payload;
      for (const method of ["GET", "POST"]) {
        const res = await call("/userinfo", { method, headers: { Authorization: `Bearer ${tokens.access_token}` } });
        const { payload, header } = await signedUserinfo(res);
        expect(header.alg).toBe(alg);
        // The key the ID token was signed with: the tenant's current key of that algorithm.
        expect(header.kid).toBe(decodeProtectedHeader(tokens.id_token).kid);
        expect(payload).toEqual({ sub, email, email_verified: true, iss: ISSUER, aud: client.client_id });
      }
    });

  it("a client without it gets JSON; the admin API shows null, and a PATCH turns it on and off", async () => {
    const client = await registerClient();
    expect(client.userinfo_signed_response_alg).toBeNull();
    expect((await clientRow(client.client_id)).userinfo_signed_response_alg).toBeNull();
    const { tokens } = await fullLogin(client);
    const plain = await userinfo(tokens.access_token);
    expect(plain.headers.get("content-type")).toMatch(/^application\/json/);

    const on = await admin(`/clients/${client.client_id}`, {
      method: "PATCH",
      json: { userinfo_signed_response_alg: "ES256" },
    });
    expect(on.status, await on.clone().text()).toBe(200);
    expect(await on.json()).toMatchObject({ userinfo_signed_response_alg: "ES256" });
    const got = await admin(`/clients/${client.client_id}`);
    expect(await got.json()).toMatchObject({ userinfo_signed_response_alg: "ES256" });
    // The client's registration as it is now governs, for a token issued before the change too.
    expect((await signedUserinfo(await userinfo(tokens.access_token))).header.alg).toBe("ES256");

    const off = await admin(`/clients/${client.client_id}`, {
      method: "PATCH",
      json: { userinfo_signed_response_alg: null },
    });
    expect(off.status).toBe(200);
    expect((await clientRow(client.client_id)).userinfo_signed_response_alg).toBeNull();
    expect((await userinfo(tokens.access_token)).headers.get("content-type")).toMatch(/^application\/json/);
  });

  it("the admin API refuses an algorithm Keyway does not sign with", async () => {
    for (const alg of ["HS256", "none", "PS256"]) {
      const res = await admin("/clients", {
        method: "POST",
        json: {
          client_name: "x",
          redirect_uris: ["https://x.example.com/cb"],
          token_endpoint_auth_method: "client_secret_basic",
          userinfo_signed_response_alg: alg,
        },
      });
      expect(res.status, String(alg)).toBe(400);
    }
  });

  it("dynamic registration takes it, shows it in the registration response and at registration_client_uri, and refuses other algorithms", async () => {
    const client = await registerDynamic({
      redirect_uris: ["https://dyn-ui.example.com/cb"],
      userinfo_signed_response_alg: "RS256",
    });
    expect(client.userinfo_signed_response_alg).toBe("RS256");
    expect(await readRegistration(client)).toMatchObject({ userinfo_signed_response_alg: "RS256" });
    expect((await clientRow(client.client_id)).userinfo_signed_response_alg).toBe("RS256");
    const plain = await registerDynamic({ redirect_uris: ["https://dyn-ui2.example.com/cb"] });
    expect(Object.hasOwn(plain, "userinfo_signed_response_alg")).toBe(false);

    const token = await mintRegistrationToken();
    for (const alg of ["HS256", "none", 7]) {
      const res = await registerAt(
        { redirect_uris: ["https://dyn-ui3.example.com/cb"], userinfo_signed_response_alg: alg },
        { token },
      );
      expect(res.status, String(alg)).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe("invalid_client_metadata");
    }
    // The signed userinfo it registered works through a whole login.
    const { tokens } = await fullLogin(client);
    expect((await signedUserinfo(await userinfo(tokens.access_token))).payload.aud).toBe(client.client_id);
  });

  it("at a tenant: signed with the tenant's key, iss the tenant's issuer", async () => {
    const tenant = await createTenant();
    const client = await registerTenantClient(tenant.id, { userinfo_signed_response_alg: "RS256" });
    const { tokens } = await tenantFullLogin(tenant.id, client);
    const res = await call(at(tenant.id, "/userinfo"), { headers: { Authorization: `Bearer ${tokens.access_token}` } });
    const { payload, header } = await signedUserinfo(res, at(tenant.id, "/jwks.json"), tenant.issuer);
    expect(payload).toMatchObject({ iss: tenant.issuer, aud: client.client_id });
    expect(header.kid).toBe(decodeProtectedHeader(tokens.id_token).kid);
    // The origin's keys do not verify it.
    const origin = createLocalJWKSet((await (await call("/jwks.json")).json()) as never);
    await expect(
      jwtVerify(
        await (
          await call(at(tenant.id, "/userinfo"), {
            headers: { Authorization: `Bearer ${tokens.access_token}` },
          })
        ).text(),
        origin,
      ),
    ).rejects.toThrow();
    const read = await tenantAdmin(tenant.id, `/clients/${client.client_id}`);
    expect(await read.json()).toMatchObject({ userinfo_signed_response_alg: "RS256" });
  });

  it("discovery advertises userinfo_signing_alg_values_supported RS256 and ES256, at the origin and at a tenant (issue 38)", async () => {
    const tenant = await createTenant();
    for (const path of ["/.well-known/openid-configuration", at(tenant.id, "/.well-known/openid-configuration")]) {
      const doc = (await (await call(path)).json()) as Record<string, unknown>;
      expect(doc.userinfo_endpoint, path).toMatch(/\/userinfo$/);
      // OIDC Discovery §3: the algorithms userinfo may be signed with, exactly those a client may
      // register (never an empty list, which said nothing true: issue 38).
      expect(doc.userinfo_signing_alg_values_supported, path).toEqual(["RS256", "ES256"]);
    }
  });
});
