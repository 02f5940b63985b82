import type { AuthenticatorTransport } from "@simplewebauthn/server";
import { verifyAuthenticationResponse } from "@simplewebauthn/server";
import { base64urlDecode } from "../contract/crypto";
import type { AddPasskey, PasskeyInfo, PasskeySignIn } from "../contract/verbs";

/**
 * Passkeys (issue 42): WebAuthn credentials of an address, in the address's shard (keyed by the
 * address's HMAC, like its codes), stored as WebAuthn §7.1 step 27 describes: the credential id
 * (base64url of the raw id), the credential public key as the COSE_Key the authenticator gave
 * (base64url), the signature counter, the transports, and what registration said of the
 * authenticator (AAGUID, backed up). The user's id routes nothing here; the address does. The
 * address itself is kept sealed by the Worker, so the shard holds none in the clear.
 */

export const PASSKEY_SCHEMA = [
  `CREATE TABLE IF NOT EXISTS passkeys (
    credential_id TEXT PRIMARY KEY,
    email_key TEXT NOT NULL,
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    public_key TEXT NOT NULL,
    sign_count INTEGER NOT NULL,
    transports TEXT NOT NULL,
    aaguid TEXT NOT NULL,
    backed_up INTEGER NOT NULL,
    sealed_email TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_used_at INTEGER,
    last_challenge_exp INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID`,
  // A person's passkeys, for the admin API and for a deleted user (never on the sign-in path).
  "CREATE INDEX IF NOT EXISTS passkeys_email ON passkeys(email_key)",
];

type PasskeyRow = {
  credential_id: string;
  email_key: string;
  tenant: string;
  user_id: string;
  public_key: string;
  sign_count: number;
  transports: string;
  aaguid: string;
  backed_up: number;
  sealed_email: string;
  created_at: number;
  last_used_at: number | null;
  last_challenge_exp: number;
};

export function readPasskey(sql: SqlStorage, credentialId: string): PasskeyRow | undefined {
  return sql.exec<PasskeyRow>("SELECT * FROM passkeys WHERE credential_id = ?", credentialId).toArray()[0];
}

/** Stores a new credential; false when its id is taken (the same registration posted twice). */
export function insertPasskey(sql: SqlStorage, a: AddPasskey): boolean {
  const cursor = sql.exec(
    `INSERT INTO passkeys (credential_id, email_key, tenant, user_id, public_key, sign_count, transports, aaguid,
       backed_up, sealed_email, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(credential_id) DO NOTHING`,
    a.credentialId,
    a.emailKey,
    a.tenant,
    a.userId,
    a.publicKey,
    a.counter,
    JSON.stringify(a.transports),
    a.aaguid,
    a.backedUp ? 1 : 0,
    a.sealedEmail,
    a.now,
  );
  return cursor.rowsWritten > 0;
}

/** The sign-in's one write: the counter, the time, and the challenge this credential has now answered. */
export function markUsed(sql: SqlStorage, credentialId: string, counter: number, now: number, txExp: number): void {
  sql.exec(
    "UPDATE passkeys SET sign_count = ?, last_used_at = ?, last_challenge_exp = ? WHERE credential_id = ?",
    counter,
    now,
    txExp,
    credentialId,
  );
}

export function listPasskeys(sql: SqlStorage, emailKey: string, userId: string): PasskeyInfo[] {
  return sql
    .exec<PasskeyRow>(
      "SELECT * FROM passkeys WHERE email_key = ? AND user_id = ? ORDER BY created_at, credential_id",
      emailKey,
      userId,
    )
    .toArray()
    .map((r) => ({
      id: r.credential_id,
      user_id: r.user_id,
      aaguid: r.aaguid,
      transports: JSON.parse(r.transports) as string[],
      backed_up: r.backed_up === 1,
      sign_count: r.sign_count,
      created_at: r.created_at,
      last_used_at: r.last_used_at,
    }));
}

export function deletePasskey(sql: SqlStorage, emailKey: string, userId: string, credentialId: string): boolean {
  return (
    sql.exec(
      "DELETE FROM passkeys WHERE credential_id = ? AND email_key = ? AND user_id = ?",
      credentialId,
      emailKey,
      userId,
    ).rowsWritten > 0
  );
}

/** A deleted user's passkeys go with it (the address's shard forgets the user). */
export function deletePasskeysOf(sql: SqlStorage, emailKey: string): void {
  sql.exec("DELETE FROM passkeys WHERE email_key = ?", emailKey);
}

/**
 * The assertion checked against the stored credential (WebAuthn §7.2): the challenge, the origin, the
 * RP id's hash, the user present and verified flags, and the signature over the authenticator data and
 * the client data's hash with the stored public key. The counter is compared by the caller, inside
 * the transaction that moves it (a regression is refused and audited there). Null when it fails.
 */
export async function checkAssertion(row: PasskeyRow, a: PasskeySignIn): Promise<{ newCounter: number } | null> {
  try {
    const v = await verifyAuthenticationResponse({
      response: a.response as Parameters<typeof verifyAuthenticationResponse>[0]["response"],
      expectedChallenge: a.challenge,
      expectedOrigin: a.origin,
      expectedRPID: a.rpId,
      expectedType: "webauthn.get",
      requireUserVerification: true,
      credential: {
        id: row.credential_id,
        publicKey: base64urlDecode(row.public_key) as Uint8Array<ArrayBuffer>,
        // The library's own counter check is turned off (0 passes any value): the store does it, to audit.
        counter: 0,
        transports: JSON.parse(row.transports) as AuthenticatorTransport[],
      },
    });
    return v.verified && v.authenticationInfo.userVerified ? { newCounter: v.authenticationInfo.newCounter } : null;
  } catch {
    return null;
  }
}

/** WebAuthn §6.1.1: a counter that did not rise, when either side has one, may mean a cloned authenticator. */
export const counterRegressed = (stored: number, presented: number) =>
  (stored > 0 || presented > 0) && presented <= stored;
