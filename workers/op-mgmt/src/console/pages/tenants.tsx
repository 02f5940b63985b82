import type { Context, Hono } from "hono";
import { DEFAULT_TENANT, issuerOf } from "../../../../shared/routing/tenant-route";
import type { ConsoleEnv } from "../env";
import { catalogue, translate } from "../i18n";
import { renderPage, tenantBase } from "../layout";

/** The console's first page (CONTRACT §11): the tenants the operator may manage, by name. */

const words = catalogue({
  en: {
    title: "Tenants",
    all: "You operate the whole deployment.",
    some: "You operate these tenants.",
    list: "Tenants you may manage",
    disabled: "disabled",
    issuer: "Issuer",
    status: "Status",
    id: "Id",
  },
  fr: {
    title: "Locataires",
    all: "Vous exploitez l’ensemble du déploiement.",
    some: "Vous exploitez ces locataires.",
    list: "Locataires que vous pouvez gérer",
    disabled: "désactivé",
    issuer: "Émetteur",
    status: "État",
    id: "Identifiant",
  },
  ar: {
    title: "المستأجرون",
    all: "أنت تشغّل النشر بأكمله.",
    some: "أنت تشغّل هؤلاء المستأجرين.",
    list: "المستأجرون الذين يمكنك إدارتهم",
    disabled: "معطّل",
    issuer: "المُصدِر",
    status: "الحالة",
    id: "المعرّف",
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

async function tenantsPage(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const tenants = await tenantsFor(c);
  return renderPage(c, {
    title: t("title"),
    top: "tenants",
    children: (
      <>
        <p>{c.get("operator").scope === "all" ? t("all") : t("some")}</p>
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
      </>
    ),
  });
}

/** A tenant's own page: who it is. Its settings (branding, keys, status) are managed here. */
function tenantPage(c: Context<ConsoleEnv>): Response {
  const t = translate(words, c.get("locale"));
  const tenant = c.get("tenant");
  const issuer = issuerOf(c.get("config"), tenant.id);
  return renderPage(c, {
    title: tenant.name,
    section: "overview",
    children: (
      <dl>
        <dt>{t("id")}</dt>
        <dd class="id">{tenant.id}</dd>
        <dt>{t("issuer")}</dt>
        <dd class="id">{issuer}</dd>
        <dt>{t("status")}</dt>
        <dd>{tenant.status}</dd>
      </dl>
    ),
  });
}

export function registerTenantPages(app: Hono<ConsoleEnv>): void {
  app.get("/", tenantsPage);
  app.get("/t/:tenant", tenantPage);
}
