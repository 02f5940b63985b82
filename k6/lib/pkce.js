import crypto from "k6/crypto";
import encoding from "k6/encoding";

/** `bytes` random bytes as base64url without padding (43 characters for 32 bytes). */
export function randomUrlSafe(bytes = 32) {
  return encoding.b64encode(crypto.randomBytes(bytes), "rawurl");
}

/** RFC 7636 S256: a 43-character verifier and its challenge. */
export function pkcePair() {
  const verifier = randomUrlSafe(32);
  return { verifier, challenge: crypto.sha256(verifier, "base64rawurl") };
}

/** A JWT's payload, unverified (the suite checks claims it sent, not signatures). */
export function jwtPayload(jwt) {
  return jwtPart(jwt, 1);
}

/** The JOSE header of a JWS (alg, kid), unverified. */
export function jwtHeader(jwt) {
  return jwtPart(jwt, 0);
}

function jwtPart(jwt, index) {
  try {
    const part = String(jwt).split(".")[index];
    return JSON.parse(encoding.b64decode(part, "rawurl", "s"));
  } catch (_) {
    return null;
  }
}
