/**
 * Email addresses as Keyway keys them. Case variants of one address are one account (checklist A12),
 * so the whole address is lower-cased after Unicode NFC normalization.
 */
const ADDRESS = /^[^\s@"<>()[\]\\,;:]+@(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

/** The normalized address, or null for anything that is not one address (CR/LF, > 254 chars, ...). */
export function normalizeEmail(value: unknown): string | null {
  if (typeof value !== "string") return null;
  if (/[\u0000-\u001f\u007f]/.test(value)) return null;
  const email = value.trim().normalize("NFC").toLowerCase();
  if (email.length === 0 || email.length > 254) return null;
  const at = email.lastIndexOf("@");
  if (at < 1 || at > 64) return null;
  return ADDRESS.test(email) ? email : null;
}
