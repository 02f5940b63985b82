import { env } from "cloudflare:test";
import { expect } from "vitest";
import { MailError } from "../../workers/shared/events/mail/message";

/** What the mail peers (test/support/global-setup.ts) accepted for an address. */
export interface ReceivedHttp {
  transport: "http";
  to: string[];
  headers: Record<string, string>;
  body: { from: string; to: string[]; subject: string; text: string; html: string; headers?: Record<string, string> };
}
export interface ReceivedSmtp {
  transport: "smtp";
  to: string[];
  from: string;
  secure: boolean;
  user: string | null;
  raw: string;
}

export const peers = () => env.TEST_MAIL_PEERS;
export const API_URL = () => `http://127.0.0.1:${peers().httpPort}/emails`;

export async function received(to: string): Promise<(ReceivedHttp | ReceivedSmtp)[]> {
  const res = await fetch(`http://127.0.0.1:${peers().httpPort}/received?to=${encodeURIComponent(to)}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { messages: (ReceivedHttp | ReceivedSmtp)[] }).messages;
}

/** A unique address whose local part tells the peers how to behave (see global-setup.ts). */
let n = 0;
export const address = (behaviour = "ok") =>
  `${behaviour}.${Date.now().toString(36)}${++n}${Math.random().toString(36).slice(2, 6)}@example.com`;

/** String variables that switch the Workers (and config) to a transport aimed at the local peers. */
export function smtpVars(port = peers().smtpPort, extra: Record<string, string> = {}): Record<string, string> {
  return {
    MAIL_TRANSPORT: "smtp",
    SMTP_HOST: "localhost",
    SMTP_PORT: String(port),
    SMTP_USER: peers().smtpUser,
    SMTP_PASSWORD: peers().smtpPassword,
    ...extra,
  };
}
export function httpVars(extra: Record<string, string> = {}): Record<string, string> {
  return { MAIL_TRANSPORT: "http", MAIL_HTTP_URL: API_URL(), MAIL_API_KEY: peers().apiKey, ...extra };
}

export interface ParsedMail {
  /** Header lines as received (unfolded), in order. */
  headerLines: string[];
  header(name: string): string[];
  text: string;
  html: string;
}

/** Just enough MIME for what the SMTP transport writes: multipart/alternative, base64 parts. */
export function parseMime(raw: string): ParsedMail {
  const split = raw.indexOf("\r\n\r\n");
  const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, " ");
  const headerLines = head.split("\r\n");
  const header = (name: string) =>
    headerLines
      .filter((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`))
      .map((l) => l.slice(name.length + 1).trim());
  const boundary = /boundary="([^"]+)"/.exec(header("Content-Type")[0] ?? "")?.[1];
  expect(boundary).toBeTruthy();
  const parts = raw
    .slice(split + 4)
    .split(`--${boundary}`)
    .slice(1, -1);
  const decoded: Record<string, string> = {};
  for (const part of parts) {
    const at = part.indexOf("\r\n\r\n");
    const type = /Content-Type: ([^;\r\n]+)/i.exec(part.slice(0, at))?.[1] ?? "";
    expect(part.slice(0, at)).toMatch(/Content-Transfer-Encoding: base64/i);
    const bin = atob(part.slice(at + 4).replace(/\s+/g, ""));
    decoded[type] = new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  }
  return { headerLines, header, text: decoded["text/plain"] ?? "", html: decoded["text/html"] ?? "" };
}

export function codeIn(text: string): string {
  const m = /\b([0-9]{6})\b/.exec(text);
  expect(m, text).not.toBeNull();
  return (m as RegExpExecArray)[1] as string;
}

/** The MailError a send rejects with (fails the test if it resolves or rejects with anything else). */
export async function failure(p: Promise<unknown>): Promise<MailError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(MailError);
  return err as MailError;
}
