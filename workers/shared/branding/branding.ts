import { z } from "zod";
import { displayName } from "./display-name.ts";
import type { Locale } from "./i18n/locales.ts";

/**
 * Branding (issue 26): what a tenant sets for its pages and mail, and what a client overrides of it.
 * The page names the application (the client's name) and shows the product: its name and logo, its
 * primary colour, its support link. Colours are made legible here, whatever was chosen: text on the
 * primary colour is black or white by WCAG contrast, and links are darkened until they reach 4.5:1.
 */

/** The loopback hosts where an http URL is allowed (local development). */
const LOOPBACK = /^(localhost|127\.0\.0\.1|\[::1\])$/;
/**
 * RFC 3986's characters, less the apostrophe: a branding URL is written out already encoded. Nothing
 * else gets in: no space, quote, `<`, `>` or backslash, nothing outside ASCII.
 */
const URI_CHARACTERS = /^[A-Za-z0-9\-._~:/?#[\]@!$&()*+,;=%]+$/;
/** A host as a page's CSP may name it: a DNS name (IDNs in their ASCII form), an IPv4 or an IPv6 literal. */
const HOST = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\])$/;

const SCHEME_PROBLEM = "must be an https URL written in full, as https://host/path";

/**
 * Why a logo or support URL may not be used, or null. The logo's origin goes into the page's CSP
 * (`img-src`), so its host must be a plain host: the WHATWG URL parser keeps `;`, `,` and quotes in a
 * host (`https://evil.example;script-src/x.png` has the origin `https://evil.example;script-src`),
 * which would add directives to the policy. Every spelling is judged here, never by a parser that
 * throws: a value that does not parse is a 400, not a 500.
 */
export function brandUrlProblem(value: string): string | null {
  if (value.length > 512) return "must be at most 512 characters";
  if (!URI_CHARACTERS.test(value))
    return "must be an https URL of URI characters only (no spaces, quotes, angle brackets or backslashes; percent-encode the rest)";
  // Written with its scheme: `//host/x` (protocol-relative) or `https:host` lean on a base URL there is not.
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(value)?.[1]?.toLowerCase();
  if (scheme !== "https" && scheme !== "http") return SCHEME_PROBLEM;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return SCHEME_PROBLEM;
  }
  if (url.username || url.password) return "must not carry a user name or password";
  if (!HOST.test(url.hostname)) return "must name a plain host (letters, digits, hyphens and dots, or an IP address)";
  if (url.protocol === "http:" && !LOOPBACK.test(url.hostname))
    return "must be an https URL (http only for localhost, for local development)";
  return null;
}

/**
 * A URL a client registered for the person to see (OIDC Registration §2: `logo_uri`, `policy_uri`,
 * `tos_uri`), when a page may show it: https only, and by the rules of a branding URL (a plain host
 * the page's CSP may name, URI characters only, at most 512 characters). Otherwise undefined: a page
 * leaves it out rather than show what it cannot vouch for.
 */
export function shownClientUrl(value: unknown): string | undefined {
  if (typeof value !== "string" || !value.startsWith("https://") || brandUrlProblem(value) !== null) return undefined;
  return value;
}

/** An https URL (http only for a loopback host, for local development), at most 512 characters. */
const brandUrl = z.string().superRefine((value, ctx) => {
  const problem = brandUrlProblem(value);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
});

/** `mailto:` and one address (no second recipient, no headers such as `?bcc=`). */
const MAILTO = /^mailto:[A-Za-z0-9.!#$%&*+/=^_{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/;

export const brandingSchema = z
  .object({
    /** The product the person signs in to, shown beside the logo and in mail; the tenant's name when unset. */
    product_name: displayName(100).optional(),
    /** The logo, loaded from the tenant's own host (the page's CSP names its origin in `img-src`). */
    logo_uri: brandUrl.optional(),
    /** `#rrggbb`: buttons, links and the focus ring. */
    primary_color: z
      .string()
      .regex(/^#[0-9a-fA-F]{6}$/, "must be a colour as #rrggbb")
      .transform((c) => c.toLowerCase())
      .optional(),
    /** Where a person who is stuck gets help: an https page or a `mailto:` address. */
    support_uri: z
      .string()
      .superRefine((value, ctx) => {
        const problem = !value.startsWith("mailto:")
          ? brandUrlProblem(value)
          : value.length > 254 || !MAILTO.test(value)
            ? "a mailto: URI is mailto: and one address, such as mailto:help@example.com"
            : null;
        if (problem) ctx.addIssue({ code: "custom", message: problem });
      })
      .optional(),
  })
  .strict();
export type Branding = z.infer<typeof brandingSchema>;

/** What a page or a mail shows: the product, the application, and colours that are legible. */
export interface Look {
  product: string;
  app: string;
  logoUri?: string | undefined;
  supportUri?: string | undefined;
  /** Buttons' background. */
  primary: string;
  /** Text on `primary`: black or white, whichever contrasts more. */
  onPrimary: string;
  /** Links and the focus ring on white: `primary`, darkened to 4.5:1 when it is lighter. */
  accent: string;
}

export const DEFAULT_PRIMARY = "#1f5fcc";

/**
 * The look of a page: the tenant's branding, then what the client overrides. `app` is the client's
 * name (the application the person signs in to); without a client it is the product.
 */
export function lookOf(tenant: { name: string; branding: Branding }, client?: { name: string; branding?: Branding }) {
  const b = { ...tenant.branding, ...client?.branding };
  const product = b.product_name ?? tenant.name;
  const chosen = b.primary_color ?? DEFAULT_PRIMARY;
  const accent = legibleOnWhite(chosen);
  let primary = chosen;
  let onPrimary = contrast(chosen, "#ffffff") >= contrast(chosen, "#111111") ? "#ffffff" : "#111111";
  // A mid-tone that neither black nor white text reads on at 4.5:1: the button takes the darkened shade.
  if (contrast(primary, onPrimary) < 4.5) [primary, onPrimary] = [accent, "#ffffff"];
  const look: Look = {
    product,
    app: client?.name ?? product,
    logoUri: b.logo_uri,
    supportUri: b.support_uri,
    primary,
    onPrimary,
    accent,
  };
  return look;
}

/** What a one-time-code mail needs of a look, kept with a message that waits for a retry. */
export interface MailLook {
  locale: Locale;
  product: string;
  app: string;
  logo_uri?: string;
  support_uri?: string;
  primary?: string;
}

export function mailLookOf(look: Look, locale: Locale): MailLook {
  return {
    locale,
    product: look.product,
    app: look.app,
    primary: look.primary,
    ...(look.logoUri ? { logo_uri: look.logoUri } : {}),
    ...(look.supportUri ? { support_uri: look.supportUri } : {}),
  };
}

// ---- WCAG 2.x relative luminance and contrast (https://www.w3.org/TR/WCAG21/#dfn-contrast-ratio).

function rgb(hex: string): [number, number, number] {
  const n = Number.parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

function luminance(hex: string): number {
  const [r, g, b] = rgb(hex).map((v) => {
    const c = v / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  }) as [number, number, number];
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

export function contrast(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

function legibleOnWhite(hex: string): string {
  let [r, g, b] = rgb(hex);
  let color = hex;
  for (let i = 0; i < 40 && contrast(color, "#ffffff") < 4.5; i++) {
    [r, g, b] = [r, g, b].map((v) => Math.floor(v * 0.9)) as [number, number, number];
    color = `#${((1 << 24) | (r << 16) | (g << 8) | b).toString(16).slice(1)}`;
  }
  return color;
}
