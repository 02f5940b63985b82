import type { Context, Hono } from "hono";
import { AUDIT_KINDS, type AuditKind } from "../../../../../durable-objects/contract/verbs";
import type { ConsoleEnv } from "../env";
import { catalogue, formatTime, translate } from "../i18n";
import { renderPage, tenantBase } from "../layout";
import { adminCall, tenantApiPath } from "../operator";
import { type ApiEvent, type ApiUser, isAddress, seg, USER_ID } from "./people-common";

/**
 * The audit trail (issue 43): a tenant's events filtered by person, kind and time (a GET form),
 * a page at a time, and an export of the filtered events as NDJSON or CSV, streamed through the
 * admin API's own pagination (`GET /admin/v1/audit`, which has no export of its own).
 */

const words = catalogue({
  en: {
    title: "Audit trail",
    filters: "Filters",
    person: "Person (address or user id)",
    kind: "Event",
    anyKind: "Every event",
    since: "From (UTC)",
    until: "Until (UTC)",
    show: "Show",
    clear: "Clear the filters",
    retention: "Events appear within a few seconds and are kept {days} days.",
    time: "Time",
    who: "Person",
    app: "Application",
    ip: "IP address",
    detail: "Details",
    none: "No event matches.",
    older: "Older events",
    newest: "Newest events",
    export: "Export these events",
    exportNdjson: "Download as NDJSON",
    exportCsv: "Download as CSV",
    exportHint: "Every event that matches the filters, newest first, not only this page.",
    badTime: "A time is not a date and time.",
    badPerson: "The person is neither an address nor a user id.",
    events: "Events",
    k_sign_in: "Signed in",
    k_code_sent: "Code sent",
    k_code_failed: "Wrong code",
    k_mail_failed: "Mail not delivered",
    k_lockout: "Locked out",
    k_token_issued: "Tokens issued",
    k_refresh_reuse: "Refresh token reused",
    k_logout: "Signed out",
    k_admin_change: "Admin change",
    k_key_rotation: "Key rotation",
    k_device_decision: "Device sign-in decision",
    k_shard_change: "Shard change",
    k_webhook_disabled: "Webhook disabled",
    k_grant_revoked: "Grant revoked",
    k_client_registration: "Application self-registration",
    k_passkey_created: "Passkey created",
    k_passkey_deleted: "Passkey removed",
    k_passkey_counter_regression: "Passkey counter went back",
  },
  fr: {
    title: "Journal d’audit",
    filters: "Filtres",
    person: "Personne (adresse ou identifiant)",
    kind: "Événement",
    anyKind: "Tous les événements",
    since: "Depuis (UTC)",
    until: "Jusqu’à (UTC)",
    show: "Afficher",
    clear: "Effacer les filtres",
    retention: "Les événements apparaissent en quelques secondes et sont gardés {days} jours.",
    time: "Date",
    who: "Personne",
    app: "Application",
    ip: "Adresse IP",
    detail: "Détails",
    none: "Aucun événement ne correspond.",
    older: "Événements plus anciens",
    newest: "Événements les plus récents",
    export: "Exporter ces événements",
    exportNdjson: "Télécharger en NDJSON",
    exportCsv: "Télécharger en CSV",
    exportHint:
      "Tous les événements qui correspondent aux filtres, du plus récent au plus ancien, pas seulement cette page.",
    badTime: "Une date n’est pas une date et une heure.",
    badPerson: "La personne n’est ni une adresse ni un identifiant.",
    events: "Événements",
    k_sign_in: "Connexion",
    k_code_sent: "Code envoyé",
    k_code_failed: "Code erroné",
    k_mail_failed: "E-mail non distribué",
    k_lockout: "Blocage",
    k_token_issued: "Jetons émis",
    k_refresh_reuse: "Jeton de rafraîchissement réutilisé",
    k_logout: "Déconnexion",
    k_admin_change: "Modification d’administration",
    k_key_rotation: "Rotation des clés",
    k_device_decision: "Décision de connexion d’un appareil",
    k_shard_change: "Changement de partitions",
    k_webhook_disabled: "Webhook désactivé",
    k_grant_revoked: "Autorisation retirée",
    k_client_registration: "Enregistrement d’une application par elle-même",
    k_passkey_created: "Clé d’accès créée",
    k_passkey_deleted: "Clé d’accès retirée",
    k_passkey_counter_regression: "Compteur de clé d’accès en recul",
  },
  ar: {
    title: "سجل التدقيق",
    filters: "عوامل التصفية",
    person: "الشخص (العنوان أو معرّف المستخدم)",
    kind: "الحدث",
    anyKind: "كل الأحداث",
    since: "من (UTC)",
    until: "حتى (UTC)",
    show: "اعرض",
    clear: "امسح عوامل التصفية",
    retention: "تظهر الأحداث خلال ثوانٍ وتُحفظ {days} يومًا.",
    time: "الوقت",
    who: "الشخص",
    app: "التطبيق",
    ip: "عنوان IP",
    detail: "التفاصيل",
    none: "لا يطابق أي حدث.",
    older: "أحداث أقدم",
    newest: "أحدث الأحداث",
    export: "تصدير هذه الأحداث",
    exportNdjson: "تنزيل بصيغة NDJSON",
    exportCsv: "تنزيل بصيغة CSV",
    exportHint: "كل الأحداث المطابقة لعوامل التصفية، الأحدث أولًا، وليس هذه الصفحة فقط.",
    badTime: "أحد الأوقات ليس تاريخًا ووقتًا.",
    badPerson: "الشخص ليس عنوانًا ولا معرّف مستخدم.",
    events: "الأحداث",
    k_sign_in: "تسجيل دخول",
    k_code_sent: "إرسال رمز",
    k_code_failed: "رمز خاطئ",
    k_mail_failed: "تعذّر تسليم البريد",
    k_lockout: "حظر مؤقت",
    k_token_issued: "إصدار رموز",
    k_refresh_reuse: "إعادة استخدام رمز تحديث",
    k_logout: "تسجيل خروج",
    k_admin_change: "تغيير إداري",
    k_key_rotation: "تدوير المفاتيح",
    k_device_decision: "قرار تسجيل دخول جهاز",
    k_shard_change: "تغيير الأجزاء",
    k_webhook_disabled: "تعطيل خطاف ويب",
    k_grant_revoked: "سحب منحة",
    k_client_registration: "تسجيل تطبيق لنفسه",
    k_passkey_created: "إنشاء مفتاح مرور",
    k_passkey_deleted: "إزالة مفتاح مرور",
    k_passkey_counter_regression: "تراجع عدّاد مفتاح المرور",
  },
});

const tr = (c: Context<ConsoleEnv>) => translate(words, c.get("locale"));
const isKind = (k: string): k is AuditKind => (AUDIT_KINDS as readonly string[]).includes(k);

/** An event's kind in the page's language, with its code (as the API and the export name it). */
export function EventKind(props: { c: Context<ConsoleEnv>; kind: string }) {
  const t = tr(props.c);
  return (
    <>
      {isKind(props.kind) ? `${t(`k_${props.kind}`)} ` : null}
      <code>{props.kind}</code>
    </>
  );
}

const PAGE = 50;
/** The API's largest page, for the export. */
const EXPORT_PAGE = 1000;

interface Filters {
  person: string;
  kind: string;
  since: string;
  until: string;
}

const filtersOf = (c: Context<ConsoleEnv>): Filters => ({
  person: (c.req.query("person") ?? "").trim(),
  kind: c.req.query("kind") ?? "",
  since: c.req.query("since") ?? "",
  until: c.req.query("until") ?? "",
});

/** A `datetime-local` value (no zone: the form says UTC), or an ISO date; epoch milliseconds. */
function utcMillis(value: string): number | null {
  const v = value.trim();
  const ms = Date.parse(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(v) ? `${v}Z` : v);
  return Number.isFinite(ms) ? ms : null;
}

/** The filters as `GET /admin/v1/audit`'s query (without cursor or limit), or what is wrong with them. */
function apiQuery(c: Context<ConsoleEnv>, f: Filters): URLSearchParams | string {
  const t = tr(c);
  const q = new URLSearchParams();
  if (f.person) {
    if (isAddress(f.person)) q.set("email", f.person);
    else if (USER_ID.test(f.person)) q.set("user", f.person);
    else return t("badPerson");
  }
  if (f.kind) q.set("kind", f.kind);
  for (const name of ["since", "until"] as const)
    if (f[name]) {
      const ms = utcMillis(f[name]);
      if (ms === null) return t("badTime");
      q.set(name, String(ms));
    }
  return q;
}

/** This page's own query for the filters (and a cursor). */
function pageQuery(f: Filters, extra: Record<string, string> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries({ ...f, ...extra })) if (v) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}

const auditBase = (c: Context<ConsoleEnv>) => `${tenantBase(c.get("tenant").id)}/audit`;
const apiPath = (c: Context<ConsoleEnv>) => tenantApiPath(c.get("tenant").id, "/audit");

async function auditPage(c: Context<ConsoleEnv>): Promise<Response> {
  const t = tr(c);
  const locale = c.get("locale");
  const f = filtersOf(c);
  const cursor = c.req.query("cursor") ?? "";
  const query = apiQuery(c, f);
  let error = typeof query === "string" ? query : undefined;
  let status = typeof query === "string" ? 400 : 200;
  let page: { events: ApiEvent[]; next_cursor: string | null } | null = null;
  if (typeof query !== "string") {
    query.set("limit", String(PAGE));
    if (cursor) query.set("cursor", cursor);
    const res = await adminCall<{ events: ApiEvent[]; next_cursor: string | null }>(c, "GET", `${apiPath(c)}?${query}`);
    if (res.ok) page = res.data;
    else {
      error = res.error;
      status = res.status;
    }
  }
  // The people the page names, by address: one call for the page (`GET /users?ids=`).
  const ids = [...new Set((page?.events ?? []).flatMap((e) => (e.user_id ? [e.user_id] : [])))];
  const people = new Map<string, string>();
  if (ids.length) {
    const res = await adminCall<{ users: ApiUser[] }>(
      c,
      "GET",
      `${tenantApiPath(c.get("tenant").id, "/users")}?ids=${ids.map(encodeURIComponent).join(",")}`,
    );
    if (res.ok) for (const u of res.data.users) people.set(u.id, u.email);
  }
  const base = auditBase(c);
  const peopleBase = `${tenantBase(c.get("tenant").id)}/people`;
  return renderPage(c, {
    title: t("title"),
    section: "audit",
    status,
    error,
    children: (
      <>
        <search aria-label={t("filters")}>
          <form method="get" action={base}>
            <p>
              <label for="person">{t("person")}</label>
              <input id="person" name="person" type="text" value={f.person} autocomplete="off" size={40} />
            </p>
            <p>
              <label for="kind">{t("kind")}</label>
              <select id="kind" name="kind">
                <option value="">{t("anyKind")}</option>
                {AUDIT_KINDS.map((k) => (
                  <option value={k} selected={f.kind === k}>
                    {`${t(`k_${k}`)} (${k})`}
                  </option>
                ))}
              </select>
            </p>
            <p>
              <label for="since">{t("since")}</label>
              <input id="since" name="since" type="datetime-local" value={f.since} />
            </p>
            <p>
              <label for="until">{t("until")}</label>
              <input id="until" name="until" type="datetime-local" value={f.until} />
            </p>
            <button type="submit" class="primary">
              {t("show")}
            </button>{" "}
            <a href={base}>{t("clear")}</a>
          </form>
        </search>
        <p class="muted">{t("retention", { days: c.get("config").POLICY.audit_retention_days })}</p>
        {page ? (
          <section aria-labelledby="events">
            <h2 id="events">{t("events")}</h2>
            {page.events.length ? (
              <table>
                <thead>
                  <tr>
                    <th scope="col">{t("time")}</th>
                    <th scope="col">{t("kind")}</th>
                    <th scope="col">{t("who")}</th>
                    <th scope="col">{t("app")}</th>
                    <th scope="col">{t("ip")}</th>
                    <th scope="col">{t("detail")}</th>
                  </tr>
                </thead>
                <tbody>
                  {page.events.map((e) => (
                    <tr>
                      <td>
                        <time datetime={e.at}>{formatTime(locale, Date.parse(e.at))}</time>
                      </td>
                      <td>
                        <EventKind c={c} kind={e.kind} />
                      </td>
                      <td>
                        {e.user_id ? (
                          <a href={`${peopleBase}/${seg(e.user_id)}`}>
                            {people.has(e.user_id) ? (
                              <bdi>{people.get(e.user_id)}</bdi>
                            ) : (
                              <span class="id">{e.user_id}</span>
                            )}
                          </a>
                        ) : null}
                      </td>
                      <td class="id">{e.client_id ?? ""}</td>
                      <td class="id">{e.ip ?? ""}</td>
                      <td>{e.detail ? <code dir="ltr">{JSON.stringify(e.detail)}</code> : null}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            ) : (
              <p>{t("none")}</p>
            )}
            <p>
              {cursor ? <a href={`${base}${pageQuery(f)}`}>{t("newest")}</a> : null}{" "}
              {page.next_cursor ? (
                <a href={`${base}${pageQuery(f, { cursor: page.next_cursor })}`} rel="next">
                  {t("older")}
                </a>
              ) : null}
            </p>
          </section>
        ) : null}
        {page ? (
          <section aria-labelledby="export">
            <h2 id="export">{t("export")}</h2>
            <p class="muted">{t("exportHint")}</p>
            <ul>
              <li>
                <a href={`${base}/export${pageQuery(f, { format: "ndjson" })}`} download>
                  {t("exportNdjson")}
                </a>
              </li>
              <li>
                <a href={`${base}/export${pageQuery(f, { format: "csv" })}`} download>
                  {t("exportCsv")}
                </a>
              </li>
            </ul>
          </section>
        ) : null}
      </>
    ),
  });
}

const CSV_COLUMNS = ["id", "at", "kind", "user_id", "email_key", "client_id", "ip", "detail"] as const;

/**
 * One CSV field (RFC 4180): quoted when it holds a quote, comma or line break. A field a spreadsheet
 * would run as a formula (=, +, -, @, tab, CR first) starts with an apostrophe instead (OWASP's
 * advice against CSV injection): the trail holds text others chose, such as a client's name.
 */
function csvField(value: unknown): string {
  let s = value === null || value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value);
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

const csvRow = (e: ApiEvent) => `${CSV_COLUMNS.map((k) => csvField(e[k])).join(",")}\r\n`;

/**
 * `GET .../audit/export?format=ndjson|csv&<filters>`: every event the filters match, as a download,
 * streamed a page of the API at a time (the next page is asked for only as the browser reads). A bad
 * filter is an error page, since nothing has been sent yet; a page that fails later ends the
 * download with an error, so a cut file is never mistaken for a whole one.
 */
async function exportEvents(c: Context<ConsoleEnv>): Promise<Response> {
  const format = c.req.query("format") === "csv" ? "csv" : "ndjson";
  const query = apiQuery(c, filtersOf(c));
  if (typeof query === "string") return auditPage(c);
  query.set("limit", String(EXPORT_PAGE));
  type Page = { events: ApiEvent[]; next_cursor: string | null };
  const read = (cursor: string | null) => {
    const q = new URLSearchParams(query);
    if (cursor) q.set("cursor", cursor);
    return adminCall<Page>(c, "GET", `${apiPath(c)}?${q}`);
  };
  const first = await read(null);
  if (!first.ok) return auditPage(c);
  const encoder = new TextEncoder();
  const render = (events: ApiEvent[]) =>
    encoder.encode(events.map((e) => (format === "csv" ? csvRow(e) : `${JSON.stringify(e)}\n`)).join(""));
  let next: Page | null = first.data;
  let header = format === "csv";
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (header) {
        header = false;
        controller.enqueue(encoder.encode(`${CSV_COLUMNS.join(",")}\r\n`));
      }
      if (!next) return controller.close();
      const page: Page = next;
      if (page.events.length) controller.enqueue(render(page.events));
      if (!page.next_cursor) {
        next = null;
        return controller.close();
      }
      const res = await read(page.next_cursor);
      if (!res.ok) return controller.error(new Error(`the audit trail stopped answering: ${res.error ?? res.status}`));
      next = res.data;
    },
  });
  const stamp = new Date().toISOString().slice(0, 16).replace(/[-:]/g, "").replace("T", "-");
  const file = `audit-${c.get("tenant").id}-${stamp}.${format}`;
  return new Response(body, {
    headers: {
      "Content-Type": format === "csv" ? "text/csv; charset=utf-8" : "application/x-ndjson; charset=utf-8",
      "Content-Disposition": `attachment; filename="${file}"`,
      "Cache-Control": "no-store",
      "X-Content-Type-Options": "nosniff",
    },
  });
}

export function registerAuditPages(app: Hono<ConsoleEnv>): void {
  app.get("/t/:tenant/audit", auditPage);
  app.get("/t/:tenant/audit/export", exportEvents);
}
