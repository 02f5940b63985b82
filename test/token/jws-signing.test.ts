import { exportJWK, importJWK, jwtVerify, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import type { SigningAlg } from "../../workers/shared/oauth/keys";
import { signJwt } from "../../workers/shared/oauth/tokens";

/** The ring's keys are jose's imports for their alg (keys.ts); the test makes them the same way. */
async function ringKey(alg: SigningAlg) {
  const params =
    alg === "RS256"
      ? { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" }
      : { name: "ECDSA", namedCurve: "P-256" };
  const pair = (await crypto.subtle.generateKey(params, true, ["sign", "verify"])) as CryptoKeyPair;
  const key = (await importJWK({ ...(await exportJWK(pair.privateKey)), alg }, alg)) as CryptoKey;
  const pub = (await importJWK({ ...(await exportJWK(pair.publicKey)), alg }, alg)) as CryptoKey;
  return { signing: { kid: `k-${alg}`, alg, key }, pub };
}

const payload = {
  org_id: "o1",
  client_id: "c1",
  scope: "openid email",
  sid: "sid_x",
  auth_time: 1_700_000_000,
  cnf: { jkt: "t" },
};

/** The login's two tokens are signed without jose's SignJWT (tokens.ts signJwt): the same bytes. */
describe("JWT signing (tokens.ts signJwt)", () => {
  it("makes the very token SignJWT makes of the same header and claims (RS256 signatures are deterministic)", async () => {
    const { signing } = await ringKey("RS256");
    const header = { alg: "RS256", typ: "at+jwt", kid: signing.kid };
    const viaJose = await new SignJWT(payload)
      .setProtectedHeader(header)
      .setIssuer("https://issuer.example")
      .setSubject("u1")
      .setAudience(["https://issuer.example/userinfo", "https://api.example"])
      .setJti("at_1")
      .setIssuedAt(1_700_000_100)
      .setExpirationTime(1_700_000_700)
      .sign(signing.key);
    const ours = await signJwt(signing, header, {
      ...payload,
      iss: "https://issuer.example",
      sub: "u1",
      aud: ["https://issuer.example/userinfo", "https://api.example"],
      jti: "at_1",
      iat: 1_700_000_100,
      exp: 1_700_000_700,
    });
    expect(ours).toBe(viaJose);
  });
  it("signs ES256 as a JWS verifiers accept, header and claims as SignJWT encodes them", async () => {
    const { signing, pub } = await ringKey("ES256");
    const header = { alg: "ES256", typ: "JWT", kid: signing.kid };
    const claims = {
      ...payload,
      iss: "https://issuer.example",
      sub: "u1",
      aud: "c1",
      iat: 1_700_000_100,
      exp: 4_000_000_000,
    };
    const ours = await signJwt(signing, header, claims);
    const viaJose = await new SignJWT(payload)
      .setProtectedHeader(header)
      .setIssuer("https://issuer.example")
      .setSubject("u1")
      .setAudience("c1")
      .setIssuedAt(1_700_000_100)
      .setExpirationTime(4_000_000_000)
      .sign(signing.key);
    expect(ours.split(".").slice(0, 2)).toEqual(viaJose.split(".").slice(0, 2));
    const verified = await jwtVerify(ours, pub, { algorithms: ["ES256"], currentDate: new Date(1_700_000_200_000) });
    expect(verified.payload).toEqual(claims);
    expect(verified.protectedHeader).toEqual(header);
  });
});
