import type { Context } from "hono";
import type { Child } from "hono/jsx";
import { LOCALES } from "../../../shared/branding/i18n";
import { LOCALE_TAGS } from "../../../shared/branding/i18n/locales";
import { pageSecurityHeaders } from "../../../shared/platform/http";
import type { ConsoleEnv } from "./env";
import { catalogue, translate } from "./i18n";

/**
 * The console's page shell: landmarks (header, nav, main), the language switch, the sign-out form,
 * the tenant's section navigation, and a strict CSP whose nonce every style and script carries.
 * Pages are server-rendered with hono's JSX (escaped by construction) and work without script.
 */

const words = catalogue({
  en: {
    console: "{name} console",
    tenants: "Tenants",
    capacity: "Capacity",
    overview: "Settings",
    people: "People",
    applications: "Applications",
    organizations: "Organizations",
    webhooks: "Webhooks",
    audit: "Audit trail",
    signOut: "Sign out",
    account: "Account",
    language: "Language",
    sections: "Tenant",
    main: "Console",
    noAccessTitle: "No access",
    noAccess:
      "The address you signed in with has no access to this console. Ask an operator of this deployment to grant it.",
    notYoursTitle: "Not your tenant",
    notYours: "You do not manage this tenant, or it does not exist.",
    signInFailedTitle: "Sign-in failed",
    signInFailed: "The sign-in could not be completed.",
    signInAgain: "Sign in again",
    notSignedOutTitle: "Not signed out",
    notSignedOut: "This sign-out was not sent from your console page.",
    back: "Back to the console",
    signedOutTitle: "Signed out",
    signedOut: "You have signed out of the console.",
    expiredTitle: "Session ended",
    expired: "Your console session has ended or this form did not come from your console page. Nothing was changed.",
    notFoundTitle: "Not found",
    notFound: "There is no such page in the console.",
  },
  fr: {
    console: "Console {name}",
    tenants: "Locataires",
    capacity: "Capacité",
    overview: "Réglages",
    people: "Personnes",
    applications: "Applications",
    organizations: "Organisations",
    webhooks: "Webhooks",
    audit: "Journal d’audit",
    signOut: "Se déconnecter",
    account: "Compte",
    language: "Langue",
    sections: "Locataire",
    main: "Console",
    noAccessTitle: "Accès refusé",
    noAccess:
      "L’adresse avec laquelle vous vous êtes connecté n’a pas accès à cette console. Demandez à un opérateur de ce déploiement de l’autoriser.",
    notYoursTitle: "Locataire non autorisé",
    notYours: "Vous ne gérez pas ce locataire, ou il n’existe pas.",
    signInFailedTitle: "Échec de la connexion",
    signInFailed: "La connexion n’a pas pu aboutir.",
    signInAgain: "Se reconnecter",
    notSignedOutTitle: "Déconnexion refusée",
    notSignedOut: "Cette déconnexion n’a pas été envoyée depuis votre console.",
    back: "Retour à la console",
    signedOutTitle: "Déconnecté",
    signedOut: "Vous êtes déconnecté de la console.",
    expiredTitle: "Session terminée",
    expired:
      "Votre session de console a pris fin ou ce formulaire ne vient pas de votre console. Rien n’a été modifié.",
    notFoundTitle: "Introuvable",
    notFound: "Cette page n’existe pas dans la console.",
  },
  ar: {
    console: "وحدة تحكم {name}",
    tenants: "المستأجرون",
    capacity: "السعة",
    overview: "الإعدادات",
    people: "الأشخاص",
    applications: "التطبيقات",
    organizations: "المؤسسات",
    webhooks: "خطافات الويب",
    audit: "سجل التدقيق",
    signOut: "تسجيل الخروج",
    account: "الحساب",
    language: "اللغة",
    sections: "المستأجر",
    main: "وحدة التحكم",
    noAccessTitle: "لا يوجد وصول",
    noAccess:
      "العنوان الذي سجّلت الدخول به لا يملك صلاحية الوصول إلى وحدة التحكم هذه. اطلب من أحد مشغّلي هذا النشر منحه.",
    notYoursTitle: "ليس مستأجرك",
    notYours: "أنت لا تدير هذا المستأجر، أو أنه غير موجود.",
    signInFailedTitle: "فشل تسجيل الدخول",
    signInFailed: "تعذّر إكمال تسجيل الدخول.",
    signInAgain: "سجّل الدخول مجددًا",
    notSignedOutTitle: "لم يتم تسجيل الخروج",
    notSignedOut: "لم يُرسل طلب الخروج هذا من صفحة وحدة التحكم الخاصة بك.",
    back: "العودة إلى وحدة التحكم",
    signedOutTitle: "تم تسجيل الخروج",
    signedOut: "لقد سجّلت الخروج من وحدة التحكم.",
    expiredTitle: "انتهت الجلسة",
    expired: "انتهت جلسة وحدة التحكم أو أن هذا النموذج لم يأتِ من صفحة وحدة التحكم. لم يتغيّر شيء.",
    notFoundTitle: "غير موجود",
    notFound: "لا توجد صفحة كهذه في وحدة التحكم.",
  },
});

const STYLE = `
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1f24;background:#f3f4f6}
header,nav.sections,main{max-width:1040px;margin:0 auto;padding:12px 20px}
header{display:flex;justify-content:space-between;align-items:center;gap:12px;flex-wrap:wrap}
header nav ul,nav.sections ul{display:flex;gap:4px 16px;flex-wrap:wrap;list-style:none;margin:0;padding:0}
.product{font-weight:600;color:#374151;margin:0}
a{color:#1d4ed8}
a[aria-current=page]{font-weight:600;color:#1b1f24;text-decoration:none}
main{background:#fff;border-radius:12px;box-shadow:0 1px 3px #0000001f;margin-bottom:24px}
h1{font-size:24px;margin:0 0 12px}
h2{font-size:19px;margin:24px 0 8px}
table{border-collapse:collapse;width:100%}
th,td{text-align:start;padding:6px 8px;border-top:1px solid #e5e7eb;vertical-align:top}
th{font-weight:600;color:#374151}
ul.plain{list-style:none;padding:0;margin:0}
ul.plain li{padding:10px 0;border-top:1px solid #e5e7eb}
.id,code{font-family:ui-monospace,monospace;color:#4b5563;font-size:14px;overflow-wrap:anywhere}
label{display:block;font-weight:600;margin:8px 0 4px}
input,select,textarea{font:inherit;padding:6px 8px;border:1px solid #6b7280;border-radius:6px;max-width:100%}
textarea{width:100%;min-height:6em}
button{font:inherit;cursor:pointer;padding:6px 12px;border:1px solid #1d4ed8;border-radius:8px;background:#fff;color:#1d4ed8}
button.primary{background:#1d4ed8;color:#fff}
button.danger{border-color:#b91c1c;color:#b91c1c}
form.inline{display:inline}
.notice{padding:8px 12px;border-radius:8px;background:#ecfdf5;border:1px solid #047857;color:#065f46}
.error{padding:8px 12px;border-radius:8px;background:#fef2f2;border:1px solid #b91c1c;color:#7f1d1d}
.secret{padding:8px 12px;border:2px dashed #b45309;background:#fffbeb;font-family:ui-monospace,monospace;overflow-wrap:anywhere}
.muted,p{color:#374151}
:focus-visible{outline:3px solid #1d4ed8;outline-offset:2px}`;

/** Where a tenant's sections live; a section's page file registers the path named here. */
const SECTIONS = [
  ["overview", ""],
  ["people", "/people"],
  ["applications", "/apps"],
  ["organizations", "/orgs"],
  ["webhooks", "/webhooks"],
  ["audit", "/audit"],
] as const;
export type TenantSection = (typeof SECTIONS)[number][0];

export const tenantBase = (tenant: string) => `/console/t/${encodeURIComponent(tenant)}`;

export interface PageOptions {
  title: string;
  children: Child;
  status?: number;
  /** The tenant section this page is (marked as the current page in the tenant's navigation). */
  section?: TenantSection;
  /** The console-wide page this is ("tenants" or "capacity"), marked in the top navigation. */
  top?: "tenants" | "capacity";
  /** A confirmation of what was just done (role=status) or what went wrong (role=alert). */
  notice?: string | undefined;
  error?: string | undefined;
  /** Extra response headers (Set-Cookie, say). */
  headers?: Record<string, string>;
}

/** The full page as a response: no-store, the CSP, the language's direction. */
export function renderPage(c: Context<ConsoleEnv>, o: PageOptions): Response {
  const config = c.get("config");
  const locale = c.get("locale") ?? "en";
  const t = translate(words, locale);
  const operator = c.get("operator");
  const tenant = operator ? c.get("tenant") : undefined;
  const nonce = c.get("nonce");
  const here = new URL(c.req.url);
  const langHref = (tag: string) => {
    const u = new URL(here);
    u.searchParams.set("lang", tag);
    return `${u.pathname}${u.search}`;
  };
  const page = (
    <html lang={locale} dir={LOCALES[locale].dir}>
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width,initial-scale=1" />
        <title>{`${o.title} · ${t("console", { name: config.ISSUER_NAME })}`}</title>
        <style nonce={nonce}>{STYLE}</style>
      </head>
      <body>
        <header>
          <p class="product">{t("console", { name: config.ISSUER_NAME })}</p>
          {operator ? (
            <nav aria-label={t("main")}>
              <ul>
                <li>
                  <a href="/console" aria-current={o.top === "tenants" ? "page" : undefined}>
                    {t("tenants")}
                  </a>
                </li>
                {operator.scope === "all" ? (
                  <li>
                    <a href="/console/capacity" aria-current={o.top === "capacity" ? "page" : undefined}>
                      {t("capacity")}
                    </a>
                  </li>
                ) : null}
              </ul>
            </nav>
          ) : null}
          <nav aria-label={t("language")}>
            <ul>
              {LOCALE_TAGS.map((tag) => (
                <li>
                  <a href={langHref(tag)} lang={tag} hreflang={tag} aria-current={tag === locale ? "true" : undefined}>
                    {new Intl.DisplayNames([tag], { type: "language" }).of(tag) ?? tag}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
          {operator ? (
            <form method="post" action="/console/logout" aria-label={t("account")}>
              <input type="hidden" name="csrf" value={operator.csrf} />
              <bdi>{operator.email}</bdi> <button type="submit">{t("signOut")}</button>
            </form>
          ) : null}
        </header>
        {tenant && o.section ? (
          <nav class="sections" aria-label={`${t("sections")}: ${tenant.name}`}>
            <ul>
              {SECTIONS.map(([key, path]) => (
                <li>
                  <a href={`${tenantBase(tenant.id)}${path}`} aria-current={o.section === key ? "page" : undefined}>
                    {t(key)}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
        ) : null}
        <main>
          <h1>{o.title}</h1>
          {o.notice ? (
            <p class="notice" role="status">
              {o.notice}
            </p>
          ) : null}
          {o.error ? (
            <p class="error" role="alert">
              {o.error}
            </p>
          ) : null}
          {o.children}
        </main>
      </body>
    </html>
  );
  const headers = new Headers(pageSecurityHeaders(nonce));
  for (const [k, v] of Object.entries(o.headers ?? {})) headers.append(k, v);
  return new Response(`<!doctype html>${page}`, { status: o.status ?? 200, headers });
}

type MessageKind = "noAccess" | "notYours" | "signInFailed" | "notSignedOut" | "signedOut" | "expired" | "notFound";

/** A page that only says something: a refusal, a failed sign-in, a sign-out. */
export function renderMessagePage(c: Context<ConsoleEnv>, o: { kind: MessageKind; status?: number }): Response {
  const t = translate(words, c.get("locale") ?? "en");
  const link =
    o.kind === "signInFailed" || o.kind === "signedOut" ? (
      <a href="/console">{t("signInAgain")}</a>
    ) : o.kind === "noAccess" ? null : (
      <a href="/console">{t("back")}</a>
    );
  return renderPage(c, {
    title: t(`${o.kind}Title`),
    status: o.status ?? 200,
    children: (
      <p>
        {t(o.kind)} {link}
      </p>
    ),
  });
}

/** A form that posts with the session's CSRF token (operator.ts refuses a POST without it). */
export function CsrfField(props: { c: Context<ConsoleEnv> }) {
  return <input type="hidden" name="csrf" value={props.c.get("operator").csrf} />;
}
