import type { Context, Hono } from "hono";
import { LOCALES } from "../../../../shared/branding/i18n";
import { LOCALE_TAGS } from "../../../../shared/branding/i18n/locales";
import { DEFAULT_TENANT } from "../../../../shared/routing/tenant-route";
import type { ConsoleEnv } from "../env";
import { catalogue, translate } from "../i18n";
import { CsrfField, renderMessagePage, renderPage, tenantBase } from "../layout";
import { adminCall, seeOther } from "../operator";
import { FieldError, fieldErrors, PageStyle } from "./forms";

/**
 * The console's first page (CONTRACT §11): the tenants the operator may manage, by name, and for a
 * deployment operator the form that creates one (`POST /admin/v1/tenants`, the platform's only).
 */

const words = catalogue({
  en: {
    title: "Tenants",
    all: "You operate the whole deployment.",
    some: "You operate these tenants.",
    list: "Tenants you may manage",
    disabled: "disabled",
    create: "Create a tenant",
    createLead:
      "A tenant is an issuer of its own at /t/<id>: its own signing keys, applications, people and branding. Its id is part of every URL it issues and is never reused, even after the tenant is deleted.",
    idLabel: "Id",
    idHint: "2 to 40 lower-case letters, digits and hyphens, such as acme-eu.",
    nameLabel: "Name",
    nameHint: "Shown to people on its sign-in pages and in its mail.",
    localeLabel: "Default language of its pages and mail",
    deploymentDefault: "The deployment's default",
    signupLabel: "Who may sign up",
    signupOpen: "Anyone with an email address",
    signupInvite: "Only people an administrator added",
    createButton: "Create tenant",
    notCreated: "The tenant was not created: {error}",
    deleted: "The tenant {id} is deleted.",
  },
  fr: {
    title: "Locataires",
    all: "Vous exploitez l’ensemble du déploiement.",
    some: "Vous exploitez ces locataires.",
    list: "Locataires que vous pouvez gérer",
    disabled: "désactivé",
    create: "Créer un locataire",
    createLead:
      "Un locataire est un émetteur à part entière sous /t/<id> : ses propres clés de signature, applications, personnes et son image de marque. Son identifiant figure dans chaque URL qu’il émet et n’est jamais réutilisé, même après la suppression du locataire.",
    idLabel: "Identifiant",
    idHint: "De 2 à 40 lettres minuscules, chiffres et traits d’union, par exemple acme-eu.",
    nameLabel: "Nom",
    nameHint: "Affiché sur ses pages de connexion et dans ses courriels.",
    localeLabel: "Langue par défaut de ses pages et courriels",
    deploymentDefault: "Celle du déploiement",
    signupLabel: "Qui peut s’inscrire",
    signupOpen: "Toute personne ayant une adresse électronique",
    signupInvite: "Seules les personnes ajoutées par un administrateur",
    createButton: "Créer le locataire",
    notCreated: "Le locataire n’a pas été créé : {error}",
    deleted: "Le locataire {id} est supprimé.",
  },
  ar: {
    title: "المستأجرون",
    all: "أنت تشغّل النشر بأكمله.",
    some: "أنت تشغّل هؤلاء المستأجرين.",
    list: "المستأجرون الذين يمكنك إدارتهم",
    disabled: "معطّل",
    create: "إنشاء مستأجر",
    createLead:
      "المستأجر مُصدِر مستقل على ‎/t/<id>‎: له مفاتيح توقيعه وتطبيقاته وأشخاصه وهويته البصرية. معرّفه جزء من كل عنوان يُصدره ولا يُعاد استخدامه أبدًا، حتى بعد حذف المستأجر.",
    idLabel: "المعرّف",
    idHint: "من 2 إلى 40 حرفًا لاتينيًا صغيرًا أو رقمًا أو شرطة، مثل acme-eu.",
    nameLabel: "الاسم",
    nameHint: "يظهر للأشخاص في صفحات تسجيل الدخول وفي رسائله.",
    localeLabel: "اللغة الافتراضية لصفحاته ورسائله",
    deploymentDefault: "اللغة الافتراضية للنشر",
    signupLabel: "من يمكنه التسجيل",
    signupOpen: "أي شخص لديه عنوان بريد إلكتروني",
    signupInvite: "فقط الأشخاص الذين أضافهم مسؤول",
    createButton: "إنشاء المستأجر",
    notCreated: "لم يُنشأ المستأجر: {error}",
    deleted: "حُذف المستأجر {id}.",
  },
});

interface TenantItem {
  id: string;
  name: string;
  status: string;
}

/** Every live tenant for a deployment operator (the deployment's own first), else the granted ones. */
async function tenantsFor(c: Context<ConsoleEnv>): Promise<TenantItem[]> {
  const scope = c.get("operator").scope;
  const own: TenantItem = { id: DEFAULT_TENANT, name: c.get("config").ISSUER_NAME, status: "active" };
  if (scope === "all") {
    const { results } = await c.env.DB.prepare(
      "SELECT id, name, status FROM tenants WHERE status != 'deleted' ORDER BY id LIMIT 1000",
    ).all<TenantItem>();
    return [own, ...results];
  }
  const ids = scope.filter((id) => id !== DEFAULT_TENANT);
  const { results } = ids.length
    ? await c.env.DB.prepare(
        `SELECT id, name, status FROM tenants WHERE status != 'deleted' AND id IN (${ids.map(() => "?").join(",")}) ORDER BY id`,
      )
        .bind(...ids)
        .all<TenantItem>()
    : { results: [] as TenantItem[] };
  return [...(scope.includes(DEFAULT_TENANT) ? [own] : []), ...results];
}

interface CreateForm {
  id: string;
  name: string;
  locale: string;
  signup: string;
}

const CREATE_FIELDS = ["id", "name", "locale", "signup"] as const;

async function tenantsPage(
  c: Context<ConsoleEnv>,
  o: { form?: CreateForm; error?: string; status?: number } = {},
): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const tenants = await tenantsFor(c);
  const all = c.get("operator").scope === "all";
  const form = o.form ?? { id: "", name: "", locale: "", signup: "open" };
  // A conflict (an id in use, or once used) is the id's.
  const invalid = fieldErrors(o.error, CREATE_FIELDS, o.status === 409 ? "id" : undefined);
  const describedBy = (field: (typeof CREATE_FIELDS)[number], hint?: string) =>
    [hint, invalid[field] ? `create-${field}-error` : undefined].filter(Boolean).join(" ") || undefined;
  const deleted = c.req.query("deleted");
  return renderPage(c, {
    title: t("title"),
    top: "tenants",
    status: o.status ?? 200,
    notice: deleted && /^[a-z0-9-]{2,40}$/.test(deleted) ? t("deleted", { id: deleted }) : undefined,
    error: o.error ? t("notCreated", { error: o.error }) : undefined,
    children: (
      <>
        <PageStyle c={c} />
        <p>{all ? t("all") : t("some")}</p>
        <ul class="plain tenants" aria-label={t("list")}>
          {tenants.map((tenant) => (
            <li>
              <a href={tenantBase(tenant.id)}>
                <bdi>{tenant.name}</bdi>
              </a>{" "}
              <span class="id">{tenant.id}</span>
              {tenant.status === "disabled" ? <span class="muted"> ({t("disabled")})</span> : null}
            </li>
          ))}
        </ul>
        {all ? (
          <section aria-labelledby="create-heading">
            <h2 id="create-heading">{t("create")}</h2>
            <p>{t("createLead")}</p>
            <form method="post" action="/console/tenants" novalidate>
              <CsrfField c={c} />
              <label for="create-id">{t("idLabel")}</label>
              <input
                id="create-id"
                name="id"
                required
                dir="ltr"
                maxlength={40}
                autocomplete="off"
                spellcheck={false}
                value={form.id}
                aria-invalid={invalid.id ? "true" : undefined}
                aria-describedby={describedBy("id", "create-id-hint")}
              />
              <p class="hint" id="create-id-hint">
                {t("idHint")}
              </p>
              <FieldError id="create-id-error" message={invalid.id} />
              <label for="create-name">{t("nameLabel")}</label>
              <input
                id="create-name"
                name="name"
                required
                maxlength={100}
                value={form.name}
                aria-invalid={invalid.name ? "true" : undefined}
                aria-describedby={describedBy("name", "create-name-hint")}
              />
              <p class="hint" id="create-name-hint">
                {t("nameHint")}
              </p>
              <FieldError id="create-name-error" message={invalid.name} />
              <label for="create-locale">{t("localeLabel")}</label>
              <select id="create-locale" name="locale" aria-describedby={describedBy("locale")}>
                <option value="" selected={form.locale === ""}>
                  {t("deploymentDefault")}
                </option>
                {LOCALE_TAGS.map((tag) => (
                  <option value={tag} lang={tag} selected={form.locale === tag}>
                    {LOCALES[tag].name}
                  </option>
                ))}
              </select>
              <FieldError id="create-locale-error" message={invalid.locale} />
              <fieldset>
                <legend>{t("signupLabel")}</legend>
                <label class="choice">
                  <input type="radio" name="signup" value="open" checked={form.signup !== "invite"} /> {t("signupOpen")}
                </label>
                <label class="choice">
                  <input type="radio" name="signup" value="invite" checked={form.signup === "invite"} />{" "}
                  {t("signupInvite")}
                </label>
              </fieldset>
              <FieldError id="create-signup-error" message={invalid.signup} />
              <p>
                <button type="submit" class="primary">
                  {t("createButton")}
                </button>
              </p>
            </form>
          </section>
        ) : null}
      </>
    ),
  });
}

/** `POST /console/tenants`: `POST /admin/v1/tenants`; its 400 or 409 shown on the form, the values kept. */
async function createTenant(c: Context<ConsoleEnv>): Promise<Response> {
  if (c.get("operator").scope !== "all") return renderMessagePage(c, { kind: "notYours", status: 403 });
  const body = await c.req.parseBody();
  const text = (k: string) => (typeof body[k] === "string" ? (body[k] as string).trim() : "");
  const form: CreateForm = { id: text("id"), name: text("name"), locale: text("locale"), signup: text("signup") };
  const res = await adminCall<{ id: string }>(c, "POST", "/admin/v1/tenants", {
    id: form.id,
    name: form.name,
    ...(form.locale ? { locale: form.locale } : {}),
    ...(form.signup ? { signup: form.signup } : {}),
  });
  if (!res.ok) return tenantsPage(c, { form, error: res.error ?? String(res.status), status: res.status });
  return seeOther(tenantBase(res.data.id), "created");
}

export function registerTenantPages(app: Hono<ConsoleEnv>): void {
  app.get("/", (c) => tenantsPage(c));
  app.post("/tenants", createTenant);
}
