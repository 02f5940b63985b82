import type { MailLook } from "../../branding/branding";
import { escapeHtml } from "../../branding/html";
import { Html, isLocale, translator } from "../../branding/i18n/index";

/** A one-time-code message. The code is the only secret in it; it is never logged. */
export interface OtpMessage {
  to: string;
  code: string;
  /** The code's lifetime in seconds, from when it was requested. */
  expiresInSeconds: number;
  /** When the code stops working (ms). Set, the mail also names that time, so every attempt renders the same. */
  expiresAt?: number;
  issuerName: string;
  issuer: string;
  /** A tenant's own sender, display name and Reply-To (issue 23); the transport's settings otherwise. */
  from?: string | undefined;
  fromName?: string | undefined;
  replyTo?: string | undefined;
  /** The language and branding of the page the code was asked from (issue 26); English and the issuer's name otherwise. */
  look?: MailLook | undefined;
}

export interface RenderedMail {
  to: string;
  from: string;
  /** The display name for From (header-safe). */
  fromName: string;
  replyTo?: string | undefined;
  subject: string;
  text: string;
  html: string;
}

/** A delivery attempt that failed. `permanent` failures (a rejected address) are not retried. */
export class MailError extends Error {
  override name = "MailError";
  constructor(
    message: string,
    readonly permanent = false,
  ) {
    super(message);
  }
}

export interface Mailer {
  /** Delivers one message or throws (`MailError` for what the provider said; any error counts as a failure). */
  send(message: OtpMessage, opts?: SendOptions): Promise<void>;
}

export interface SendOptions {
  /** Aborts the attempt (a slow provider); the outbox retries. */
  signal?: AbortSignal;
  /** A stable id for this message across attempts, for providers that deduplicate retries. */
  idempotencyKey?: string;
}

export interface MailSettings {
  MAIL_FROM: string;
  MAIL_FROM_NAME?: string | undefined;
}

/**
 * A value for a header line: no CR/LF or other control characters (no header injection whatever an
 * operator or a user typed), no bidirectional controls (a name stored before the API refused them
 * must not reorder a subject or a sender in the inbox), single spaces, bounded length.
 */
export function headerSafe(value: string, max = 200): string {
  return value
    .replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+/g, "")
    .replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, " ")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, max);
}

/**
 * The one-time-code mail, in the language and branding of the page it was asked from (issue 26): the
 * code prominent (first in the subject, large in the HTML), the application's name, when it expires,
 * and what to do if the reader did not ask for it. Every value that reaches a header is header-safe;
 * every value in the HTML is escaped.
 */
export function renderOtpMail(
  settings: MailSettings,
  m: OtpMessage,
  /** `text`: no HTML part (`html` is empty), for captured mail, which keeps the text alone. */
  parts: "all" | "text" = "all",
): RenderedMail {
  const issuerName = headerSafe(m.issuerName, 100) || "Keyway";
  const look = m.look;
  const t = translator(look && isLocale(look.locale) ? look.locale : "en");
  const product = headerSafe(look?.product ?? issuerName, 100) || issuerName;
  const app = headerSafe(look?.app ?? product, 100) || product;
  const code = m.code.replace(/[^0-9]/g, "");
  const lifetime = t.duration(Math.max(60, m.expiresInSeconds));
  // The same words on every attempt (a retry is byte-for-byte the first mail, for idempotent providers).
  const expiryParams = {
    lifetime,
    ...(m.expiresAt !== undefined ? { time: new Date(m.expiresAt).toISOString().slice(11, 16) } : {}),
  };
  const expiryKey = m.expiresAt === undefined ? "mail.expiry" : "mail.expiry_at";
  const host = hostOf(m.issuer);
  const subject = t.text("mail.subject", { code, product });
  const support = look?.support_uri;
  const supportLabel = support?.startsWith("mailto:") ? support.slice(7) : support;
  // Names and addresses are isolated from the sentence around them (issue 38): in an Arabic mail an
  // address or a host is a left-to-right run that the sentence's own direction would otherwise break
  // up and reorder. The HTML uses <bdi> (HTML §4.5.24); the text part, Unicode's isolates (UAX #9 §2.4:
  // FSI/LRI ... PDI), in a right-to-left mail only, where they matter, so a mail in English is plain ASCII.
  const rtl = t.dir === "rtl";
  const nameText = (v: string) => (rtl ? `\u2068${v}\u2069` : v);
  const ltrText = (v: string) => (rtl ? `\u2066${v}\u2069` : v);
  const text = [
    t.text("mail.intro", { app: nameText(app) }),
    "",
    `    ${code}`,
    "",
    t.text(expiryKey, expiryParams),
    "",
    t.text("mail.ignore", { host: ltrText(host) }),
    ...(support ? ["", t.text("mail.support", { link: ltrText(supportLabel ?? support) })] : []),
    "",
    `-- ${nameText(product)} (${ltrText(m.issuer)})`,
  ].join("\n");
  const renderHtml = () => {
    const accent = look?.primary && /^#[0-9a-f]{6}$/.test(look.primary) ? look.primary : "#1a1a1a";
    const logo = look?.logo_uri
      ? `<img src="${escapeHtml(look.logo_uri)}" alt="${escapeHtml(product)}" height="32" style="display:block;height:32px;max-width:160px;margin:0 0 20px">`
      : `<p style="margin:0 0 20px;font-size:15px;font-weight:600;color:#374151">${escapeHtml(product)}</p>`;
    const supportHtml =
      support && supportLabel
        ? `<p style="margin:16px 0 0;color:#4b5563;font-size:13px">${t.html("mail.support", {
            link: new Html(
              `<bdi dir="ltr"><a href="${escapeHtml(support)}" style="color:${accent}">${escapeHtml(supportLabel)}</a></bdi>`,
            ),
          })}</p>`
        : "";
    return `<!doctype html>
<html lang="${t.locale}" dir="${t.dir}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escapeHtml(subject)}</title></head>
<body style="margin:0;padding:24px;background:#f4f5f7;font-family:system-ui,-apple-system,'Segoe UI',sans-serif;color:#1a1a1a">
<div style="max-width:480px;margin:0 auto;background:#fff;border-radius:12px;padding:32px;border-top:4px solid ${accent}">
${logo}<p style="margin:0 0 12px;font-size:16px">${t.html("mail.intro", { app: new Html(`<bdi>${escapeHtml(app)}</bdi>`) })}</p>
<p dir="ltr" style="margin:0 0 16px;font-size:36px;font-weight:700;letter-spacing:8px;font-family:ui-monospace,Menlo,monospace">${escapeHtml(code)}</p>
<p style="margin:0 0 16px;font-size:15px">${t.html(expiryKey, expiryParams)}</p>
<p style="margin:0;color:#666;font-size:13px">${t.html("mail.ignore", { host: new Html(`<bdi dir="ltr">${escapeHtml(host)}</bdi>`) })}</p>${supportHtml}
</div></body></html>`;
  };
  const html = parts === "all" ? renderHtml() : "";
  return {
    to: m.to,
    from: m.from ?? settings.MAIL_FROM,
    fromName: headerSafe(m.fromName ?? settings.MAIL_FROM_NAME ?? product, 100),
    ...(m.replyTo ? { replyTo: m.replyTo } : {}),
    subject: headerSafe(subject, 200),
    text,
    html,
  };
}

function hostOf(issuer: string): string {
  try {
    return new URL(issuer).host;
  } catch {
    return headerSafe(issuer, 100);
  }
}
