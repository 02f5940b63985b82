import type { Context } from "hono";
import { type Branding, type Look, lookOf, shownClientUrl } from "../../../shared/branding/branding";
import { isLocale, type Locale, pickLocale, type Translator, translator } from "../../../shared/branding/i18n/index";
import type { Config } from "../../../shared/config/config";
import type { AppEnv } from "../../../shared/request/context";

/** What every page is rendered with: the person's language and the look of the tenant and client. */
export interface PageUi {
  t: Translator;
  look: Look;
  /** What the client registered for the person to see beside its name (OIDC Registration §2). */
  shown?: ClientShown;
}

/**
 * OIDC Registration §2: the client's logo (`logo_uri`), privacy policy (`policy_uri`) and terms of
 * service (`tos_uri`), which "the server SHOULD display"; only https URLs a page and its CSP can use
 * (branding.ts shownClientUrl), so each is at most 512 characters in the sealed transaction.
 */
export interface ClientShown {
  logo?: string;
  policy?: string;
  tos?: string;
}

/** A client as its pages need it: its name, its branding and the metadata it registered. */
export interface PageClient {
  client_name: string;
  branding: Branding;
  registration_metadata?: Record<string, unknown> | null;
}

/** What a page shows of a client's registered metadata; undefined for nothing. */
export function clientShown(client: PageClient): ClientShown | undefined {
  const m = client.registration_metadata ?? {};
  const shown: ClientShown = {};
  const logo = shownClientUrl(m.logo_uri);
  const policy = shownClientUrl(m.policy_uri);
  const tos = shownClientUrl(m.tos_uri);
  if (logo) shown.logo = logo;
  if (policy) shown.policy = policy;
  if (tos) shown.tos = tos;
  return Object.keys(shown).length ? shown : undefined;
}

/**
 * What a login transaction carries of its pages, sealed in `tx` (login-tx.ts) so that no later step
 * looks anything up: the language chosen at `/authorize`, the application's name and what its client
 * overrides of the tenant's branding. The tenant's own branding is read from the config at each step.
 */
export interface TxUi {
  locale: Locale;
  app: string;
  brand?: Branding;
  shown?: ClientShown;
}

const tenantOf = (config: Config) => ({ name: config.ISSUER_NAME, branding: config.BRANDING });

/** A client as the look needs it. */
export function clientLook(client: { client_name: string; branding: Branding }) {
  return Object.keys(client.branding).length
    ? { name: client.client_name, branding: client.branding }
    : { name: client.client_name };
}

/** The language a request asks for: `ui_locales` if given, then Accept-Language, then the tenant's default. */
export function requestLocale(c: Context<AppEnv>, uiLocales?: string): Locale {
  return pickLocale({
    uiLocales: uiLocales ?? c.req.query("ui_locales"),
    acceptLanguage: c.req.header("accept-language") ?? null,
    fallback: c.get("config").DEFAULT_LOCALE,
  });
}

/** A page outside a login transaction: the request's language, the tenant's look (and a client's, when known). */
export function requestUi(c: Context<AppEnv>, o: { uiLocales?: string; client?: PageClient } = {}): PageUi {
  const config = c.get("config");
  const shown = o.client ? clientShown(o.client) : undefined;
  return {
    t: translator(requestLocale(c, o.uiLocales)),
    look: lookOf(tenantOf(config), o.client ? clientLook(o.client) : undefined),
    ...(shown ? { shown } : {}),
  };
}

/** What a new login transaction seals of its pages. */
export function txUiFor(c: Context<AppEnv>, client: PageClient, uiLocales?: string): TxUi {
  const look = clientLook(client);
  const shown = clientShown(client);
  return {
    locale: requestLocale(c, uiLocales),
    app: look.name,
    ...("branding" in look ? { brand: look.branding } : {}),
    ...(shown ? { shown } : {}),
  };
}

/** A page inside a login transaction. An older transaction without its UI sealed gets the request's. */
export function txPageUi(c: Context<AppEnv>, ui: TxUi | undefined): PageUi {
  const config = c.get("config");
  if (!ui || !isLocale(ui.locale)) return requestUi(c);
  return {
    t: translator(ui.locale),
    look: lookOf(tenantOf(config), { name: ui.app, ...(ui.brand ? { branding: ui.brand } : {}) }),
    ...(ui.shown ? { shown: ui.shown } : {}),
  };
}
