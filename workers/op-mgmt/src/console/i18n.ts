import type { Context } from "hono";
import { isLocale, type Locale, pickLocale } from "../../../shared/branding/i18n";
import { getCookie } from "../../../shared/platform/http";
import type { ConsoleEnv } from "./env";

/**
 * The console's words in English, French and Arabic, like the login pages. Each page keeps its own
 * catalogue beside its code (`catalogue({ en, fr, ar })`): the type makes a missing translation a
 * compile error, and no page's strings are in another page's file.
 */
export type Catalogue<K extends string> = Record<Locale, Record<K, string>>;

export const catalogue = <K extends string>(m: Catalogue<K>): Catalogue<K> => m;

export type Translate<K extends string> = (key: K, params?: Record<string, string | number>) => string;

/** `{name}` placeholders filled as text; the JSX that shows the result escapes it. */
export function translate<K extends string>(m: Catalogue<K>, locale: Locale): Translate<K> {
  const words = m[locale];
  return (key, params = {}) =>
    words[key].replace(/\{([a-z_]+)\}/g, (whole, name: string) =>
      params[name] === undefined ? whole : String(params[name]),
    );
}

export const LANG_COOKIE = "kw_console_lang";

/** `?lang=` (remembered in a cookie by the guard), then the cookie, then Accept-Language, then English. */
export function consoleLocale(c: Context<ConsoleEnv>): { locale: Locale; chosen: boolean } {
  const asked = c.req.query("lang");
  if (isLocale(asked)) return { locale: asked, chosen: true };
  const cookie = getCookie(c.req.raw, LANG_COOKIE);
  if (isLocale(cookie)) return { locale: cookie, chosen: false };
  return {
    locale: pickLocale({ acceptLanguage: c.req.header("accept-language") ?? null, fallback: "en" }),
    chosen: false,
  };
}

/** Numbers and dates in the page's language (Arabic pages show Arabic digits, as the login pages do). */
export const formatNumber = (locale: Locale, n: number) => new Intl.NumberFormat(locale).format(n);
export const formatTime = (locale: Locale, ms: number) =>
  new Intl.DateTimeFormat(locale, { dateStyle: "medium", timeStyle: "short", timeZone: "UTC" }).format(ms);
