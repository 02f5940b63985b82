// A software WebAuthn authenticator for `npm run cost` with PASSKEYS=1 (issue 42): an ES256 key, an
// attestation object of format `none` and assertions signed over the authenticator data and the client
// data's hash (WebAuthn §6.1, §6.5). The tests' own is test/support/authenticator.ts.
import { createHash, webcrypto } from "node:crypto";

const enc = new TextEncoder();
const b64u = (bytes) => Buffer.from(bytes).toString("base64url");
const sha = (data) => new Uint8Array(createHash("sha256").update(data).digest());
const concat = (...parts) => Uint8Array.from(Buffer.concat(parts.map((p) => Buffer.from(p))));
const u32 = (n) => Uint8Array.of((n >>> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255);

/** The CBOR (RFC 8949) of unsigned and negative integers, byte and text strings, and maps. */
function cbor(v) {
  const head = (major, n) =>
    n < 24
      ? [(major << 5) | n]
      : n < 256
        ? [(major << 5) | 24, n]
        : n < 65536
          ? [(major << 5) | 25, n >> 8, n & 255]
          : [(major << 5) | 26, (n >>> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255];
  if (typeof v === "number") return Uint8Array.from(v >= 0 ? head(0, v) : head(1, -1 - v));
  if (typeof v === "string") return concat(Uint8Array.from(head(3, enc.encode(v).length)), enc.encode(v));
  if (v instanceof Uint8Array) return concat(Uint8Array.from(head(2, v.length)), v);
  return concat(Uint8Array.from(head(5, v.size)), ...[...v].flatMap(([k, x]) => [cbor(k), cbor(x)]));
}

/** WebCrypto's raw r||s as the DER SEQUENCE of ES256. */
function der(raw) {
  const int = (b) => {
    let i = 0;
    while (i < b.length - 1 && b[i] === 0) i++;
    let x = b.slice(i);
    if (x[0] & 0x80) x = concat(Uint8Array.of(0), x);
    return concat(Uint8Array.of(2, x.length), x);
  };
  const body = concat(int(raw.slice(0, 32)), int(raw.slice(32)));
  return concat(Uint8Array.of(0x30, body.length), body);
}

export class SoftAuthenticator {
  static async create() {
    const a = new SoftAuthenticator();
    a.keys = await webcrypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"]);
    a.credentialId = webcrypto.getRandomValues(new Uint8Array(32));
    a.counter = 0;
    a.userHandle = "";
    return a;
  }

  /** navigator.credentials.create()'s result as JSON, from the page's creation options. */
  async register({ challenge, origin, rpId, userHandle }) {
    this.userHandle = userHandle;
    const raw = new Uint8Array(await webcrypto.subtle.exportKey("raw", this.keys.publicKey));
    const cose = cbor(
      new Map([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, raw.slice(1, 33)],
        [-3, raw.slice(33, 65)],
      ]),
    );
    const id = this.credentialId;
    const authData = concat(
      sha(rpId),
      Uint8Array.of(0x45),
      u32(0),
      new Uint8Array(16),
      Uint8Array.of(0, id.length),
      id,
      cose,
    );
    const clientData = enc.encode(JSON.stringify({ type: "webauthn.create", challenge, origin, crossOrigin: false }));
    const attestationObject = cbor(
      new Map([
        ["fmt", "none"],
        ["attStmt", new Map()],
        ["authData", authData],
      ]),
    );
    return {
      id: b64u(id),
      rawId: b64u(id),
      type: "public-key",
      clientExtensionResults: {},
      response: {
        clientDataJSON: b64u(clientData),
        attestationObject: b64u(attestationObject),
        transports: ["internal"],
      },
    };
  }

  /** navigator.credentials.get()'s result as JSON; the counter rises by one. */
  async assert({ challenge, origin, rpId }) {
    this.counter += 1;
    const authData = concat(sha(rpId), Uint8Array.of(0x05), u32(this.counter));
    const clientData = enc.encode(JSON.stringify({ type: "webauthn.get", challenge, origin, crossOrigin: false }));
    const sig = new Uint8Array(
      await webcrypto.subtle.sign(
        { name: "ECDSA", hash: "SHA-256" },
        this.keys.privateKey,
        concat(authData, sha(clientData)),
      ),
    );
    const id = b64u(this.credentialId);
    return {
      id,
      rawId: id,
      type: "public-key",
      clientExtensionResults: {},
      response: {
        clientDataJSON: b64u(clientData),
        authenticatorData: b64u(authData),
        signature: b64u(der(sig)),
        userHandle: this.userHandle,
      },
    };
  }
}

/** The sign-in challenge of a login transaction (workers/op-auth/src/passkey-ceremony.ts). */
export const signInChallengeOf = (tx) => b64u(sha(`webauthn.get:${tx.split(".")[0]}`));
