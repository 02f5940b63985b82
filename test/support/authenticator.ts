/**
 * A software authenticator for the passkey tests (issue 42): an ES256 key pair, the CBOR of an
 * attestation object (format `none`) and a COSE public key, and assertions signed over authenticator
 * data and the client data's hash, with every field a test may want to get wrong (origin, RP id,
 * flags, counter, challenge, type).
 */

const enc = new TextEncoder();

export function b64u(bytes: ArrayBuffer | Uint8Array): string {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  let s = "";
  for (const b of u8) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function fromB64u(value: string): Uint8Array {
  const s = atob(value.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(s, (ch) => ch.charCodeAt(0));
}

// ---- a minimal CBOR encoder (RFC 8949): unsigned and negative integers, byte and text strings, maps.
type Cbor = number | string | Uint8Array | Map<Cbor, Cbor>;
function head(major: number, n: number): number[] {
  if (n < 24) return [(major << 5) | n];
  if (n < 256) return [(major << 5) | 24, n];
  if (n < 65536) return [(major << 5) | 25, n >> 8, n & 255];
  return [(major << 5) | 26, (n >>> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255];
}
export function cbor(v: Cbor): Uint8Array {
  if (typeof v === "number") return Uint8Array.from(v >= 0 ? head(0, v) : head(1, -1 - v));
  if (typeof v === "string") {
    const b = enc.encode(v);
    return concat(Uint8Array.from(head(3, b.length)), b);
  }
  if (v instanceof Uint8Array) return concat(Uint8Array.from(head(2, v.length)), v);
  const parts: Uint8Array[] = [Uint8Array.from(head(5, v.size))];
  for (const [k, val] of v) parts.push(cbor(k), cbor(val));
  return concat(...parts);
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const sha = async (data: Uint8Array | string) =>
  new Uint8Array(
    await crypto.subtle.digest("SHA-256", (typeof data === "string" ? enc.encode(data) : data) as BufferSource),
  );

const u32 = (n: number) => Uint8Array.from([(n >>> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255]);

/** WebCrypto's raw r||s signature as the DER SEQUENCE WebAuthn's ES256 uses. */
function derOf(raw: Uint8Array): Uint8Array {
  const int = (b: Uint8Array) => {
    let i = 0;
    while (i < b.length - 1 && b[i] === 0) i++;
    let v: Uint8Array = b.slice(i);
    if ((v[0] as number) & 0x80) v = concat(Uint8Array.of(0), v);
    return concat(Uint8Array.of(2, v.length), v);
  };
  const body = concat(int(raw.slice(0, 32)), int(raw.slice(32)));
  return concat(Uint8Array.of(0x30, body.length), body);
}

export const FLAG_UP = 0x01;
export const FLAG_UV = 0x04;
const FLAG_AT = 0x40;

export interface AssertionOptions {
  challenge: string;
  origin: string;
  rpId: string;
  /** Overrides: what a test gets wrong on purpose. */
  flags?: number;
  counter?: number;
  type?: string;
  userHandle?: string;
}

export class SoftAuthenticator {
  readonly credentialId = crypto.getRandomValues(new Uint8Array(32));
  counter = 0;
  userHandle = "";
  private constructor(private readonly keys: CryptoKeyPair) {}

  static async create(): Promise<SoftAuthenticator> {
    const keys = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
      "sign",
      "verify",
    ])) as CryptoKeyPair;
    return new SoftAuthenticator(keys);
  }

  get id(): string {
    return b64u(this.credentialId);
  }

  private async coseKey(): Promise<Uint8Array> {
    const raw = new Uint8Array((await crypto.subtle.exportKey("raw", this.keys.publicKey)) as ArrayBuffer);
    return cbor(
      new Map<Cbor, Cbor>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, raw.slice(1, 33)],
        [-3, raw.slice(33, 65)],
      ]),
    );
  }

  /** navigator.credentials.create()'s result as JSON (RegistrationResponseJSON), attestation `none`. */
  async register(o: {
    challenge: string;
    origin: string;
    rpId: string;
    userHandle: string;
    flags?: number;
  }): Promise<Record<string, unknown>> {
    this.userHandle = o.userHandle;
    const flags = o.flags ?? FLAG_UP | FLAG_UV;
    const authData = concat(
      await sha(o.rpId),
      Uint8Array.of(flags | FLAG_AT),
      u32(this.counter),
      new Uint8Array(16),
      Uint8Array.of(this.credentialId.length >> 8, this.credentialId.length & 255),
      this.credentialId,
      await this.coseKey(),
    );
    const clientData = enc.encode(
      JSON.stringify({ type: "webauthn.create", challenge: o.challenge, origin: o.origin, crossOrigin: false }),
    );
    const attestationObject = cbor(
      new Map<Cbor, Cbor>([
        ["fmt", "none"],
        ["attStmt", new Map()],
        ["authData", authData],
      ]),
    );
    return {
      id: this.id,
      rawId: this.id,
      type: "public-key",
      clientExtensionResults: {},
      response: {
        clientDataJSON: b64u(clientData),
        attestationObject: b64u(attestationObject),
        transports: ["internal"],
      },
    };
  }

  /** navigator.credentials.get()'s result as JSON (AuthenticationResponseJSON); the counter rises by one. */
  async assert(o: AssertionOptions): Promise<Record<string, unknown>> {
    if (o.counter === undefined) this.counter += 1;
    const counter = o.counter ?? this.counter;
    const authData = concat(await sha(o.rpId), Uint8Array.of(o.flags ?? FLAG_UP | FLAG_UV), u32(counter));
    const clientData = enc.encode(
      JSON.stringify({ type: o.type ?? "webauthn.get", challenge: o.challenge, origin: o.origin, crossOrigin: false }),
    );
    const signed = concat(authData, await sha(clientData));
    const raw = new Uint8Array(
      await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, this.keys.privateKey, signed as BufferSource),
    );
    return {
      id: this.id,
      rawId: this.id,
      type: "public-key",
      clientExtensionResults: {},
      response: {
        clientDataJSON: b64u(clientData),
        authenticatorData: b64u(authData),
        signature: b64u(derOf(raw)),
        userHandle: o.userHandle ?? this.userHandle,
      },
    };
  }
}

/** The sign-in challenge of a login transaction, as the email page derives it (passkey-ceremony.ts). */
export async function signInChallengeOf(tx: string): Promise<string> {
  return b64u(await sha(`webauthn.get:${tx.split(".")[0]}`));
}
