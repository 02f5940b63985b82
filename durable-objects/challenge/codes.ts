/**
 * The one-time codes (`otp_codes`): one live code per address and login, stored only as the HMAC the
 * Worker computed under the OTP secret, with the attempts spent on it. The store compares a code in
 * constant time and decides what a guess costs; these are its reads and writes.
 */

/** A code as stored: its MAC, the attempts spent on it, its expiry. */
export interface StoredCode {
  code_mac: string;
  attempts: number;
  expires_at: number;
}

/** Stores a login's new code, replacing (voiding) that login's older one. */
export function storeCode(sql: SqlStorage, emailKey: string, txHash: string, codeMac: string, expiresAt: number): void {
  sql.exec(
    `INSERT INTO otp_codes (email_key, tx_hash, code_mac, attempts, expires_at) VALUES (?, ?, ?, 0, ?)
     ON CONFLICT(email_key, tx_hash) DO UPDATE SET code_mac = excluded.code_mac, attempts = 0,
       expires_at = excluded.expires_at`,
    emailKey,
    txHash,
    codeMac,
    expiresAt,
  );
}

/** A login's code for the address, live or not (the caller checks). */
export function readCode(sql: SqlStorage, emailKey: string, txHash: string): StoredCode | undefined {
  return sql
    .exec<{ code_mac: string; attempts: number; expires_at: number }>(
      "SELECT code_mac, attempts, expires_at FROM otp_codes WHERE email_key = ? AND tx_hash = ?",
      emailKey,
      txHash,
    )
    .toArray()[0];
}

/** Signed in: every pending code of the address goes, this login's and any other's. */
export function deleteCodes(sql: SqlStorage, emailKey: string): void {
  sql.exec("DELETE FROM otp_codes WHERE email_key = ?", emailKey);
}

/** A wrong code costs an attempt on the login's code. */
export function spendAttempt(sql: SqlStorage, emailKey: string, txHash: string): void {
  sql.exec("UPDATE otp_codes SET attempts = attempts + 1 WHERE email_key = ? AND tx_hash = ?", emailKey, txHash);
}

/** A spent code put back as it was, unless the login has a newer one: whether it was. */
export function putBackCode(
  sql: SqlStorage,
  emailKey: string,
  txHash: string,
  codeMac: string,
  spent: { attempts: number; expires_at: number },
): boolean {
  return (
    sql
      .exec(
        `INSERT INTO otp_codes (email_key, tx_hash, code_mac, attempts, expires_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT(email_key, tx_hash) DO NOTHING RETURNING 1`,
        emailKey,
        txHash,
        codeMac,
        spent.attempts,
        spent.expires_at,
      )
      .toArray().length > 0
  );
}
