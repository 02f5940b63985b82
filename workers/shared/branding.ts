import { z } from "zod";
import type { Locale } from "./i18n/locales.ts";

/**
 * Branding (issue 26): what a tenant sets for its pages and mail, and what a client overrides of it.
 * The page names the application (the client's name) and shows the product: its name and logo, its
 * primary colour, its support link. Colours are made legible here, whatever was chosen: text on the
 * primary colour is black or white by WCAG contrast, and links are darkened until they reach 4.5:1.
 */

/** An https URL (http only for a loopback host, for local development), at most 512 characters. */
const brandUrl = z
  .url()
  .max(512)
  .refine((u) => {
    const url = new URL(u);
    return (
      url.protocol === "https:" || (url.protocol === "http:" && /^(localhost|127\.0\.0\.1|\[::1\])$/.test(url.hostname))
    );
  }, "must be an https URL");

export const brandingSchema = z
  .object({
    /** The product the person signs in to, shown beside the logo and in mail; the tenant's name when unset. */
    product_name: z.string().trim().min(1).max(100).optional(),
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
      .union([
        brandUrl,
        z
          .string()
          .regex(/^mailto:[^\s@<>"]+@[^\s@<>"]+$/, "must be an https or mailto: URI")
          .max(254),
      ])
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
