import { headerSafe, type RenderedMail } from "./message";

/**
 * An RFC 5322 / MIME message for the SMTP transport: multipart/alternative with the plain-text and
 * HTML parts, each base64-encoded (so no body line can start with "." or exceed 76 characters).
 * Header values are header-safe and non-ASCII ones are RFC 2047 encoded words; addresses are
 * written as given (RFC 6532 UTF-8 when the server announced SMTPUTF8).
 */
export function buildMime(mail: RenderedMail, opts: { messageId: string; date: Date; boundary: string }): string {
  const headers = [
    `From: ${displayName(mail.fromName)} <${mail.from}>`,
    `To: <${mail.to}>`,
    ...(mail.replyTo ? [`Reply-To: <${mail.replyTo}>`] : []),
    `Subject: ${encodeWord(headerSafe(mail.subject))}`,
    `Date: ${opts.date.toUTCString().replace("GMT", "+0000")}`,
    `Message-ID: <${opts.messageId}@${domainOf(mail.from)}>`,
    "MIME-Version: 1.0",
    "Auto-Submitted: auto-generated",
    "X-Auto-Response-Suppress: All",
    `Content-Type: multipart/alternative; boundary="${opts.boundary}"`,
  ];
  const part = (type: string, body: string) =>
    [
      `--${opts.boundary}`,
      `Content-Type: ${type}; charset=utf-8`,
      "Content-Transfer-Encoding: base64",
      "",
      wrap(base64(body), 76),
    ].join("\r\n");
  return [...headers, "", part("text/plain", mail.text), part("text/html", mail.html), `--${opts.boundary}--`, ""].join(
    "\r\n",
  );
}

export function base64(value: string): string {
  const bytes = new TextEncoder().encode(value);
  let bin = "";
  for (let i = 0; i < bytes.length; i++) bin += String.fromCharCode(bytes[i] as number);
  return btoa(bin);
}

const wrap = (s: string, width: number) => s.replace(new RegExp(`(.{${width}})(?=.)`, "g"), "$1\r\n");

const isAscii = (s: string) => /^[\x20-\x7e]*$/.test(s);

/** An unstructured header value: as is when printable ASCII, else RFC 2047 B-encoded words (each at most 75 characters). */
export function encodeWord(value: string): string {
  if (isAscii(value)) return value;
  const words: string[] = [];
  let chunk = "";
  for (const ch of value) {
    // 45 bytes of UTF-8 become 60 base64 characters: "=?UTF-8?B?" + 60 + "?=" is 72.
    if (new TextEncoder().encode(chunk + ch).length > 45) {
      words.push(chunk);
      chunk = "";
    }
    chunk += ch;
  }
  if (chunk) words.push(chunk);
  return words.map((w) => `=?UTF-8?B?${base64(w)}?=`).join("\r\n ");
}

/** A display name: a quoted string when ASCII, encoded words otherwise. */
function displayName(name: string): string {
  const safe = headerSafe(name, 100);
  if (!isAscii(safe)) return encodeWord(safe);
  return `"${safe.replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

function domainOf(address: string): string {
  const at = address.lastIndexOf("@");
  return at > 0 ? address.slice(at + 1) : "keyway.invalid";
}

/** SMTP's transparency rule (RFC 5321 §4.5.2): a line starting with "." gets another. */
export function dotStuff(message: string): string {
  return message
    .replace(/\r\n/g, "\n")
    .replace(/\n/g, "\r\n")
    .replace(/(^|\r\n)\./g, "$1..");
}
