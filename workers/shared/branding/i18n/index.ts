import { escapeHtml } from "../html";
import { ar } from "./ar";
import { type Catalogue, en, type MessageKey, type PluralForms } from "./en";
import { fr } from "./fr";
import { LOCALE_TAGS, type Locale } from "./locales";

/**
 * The languages of Keyway's pages and mail. A language is added by a catalogue beside en.ts (the
 * `Catalogue` type makes it complete) and a line here; docs/pages.md says how.
 */
export const LOCALES = {
  en: { dir: "ltr", name: "English", messages: en as Catalogue },
  fr: { dir: "ltr", name: "Français", messages: fr },
  ar: { dir: "rtl", name: "العربية", messages: ar },
} as const satisfies Record<Locale, { dir: "ltr" | "rtl"; name: string; messages: Catalogue }>;

export type { Locale, MessageKey };
export const SUPPORTED_LOCALES: readonly Locale[] = LOCALE_TAGS;

export function isLocale(value: unknown): value is Locale {
  return typeof value === "string" && Object.hasOwn(LOCALES, value);
}

/** A BCP 47 tag's best catalogue: the tag itself, else its primary language (`fr-CA` → `fr`). */
export function matchLocale(tag: string): Locale | null {
  const lower = tag.trim().toLowerCase();
  if (isLocale(lower)) return lower;
  const primary = lower.split("-")[0];
  return isLocale(primary) ? primary : null;
}

/** Accept-Language's tags by preference (RFC 9110 §12.5.4); `q=0` and `*` name nothing. */
function acceptedTags(header: string): string[] {
  return header
    .split(",")
    .slice(0, 20)
    .map((part, i) => {
      const [tag = "", ...params] = part.split(";");
      const q = params.map((p) => /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p)?.[1]).find((v) => v !== undefined);
      return { tag: tag.trim(), q: q === undefined ? 1 : Number(q), i };
    })
    .filter((e) => e.tag && e.tag !== "*" && e.q > 0)
    .sort((a, b) => b.q - a.q || a.i - b.i)
    .map((e) => e.tag);
}

/**
 * The page's language: the first of `ui_locales` Keyway has (OIDC Core §3.1.2.1, space-separated
 * by preference), then the browser's Accept-Language, then the tenant's default.
 */
export function pickLocale(o: { uiLocales?: string | undefined; acceptLanguage?: string | null; fallback: Locale }) {
  const tags = [...(o.uiLocales ?? "").split(" ").slice(0, 20), ...acceptedTags(o.acceptLanguage ?? "")];
  for (const tag of tags) {
    const found = tag ? matchLocale(tag) : null;
    if (found) return found;
  }
  return o.fallback;
}

/** A fragment that is HTML already (escaped or made by the page), put into a message as it is. */
export class Html {
  readonly html: string;
  constructor(html: string) {
    this.html = html;
  }
}

export type MessageParams = Record<string, string | number | Html>;

export interface Translator {
  locale: Locale;
  dir: "ltr" | "rtl";
  /** The message as plain text (mail's text part, headers, titles). */
  text(key: MessageKey, params?: MessageParams): string;
  /** The message as HTML: its text escaped, `Html` parameters as they are. */
  html(key: MessageKey, params?: MessageParams): string;
  /** A wait, in the largest unit that reads naturally ("45 seconds", "15 minutes", "2 hours"). */
  duration(seconds: number): string;
}

const translators = new Map<Locale, Translator>();

export function translator(locale: Locale): Translator {
  const hit = translators.get(locale);
  if (hit) return hit;
  const { messages, dir } = LOCALES[locale];
  const plural = new Intl.PluralRules(locale);
  const pick = (key: MessageKey, params: MessageParams): string => {
    // A key no catalogue has (a notice named by an error, say) reads as the generic error, never throws.
    const m = (messages[key] ?? messages["error.generic"]) as string | PluralForms;
    if (typeof m === "string") return m;
    const n = typeof params.n === "number" ? params.n : Number(params.n);
    return m[plural.select(n) as keyof PluralForms] ?? m.other;
  };
  const fill = (template: string, params: MessageParams, asHtml: boolean) =>
    template.replace(/\{([a-z_]+)\}/g, (whole, name: string) => {
      const v = params[name];
      if (v === undefined) return whole;
      if (v instanceof Html) return asHtml ? v.html : v.html.replace(/<[^>]*>/g, "");
      return asHtml ? escapeHtml(String(v)) : String(v);
    });
  const text = (key: MessageKey, params: MessageParams = {}) => fill(pick(key, params), params, false);
  const durations = new Map<number, string>();
  const wordDuration = (s: number): string => {
    if (s < 90) return text("unit.seconds", { n: s });
    const minutes = Math.ceil(s / 60);
    if (minutes < 90) return text("unit.minutes", { n: minutes });
    return text("unit.hours", { n: Math.ceil(s / 3600) });
  };
  const t: Translator = {
    locale,
    dir,
    text,
    // The template's own text is escaped (braces are left as they are), then the placeholders filled.
    html: (key, params = {}) => fill(escapeHtml(pick(key, params)), params, true),
    duration(seconds) {
      const s = Math.max(1, Math.ceil(seconds));
      // A few waits recur (the code's lifetime in every mail, the resend interval): each is worded once
      // per isolate and locale (a plural rule and a template fill), the map cleared whole when full.
      let worded = durations.get(s);
      if (worded === undefined) {
        worded = wordDuration(s);
        if (durations.size >= 512) durations.clear();
        durations.set(s, worded);
      }
      return worded;
    },
  };
  translators.set(locale, t);
  return t;
}
