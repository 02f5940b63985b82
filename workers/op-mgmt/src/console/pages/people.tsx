import type { Context, Hono } from "hono";
import type { ConsoleEnv } from "../env";
import { catalogue, formatNumber, formatTime, translate } from "../i18n";
import { CsrfField, renderMessagePage, renderPage, tenantBase } from "../layout";
import { adminCall, seeOther, tenantApiPath } from "../operator";
import { EventKind } from "./audit";
import { type ApiEvent, type ApiUser, confirmPage, field, isAddress, noticeOf, seg, USER_ID } from "./people-common";

/**
 * People (issue 43): find a person by address or id, their page (organizations, passkeys, recent
 * events; revoke everything, delete), and the NDJSON import with its job's progress and errors by
 * line. Every read and change is an admin API call on the operator's behalf (`adminCall`).
 */

const words = catalogue({
  en: {
    title: "People",
    searchLabel: "Address or user id",
    search: "Find",
    searchHint: "An exact address (in any case) or a user id.",
    found: "Found",
    noneFound: "No one in this tenant has this address or id.",
    everyone: "Everyone, by user id",
    noPeople: "No one yet.",
    address: "Address",
    name: "Name",
    id: "User id",
    created: "Created",
    lastSignIn: "Last sign-in",
    never: "never",
    nextPage: "Next page",
    firstPage: "First page",
    importLink: "Import people from a file",
    details: "Details",
    sessions: "Sessions",
    sessionsNone:
      "The admin API cannot list a person’s sessions one by one, so this page does not show them. Ending every session (below) ends them all, with every token.",
    sessionsLast: "Last sign-in: {time}.",
    sessionsEnded: "Every session and token from before {time} was ended.",
    organizations: "Organizations",
    noOrganizations: "Not a member of any organization.",
    organization: "Organization",
    roles: "Roles",
    noRoles: "no role",
    passkeys: "Passkeys",
    noPasskeys: "No passkey.",
    passkeyCreated: "Created",
    passkeyUsed: "Last used",
    passkeySynced: "Synced",
    passkeyTransports: "Transports",
    passkeyAuthenticator: "Authenticator (AAGUID)",
    action: "Action",
    yes: "yes",
    no: "no",
    remove: "Remove",
    events: "Recent events",
    noEvents: "No event in the audit trail.",
    eventsAll: "All of this person’s events",
    time: "Time",
    event: "Event",
    app: "Application",
    ip: "IP address",
    revokeTitle: "End every session",
    revokeExplain:
      "Signs this person out everywhere: every session, refresh token and access token ends, and a code already issued is refused. They can sign in again.",
    revokeButton: "End every session…",
    revokeConfirmTitle: "End every session of {email}?",
    revokeConfirm: "End every session",
    cancel: "Cancel",
    deleteTitle: "Delete this person",
    deleteExplain:
      "Deletes the person with their passkeys and memberships; every session and token ends. This cannot be undone. If sign-up is open, signing in again with the address makes a new person.",
    deleteLabel: "To confirm, type the address {email}",
    deleteButton: "Delete this person",
    deleteMismatch: "The address typed does not match; nothing was deleted.",
    removePasskeyTitle: "Remove this passkey?",
    removePasskeyExplain:
      "The passkey created {time} will no longer sign {email} in. Their other passkeys and the sign-in by email code stay.",
    removePasskeyConfirm: "Remove the passkey",
    notFound: "There is no such person in this tenant.",
    revoked: "Every session and token of this person has ended.",
    deleted: "The person was deleted.",
    passkeyRemoved: "The passkey was removed.",
    imported: "The import has finished.",
    importTitle: "Import people",
    importExplain: "A file with one JSON record a line (NDJSON), like this:",
    importMatch:
      "An address that exists is matched, not duplicated: a new name updates it, a line without a name leaves it as it is. Running the same file again changes nothing.",
    importLimits:
      "Up to {mb} MB a file here; a larger one goes through the admin API (POST /admin/v1/imports/users), up to 200,000 lines a job.",
    fileLabel: "NDJSON file",
    importButton: "Import",
    noFile: "Choose a file to import.",
    tooLarge: "The file is larger than {mb} MB: send it through the admin API.",
    notUtf8: "The file is not UTF-8 text; nothing was imported.",
    recentImports: "Recent imports",
    noImports: "No import yet.",
    started: "Started",
    finished: "Finished",
    kind: "Kind",
    status: "Status",
    lines: "Lines",
    job: "Job",
    jobTitle: "Import {id}",
    running: "Running: {lines} lines read so far. This page refreshes every few seconds.",
    linesRead: "Lines read",
    createdCount: "Created",
    updatedCount: "Updated",
    unchangedCount: "Unchanged",
    failedCount: "Failed",
    errorsTitle: "Errors by line",
    noErrors: "No line was refused.",
    line: "Line",
    error: "Error",
    errorsCapped: "Only the first {n} errors are kept; {failed} lines failed in all.",
    status_running: "running",
    status_done: "done",
    status_incomplete: "incomplete: past the line limit",
    status_failed: "failed",
    status_interrupted: "interrupted",
    rerunHint: "Run the same file again to finish it: the lines already written come out unchanged.",
    backToImport: "Back to the import",
    noJob: "There is no such import job in this tenant.",
  },
  fr: {
    title: "Personnes",
    searchLabel: "Adresse ou identifiant",
    search: "Rechercher",
    searchHint: "Une adresse exacte (majuscules ou non) ou un identifiant d’utilisateur.",
    found: "Résultat",
    noneFound: "Personne dans ce locataire n’a cette adresse ou cet identifiant.",
    everyone: "Tout le monde, par identifiant",
    noPeople: "Personne pour l’instant.",
    address: "Adresse",
    name: "Nom",
    id: "Identifiant",
    created: "Créé",
    lastSignIn: "Dernière connexion",
    never: "jamais",
    nextPage: "Page suivante",
    firstPage: "Première page",
    importLink: "Importer des personnes depuis un fichier",
    details: "Détails",
    sessions: "Sessions",
    sessionsNone:
      "L’API d’administration ne sait pas lister les sessions d’une personne une à une ; cette page ne les montre donc pas. Mettre fin à toutes les sessions (ci-dessous) les termine toutes, avec tous les jetons.",
    sessionsLast: "Dernière connexion : {time}.",
    sessionsEnded: "Toutes les sessions et tous les jetons antérieurs au {time} ont pris fin.",
    organizations: "Organisations",
    noOrganizations: "Membre d’aucune organisation.",
    organization: "Organisation",
    roles: "Rôles",
    noRoles: "aucun rôle",
    passkeys: "Clés d’accès",
    noPasskeys: "Aucune clé d’accès.",
    passkeyCreated: "Créée",
    passkeyUsed: "Dernière utilisation",
    passkeySynced: "Synchronisée",
    passkeyTransports: "Transports",
    passkeyAuthenticator: "Authentificateur (AAGUID)",
    action: "Action",
    yes: "oui",
    no: "non",
    remove: "Retirer",
    events: "Événements récents",
    noEvents: "Aucun événement dans le journal d’audit.",
    eventsAll: "Tous les événements de cette personne",
    time: "Date",
    event: "Événement",
    app: "Application",
    ip: "Adresse IP",
    revokeTitle: "Mettre fin à toutes les sessions",
    revokeExplain:
      "Déconnecte cette personne partout : chaque session, jeton de rafraîchissement et jeton d’accès prend fin, et un code déjà émis est refusé. Elle peut se reconnecter.",
    revokeButton: "Mettre fin à toutes les sessions…",
    revokeConfirmTitle: "Mettre fin à toutes les sessions de {email} ?",
    revokeConfirm: "Mettre fin à toutes les sessions",
    cancel: "Annuler",
    deleteTitle: "Supprimer cette personne",
    deleteExplain:
      "Supprime la personne avec ses clés d’accès et ses adhésions ; chaque session et jeton prend fin. C’est irréversible. Si l’inscription est ouverte, une nouvelle connexion avec l’adresse crée une nouvelle personne.",
    deleteLabel: "Pour confirmer, saisissez l’adresse {email}",
    deleteButton: "Supprimer cette personne",
    deleteMismatch: "L’adresse saisie ne correspond pas ; rien n’a été supprimé.",
    removePasskeyTitle: "Retirer cette clé d’accès ?",
    removePasskeyExplain:
      "La clé d’accès créée le {time} ne connectera plus {email}. Ses autres clés d’accès et la connexion par code envoyé par e-mail restent.",
    removePasskeyConfirm: "Retirer la clé d’accès",
    notFound: "Cette personne n’existe pas dans ce locataire.",
    revoked: "Toutes les sessions et tous les jetons de cette personne ont pris fin.",
    deleted: "La personne a été supprimée.",
    passkeyRemoved: "La clé d’accès a été retirée.",
    imported: "L’import est terminé.",
    importTitle: "Importer des personnes",
    importExplain: "Un fichier d’un enregistrement JSON par ligne (NDJSON), comme ceci :",
    importMatch:
      "Une adresse existante est reconnue, pas dupliquée : un nouveau nom la met à jour, une ligne sans nom la laisse telle quelle. Relancer le même fichier ne change rien.",
    importLimits:
      "Jusqu’à {mb} Mo par fichier ici ; un fichier plus gros passe par l’API d’administration (POST /admin/v1/imports/users), jusqu’à 200 000 lignes par tâche.",
    fileLabel: "Fichier NDJSON",
    importButton: "Importer",
    noFile: "Choisissez un fichier à importer.",
    tooLarge: "Le fichier dépasse {mb} Mo : envoyez-le par l’API d’administration.",
    notUtf8: "Le fichier n’est pas du texte UTF-8 ; rien n’a été importé.",
    recentImports: "Imports récents",
    noImports: "Aucun import pour l’instant.",
    started: "Commencé",
    finished: "Terminé",
    kind: "Type",
    status: "État",
    lines: "Lignes",
    job: "Tâche",
    jobTitle: "Import {id}",
    running: "En cours : {lines} lignes lues jusqu’ici. Cette page se recharge toutes les quelques secondes.",
    linesRead: "Lignes lues",
    createdCount: "Créées",
    updatedCount: "Mises à jour",
    unchangedCount: "Inchangées",
    failedCount: "En échec",
    errorsTitle: "Erreurs par ligne",
    noErrors: "Aucune ligne refusée.",
    line: "Ligne",
    error: "Erreur",
    errorsCapped: "Seules les {n} premières erreurs sont gardées ; {failed} lignes ont échoué en tout.",
    status_running: "en cours",
    status_done: "terminé",
    status_incomplete: "incomplet : limite de lignes dépassée",
    status_failed: "échoué",
    status_interrupted: "interrompu",
    rerunHint: "Relancez le même fichier pour le terminer : les lignes déjà écrites ressortent inchangées.",
    backToImport: "Retour à l’import",
    noJob: "Cette tâche d’import n’existe pas dans ce locataire.",
  },
  ar: {
    title: "الأشخاص",
    searchLabel: "العنوان أو معرّف المستخدم",
    search: "ابحث",
    searchHint: "عنوان بريد مطابق (بأي حالة أحرف) أو معرّف مستخدم.",
    found: "النتيجة",
    noneFound: "لا أحد في هذا المستأجر يملك هذا العنوان أو المعرّف.",
    everyone: "الجميع، حسب المعرّف",
    noPeople: "لا أحد بعد.",
    address: "العنوان",
    name: "الاسم",
    id: "معرّف المستخدم",
    created: "أُنشئ",
    lastSignIn: "آخر تسجيل دخول",
    never: "أبدًا",
    nextPage: "الصفحة التالية",
    firstPage: "الصفحة الأولى",
    importLink: "استيراد أشخاص من ملف",
    details: "التفاصيل",
    sessions: "الجلسات",
    sessionsNone:
      "لا تستطيع واجهة الإدارة سرد جلسات الشخص واحدةً واحدة، لذا لا تعرضها هذه الصفحة. إنهاء كل الجلسات (أدناه) ينهيها جميعًا مع كل الرموز.",
    sessionsLast: "آخر تسجيل دخول: {time}.",
    sessionsEnded: "انتهت كل الجلسات والرموز السابقة لـ {time}.",
    organizations: "المؤسسات",
    noOrganizations: "ليس عضوًا في أي مؤسسة.",
    organization: "المؤسسة",
    roles: "الأدوار",
    noRoles: "بلا دور",
    passkeys: "مفاتيح المرور",
    noPasskeys: "لا يوجد مفتاح مرور.",
    passkeyCreated: "أُنشئ",
    passkeyUsed: "آخر استخدام",
    passkeySynced: "متزامن",
    passkeyTransports: "وسائل النقل",
    passkeyAuthenticator: "أداة المصادقة (AAGUID)",
    action: "إجراء",
    yes: "نعم",
    no: "لا",
    remove: "إزالة",
    events: "الأحداث الأخيرة",
    noEvents: "لا توجد أحداث في سجل التدقيق.",
    eventsAll: "كل أحداث هذا الشخص",
    time: "الوقت",
    event: "الحدث",
    app: "التطبيق",
    ip: "عنوان IP",
    revokeTitle: "إنهاء كل الجلسات",
    revokeExplain:
      "يُخرج هذا الشخص من كل مكان: تنتهي كل جلسة ورمز تحديث ورمز وصول، ويُرفض أي رمز تفويض صدر بالفعل. يمكنه تسجيل الدخول مجددًا.",
    revokeButton: "إنهاء كل الجلسات…",
    revokeConfirmTitle: "إنهاء كل جلسات {email}؟",
    revokeConfirm: "إنهاء كل الجلسات",
    cancel: "إلغاء",
    deleteTitle: "حذف هذا الشخص",
    deleteExplain:
      "يحذف الشخص مع مفاتيح مروره وعضوياته؛ وتنتهي كل جلسة وكل رمز. لا يمكن التراجع عن ذلك. إذا كان التسجيل مفتوحًا، فإن تسجيل الدخول مجددًا بالعنوان ينشئ شخصًا جديدًا.",
    deleteLabel: "للتأكيد، اكتب العنوان {email}",
    deleteButton: "حذف هذا الشخص",
    deleteMismatch: "العنوان المكتوب غير مطابق؛ لم يُحذف شيء.",
    removePasskeyTitle: "إزالة مفتاح المرور هذا؟",
    removePasskeyExplain:
      "لن يُدخل مفتاح المرور المُنشأ في {time} المستخدم {email} بعد الآن. تبقى مفاتيح مروره الأخرى وتسجيل الدخول برمز البريد.",
    removePasskeyConfirm: "إزالة مفتاح المرور",
    notFound: "لا يوجد هذا الشخص في هذا المستأجر.",
    revoked: "انتهت كل جلسات هذا الشخص ورموزه.",
    deleted: "حُذف الشخص.",
    passkeyRemoved: "أُزيل مفتاح المرور.",
    imported: "انتهى الاستيراد.",
    importTitle: "استيراد أشخاص",
    importExplain: "ملف فيه سجل JSON واحد في كل سطر (NDJSON)، هكذا:",
    importMatch:
      "يُطابَق العنوان الموجود ولا يُكرَّر: الاسم الجديد يحدّثه، والسطر بلا اسم يتركه كما هو. إعادة تشغيل الملف نفسه لا تغيّر شيئًا.",
    importLimits:
      "حتى {mb} ميغابايت للملف هنا؛ الملف الأكبر يمر عبر واجهة الإدارة (POST /admin/v1/imports/users)، حتى 200٬000 سطر للمهمة.",
    fileLabel: "ملف NDJSON",
    importButton: "استيراد",
    noFile: "اختر ملفًا لاستيراده.",
    tooLarge: "الملف أكبر من {mb} ميغابايت: أرسله عبر واجهة الإدارة.",
    notUtf8: "الملف ليس نصًا بترميز UTF-8؛ لم يُستورد شيء.",
    recentImports: "عمليات الاستيراد الأخيرة",
    noImports: "لا يوجد استيراد بعد.",
    started: "بدأ",
    finished: "انتهى",
    kind: "النوع",
    status: "الحالة",
    lines: "الأسطر",
    job: "المهمة",
    jobTitle: "الاستيراد {id}",
    running: "قيد التشغيل: قُرئ {lines} سطرًا حتى الآن. تتحدّث هذه الصفحة كل بضع ثوانٍ.",
    linesRead: "الأسطر المقروءة",
    createdCount: "أُنشئ",
    updatedCount: "حُدّث",
    unchangedCount: "دون تغيير",
    failedCount: "فشل",
    errorsTitle: "الأخطاء حسب السطر",
    noErrors: "لم يُرفض أي سطر.",
    line: "السطر",
    error: "الخطأ",
    errorsCapped: "تُحفظ أول {n} أخطاء فقط؛ فشل {failed} سطرًا في المجموع.",
    status_running: "قيد التشغيل",
    status_done: "اكتمل",
    status_incomplete: "غير مكتمل: تجاوز حد الأسطر",
    status_failed: "فشل",
    status_interrupted: "انقطع",
    rerunHint: "أعد تشغيل الملف نفسه لإكماله: الأسطر المكتوبة سابقًا تظهر دون تغيير.",
    backToImport: "العودة إلى الاستيراد",
    noJob: "لا توجد مهمة الاستيراد هذه في هذا المستأجر.",
  },
});

type Key = keyof (typeof words)["en"];

/** The largest file the console's import takes (it holds the text once to pass it on); more goes to the API. */
export const MAX_UPLOAD_MB = 10;
const PAGE = 25;
const EVENTS_SHOWN = 10;
const NOTICES = ["revoked", "deleted", "passkeyRemoved", "imported"] as const;

const tr = (c: Context<ConsoleEnv>) => translate(words, c.get("locale"));
const peopleBase = (c: Context<ConsoleEnv>) => `${tenantBase(c.get("tenant").id)}/people`;
const api = (c: Context<ConsoleEnv>, rest: string) => tenantApiPath(c.get("tenant").id, rest);
const when = (c: Context<ConsoleEnv>, ms: number | null | undefined, never?: string) =>
  ms ? <time datetime={new Date(ms).toISOString()}>{formatTime(c.get("locale"), ms)}</time> : (never ?? "");

function PeopleTable(props: { c: Context<ConsoleEnv>; users: ApiUser[]; caption: string }) {
  const { c } = props;
  const t = tr(c);
  return (
    <table>
      <caption class="muted">{props.caption}</caption>
      <thead>
        <tr>
          <th scope="col">{t("address")}</th>
          <th scope="col">{t("name")}</th>
          <th scope="col">{t("id")}</th>
          <th scope="col">{t("lastSignIn")}</th>
        </tr>
      </thead>
      <tbody>
        {props.users.map((u) => (
          <tr>
            <td>
              <a href={`${peopleBase(c)}/${seg(u.id)}`}>
                <bdi>{u.email}</bdi>
              </a>
            </td>
            <td>
              <bdi>{u.name ?? ""}</bdi>
            </td>
            <td class="id">{u.id}</td>
            <td>{when(c, u.last_login_at, t("never"))}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** `/people`: find someone by address or id, or browse everyone a page at a time. */
async function peoplePage(c: Context<ConsoleEnv>): Promise<Response> {
  const t = tr(c);
  const q = (c.req.query("q") ?? "").trim();
  const after = c.req.query("after") ?? "";
  let found: ApiUser[] | null = null;
  let error: string | undefined;
  let status = 200;
  if (q) {
    const res = isAddress(q)
      ? await adminCall<{ users: ApiUser[] }>(c, "GET", `${api(c, "/users")}?email=${encodeURIComponent(q)}`)
      : USER_ID.test(q)
        ? await adminCall<ApiUser>(c, "GET", api(c, `/users/${seg(q)}`))
        : { ok: false, status: 404, data: null, error: undefined };
    if (res.ok)
      found = "users" in (res.data as object) ? (res.data as { users: ApiUser[] }).users : [res.data as ApiUser];
    else if (res.status === 404) found = [];
    else {
      error = res.error;
      status = res.status;
    }
  }
  const list = q
    ? null
    : await adminCall<{ users: ApiUser[]; next: string | null }>(
        c,
        "GET",
        `${api(c, "/users")}?limit=${PAGE}${after ? `&after=${encodeURIComponent(after)}` : ""}`,
      );
  if (list && !list.ok) {
    error = list.error;
    status = list.status;
  }
  const notice = noticeOf(c, NOTICES);
  return renderPage(c, {
    title: t("title"),
    section: "people",
    status,
    notice: notice ? t(notice) : undefined,
    error,
    children: (
      <>
        <search>
          <form method="get" action={peopleBase(c)}>
            <label for="q">{t("searchLabel")}</label>
            <input id="q" name="q" type="search" value={q} autocomplete="off" aria-describedby="q-hint" size={40} />{" "}
            <button type="submit" class="primary">
              {t("search")}
            </button>
            <p id="q-hint" class="muted">
              {t("searchHint")}
            </p>
          </form>
        </search>
        <p>
          <a href={`${peopleBase(c)}/import`}>{t("importLink")}</a>
        </p>
        {found !== null ? (
          <section aria-labelledby="found">
            <h2 id="found">{t("found")}</h2>
            {found.length ? <PeopleTable c={c} users={found} caption={q} /> : <p>{t("noneFound")}</p>}
          </section>
        ) : null}
        {list?.ok ? (
          <section aria-labelledby="everyone">
            <h2 id="everyone">{t("everyone")}</h2>
            {list.data.users.length ? (
              <PeopleTable c={c} users={list.data.users} caption={t("everyone")} />
            ) : (
              <p>{t("noPeople")}</p>
            )}
            <p>
              {after ? <a href={peopleBase(c)}>{t("firstPage")}</a> : null}{" "}
              {list.data.next ? (
                <a href={`${peopleBase(c)}?after=${encodeURIComponent(list.data.next)}`} rel="next">
                  {t("nextPage")}
                </a>
              ) : null}
            </p>
          </section>
        ) : null}
      </>
    ),
  });
}

interface Passkey {
  id: string;
  aaguid: string;
  transports: string[];
  backed_up: boolean;
  created_at: number;
  last_used_at: number | null;
}

interface UserOrganization {
  id: string;
  name: string;
  roles: string[];
}

/** A person's page: who, their organizations, passkeys and recent events, and what can be done. */
async function personPage(c: Context<ConsoleEnv>, o: { error?: string; status?: number } = {}): Promise<Response> {
  const t = tr(c);
  const id = c.req.param("id") ?? "";
  const userRes = await adminCall<ApiUser>(c, "GET", api(c, `/users/${seg(id)}`));
  if (userRes.status === 404)
    return renderPage(c, { title: t("notFound"), section: "people", status: 404, children: <BackToPeople c={c} /> });
  if (!userRes.ok)
    return renderPage(c, {
      title: t("title"),
      section: "people",
      status: userRes.status,
      error: userRes.error,
      children: <BackToPeople c={c} />,
    });
  const user = userRes.data;
  const [orgs, passkeys, events] = await Promise.all([
    adminCall<{ organizations: UserOrganization[]; next: string | null }>(
      c,
      "GET",
      `${api(c, `/users/${seg(id)}/organizations`)}?limit=200`,
    ),
    adminCall<{ passkeys: Passkey[] }>(c, "GET", api(c, `/users/${seg(id)}/passkeys`)),
    adminCall<{ events: ApiEvent[] }>(c, "GET", `${api(c, "/audit")}?user=${seg(id)}&limit=${EVENTS_SHOWN}`),
  ]);
  const base = `${peopleBase(c)}/${seg(id)}`;
  const orgBase = `${tenantBase(c.get("tenant").id)}/orgs`;
  const notice = noticeOf(c, NOTICES);
  const failed = [orgs, passkeys, events].find((r) => !r.ok);
  return renderPage(c, {
    title: user.email,
    section: "people",
    status: o.status ?? 200,
    notice: notice ? t(notice) : undefined,
    error: o.error ?? failed?.error,
    children: (
      <>
        <section aria-labelledby="details">
          <h2 id="details">{t("details")}</h2>
          <dl>
            <dt>{t("address")}</dt>
            <dd>
              <bdi>{user.email}</bdi>
            </dd>
            <dt>{t("name")}</dt>
            <dd>
              <bdi>{user.name ?? ""}</bdi>
            </dd>
            <dt>{t("id")}</dt>
            <dd class="id">{user.id}</dd>
            <dt>{t("created")}</dt>
            <dd>{when(c, user.created_at)}</dd>
            <dt>{t("lastSignIn")}</dt>
            <dd>{when(c, user.last_login_at, t("never"))}</dd>
          </dl>
        </section>
        <section aria-labelledby="sessions">
          <h2 id="sessions">{t("sessions")}</h2>
          <p>{t("sessionsNone")}</p>
          {user.last_login_at ? (
            <p>{t("sessionsLast", { time: formatTime(c.get("locale"), user.last_login_at) })}</p>
          ) : null}
          {user.revoked_at ? <p>{t("sessionsEnded", { time: formatTime(c.get("locale"), user.revoked_at) })}</p> : null}
        </section>
        <section aria-labelledby="organizations">
          <h2 id="organizations">{t("organizations")}</h2>
          {orgs.ok && orgs.data.organizations.length ? (
            <table>
              <thead>
                <tr>
                  <th scope="col">{t("organization")}</th>
                  <th scope="col">{t("roles")}</th>
                </tr>
              </thead>
              <tbody>
                {orgs.data.organizations.map((org) => (
                  <tr>
                    <td>
                      <a href={`${orgBase}/${seg(org.id)}`}>
                        <bdi>{org.name}</bdi>
                      </a>
                    </td>
                    <td>{org.roles.length ? <code>{org.roles.join(", ")}</code> : t("noRoles")}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <p>{t("noOrganizations")}</p>
          )}
        </section>
        <section aria-labelledby="passkeys">
          <h2 id="passkeys">{t("passkeys")}</h2>
          {passkeys.ok && passkeys.data.passkeys.length ? (
            <table>
              <thead>
                <tr>
                  <th scope="col">{t("passkeyCreated")}</th>
                  <th scope="col">{t("passkeyUsed")}</th>
                  <th scope="col">{t("passkeySynced")}</th>
                  <th scope="col">{t("passkeyTransports")}</th>
                  <th scope="col">{t("passkeyAuthenticator")}</th>
                  <th scope="col">{t("action")}</th>
                </tr>
              </thead>
              <tbody>
                {passkeys.data.passkeys.map((p, i) => (
                  <tr>
                    <td id={`passkey-${i}`}>{when(c, p.created_at)}</td>
                    <td>{when(c, p.last_used_at, t("never"))}</td>
                    <td>{p.backed_up ? t("yes") : t("no")}</td>
                    <td class="id">{p.transports.join(", ")}</td>
                    <td class="id">{p.aaguid}</td>
                    <td>
                      <a href={`${base}/passkeys/${seg(p.id)}/remove`} aria-describedby={`passkey-${i}`}>
                        {t("remove")}
                      </a>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <p>{t("noPasskeys")}</p>
          )}
        </section>
        <section aria-labelledby="events">
          <h2 id="events">{t("events")}</h2>
          {events.ok && events.data.events.length ? (
            <table>
              <thead>
                <tr>
                  <th scope="col">{t("time")}</th>
                  <th scope="col">{t("event")}</th>
                  <th scope="col">{t("app")}</th>
                  <th scope="col">{t("ip")}</th>
                </tr>
              </thead>
              <tbody>
                {events.data.events.map((e) => (
                  <tr>
                    <td>{when(c, Date.parse(e.at))}</td>
                    <td>
                      <EventKind c={c} kind={e.kind} />
                    </td>
                    <td class="id">{e.client_id ?? ""}</td>
                    <td class="id">{e.ip ?? ""}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <p>{t("noEvents")}</p>
          )}
          <p>
            <a href={`${tenantBase(c.get("tenant").id)}/audit?person=${seg(user.id)}`}>{t("eventsAll")}</a>
          </p>
        </section>
        <section aria-labelledby="revoke">
          <h2 id="revoke">{t("revokeTitle")}</h2>
          <p>{t("revokeExplain")}</p>
          <form method="get" action={`${base}/revoke`}>
            <button type="submit" class="danger">
              {t("revokeButton")}
            </button>
          </form>
        </section>
        <section aria-labelledby="delete">
          <h2 id="delete">{t("deleteTitle")}</h2>
          <p>{t("deleteExplain")}</p>
          <form method="post" action={`${base}/delete`}>
            <CsrfField c={c} />
            <label for="confirm-delete">{t("deleteLabel", { email: user.email })}</label>
            <input id="confirm-delete" name="confirm" type="text" autocomplete="off" required size={40} />{" "}
            <button type="submit" class="danger">
              {t("deleteButton")}
            </button>
          </form>
        </section>
      </>
    ),
  });
}

function BackToPeople(props: { c: Context<ConsoleEnv> }) {
  return (
    <p>
      <a href={peopleBase(props.c)}>{tr(props.c)("title")}</a>
    </p>
  );
}

/** The user a confirmation step or an action is about, or the not-found page. */
async function userOr404(c: Context<ConsoleEnv>): Promise<ApiUser | Response> {
  const res = await adminCall<ApiUser>(c, "GET", api(c, `/users/${seg(c.req.param("id") ?? "")}`));
  if (res.ok) return res.data;
  const t = tr(c);
  if (res.status === 404)
    return renderPage(c, { title: t("notFound"), section: "people", status: 404, children: <BackToPeople c={c} /> });
  return renderPage(c, {
    title: t("title"),
    section: "people",
    status: res.status,
    error: res.error,
    children: <BackToPeople c={c} />,
  });
}

async function revokeConfirm(c: Context<ConsoleEnv>): Promise<Response> {
  const user = await userOr404(c);
  if (user instanceof Response) return user;
  const t = tr(c);
  const base = `${peopleBase(c)}/${seg(user.id)}`;
  return confirmPage(c, {
    title: t("revokeConfirmTitle", { email: user.email }),
    section: "people",
    explain: t("revokeExplain"),
    action: `${base}/revoke`,
    confirm: t("revokeConfirm"),
    cancel: t("cancel"),
    back: base,
  });
}

async function revoke(c: Context<ConsoleEnv>): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const res = await adminCall(c, "POST", api(c, `/users/${seg(id)}/revoke`));
  if (!res.ok) return personPage(c, { error: res.error, status: res.status });
  return seeOther(`${peopleBase(c)}/${seg(id)}`, "revoked");
}

/** Deleting takes the person's address typed again (a typed confirmation). */
async function remove(c: Context<ConsoleEnv>): Promise<Response> {
  const t = tr(c);
  const user = await userOr404(c);
  if (user instanceof Response) return user;
  const form = await c.req.parseBody({ all: true });
  if (field(form, "confirm").toLowerCase() !== user.email.toLowerCase())
    return personPage(c, { error: t("deleteMismatch"), status: 400 });
  const res = await adminCall(c, "DELETE", api(c, `/users/${seg(user.id)}`));
  if (!res.ok) return personPage(c, { error: res.error, status: res.status });
  return seeOther(peopleBase(c), "deleted");
}

async function passkeyOr404(c: Context<ConsoleEnv>, user: ApiUser): Promise<Passkey | Response> {
  const res = await adminCall<{ passkeys: Passkey[] }>(c, "GET", api(c, `/users/${seg(user.id)}/passkeys`));
  const passkey = res.ok ? res.data.passkeys.find((p) => p.id === c.req.param("passkey")) : undefined;
  if (passkey) return passkey;
  return renderMessagePage(c, { kind: "notFound", status: 404 });
}

async function removePasskeyConfirm(c: Context<ConsoleEnv>): Promise<Response> {
  const user = await userOr404(c);
  if (user instanceof Response) return user;
  const passkey = await passkeyOr404(c, user);
  if (passkey instanceof Response) return passkey;
  const t = tr(c);
  const base = `${peopleBase(c)}/${seg(user.id)}`;
  return confirmPage(c, {
    title: t("removePasskeyTitle"),
    section: "people",
    explain: t("removePasskeyExplain", { time: formatTime(c.get("locale"), passkey.created_at), email: user.email }),
    action: `${base}/passkeys/${seg(passkey.id)}/remove`,
    confirm: t("removePasskeyConfirm"),
    cancel: t("cancel"),
    back: base,
  });
}

async function removePasskey(c: Context<ConsoleEnv>): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const res = await adminCall(c, "DELETE", api(c, `/users/${seg(id)}/passkeys/${seg(c.req.param("passkey") ?? "")}`));
  if (!res.ok) return personPage(c, { error: res.error, status: res.status });
  return seeOther(`${peopleBase(c)}/${seg(id)}`, "passkeyRemoved");
}

// ---- Import.

interface ImportJob {
  id: string;
  kind: string;
  status: "running" | "done" | "incomplete" | "failed" | "interrupted";
  lines: number;
  created: number;
  updated: number;
  unchanged: number;
  failed: number;
  errors: { line: number; error: string }[];
  started_at: number;
  updated_at: number;
  finished_at: number | null;
}

const statusKey = (s: ImportJob["status"]): Key => `status_${s}`;
/** Errors a job keeps (entities/imports.ts MAX_ERRORS); the counts cover every line. */
const KEPT_ERRORS = 100;
const EXAMPLE = '{"email": "ada@example.com", "name": "Ada Lovelace"}';

async function importPage(c: Context<ConsoleEnv>, o: { error?: string; status?: number } = {}): Promise<Response> {
  const t = tr(c);
  const n = (x: number) => formatNumber(c.get("locale"), x);
  const jobs = await adminCall<{ imports: ImportJob[] }>(c, "GET", api(c, "/imports"));
  return renderPage(c, {
    title: t("importTitle"),
    section: "people",
    status: o.status ?? 200,
    error: o.error ?? (jobs.ok ? undefined : jobs.error),
    children: (
      <>
        <p>{t("importExplain")}</p>
        <pre class="id" dir="ltr">
          {EXAMPLE}
        </pre>
        <p>{t("importMatch")}</p>
        <p class="muted">{t("importLimits", { mb: n(MAX_UPLOAD_MB) })}</p>
        <form method="post" action={`${peopleBase(c)}/import`} enctype="multipart/form-data">
          <CsrfField c={c} />
          <label for="file">{t("fileLabel")}</label>
          <input id="file" name="file" type="file" required accept=".ndjson,.jsonl,.json,.txt,application/x-ndjson" />{" "}
          <button type="submit" class="primary">
            {t("importButton")}
          </button>
        </form>
        <section aria-labelledby="recent">
          <h2 id="recent">{t("recentImports")}</h2>
          {jobs.ok && jobs.data.imports.length ? (
            <table>
              <thead>
                <tr>
                  <th scope="col">{t("started")}</th>
                  <th scope="col">{t("kind")}</th>
                  <th scope="col">{t("status")}</th>
                  <th scope="col">{t("lines")}</th>
                  <th scope="col">{t("failedCount")}</th>
                  <th scope="col">{t("job")}</th>
                </tr>
              </thead>
              <tbody>
                {jobs.data.imports.map((j) => (
                  <tr>
                    <td>{when(c, j.started_at)}</td>
                    <td class="id">{j.kind}</td>
                    <td>{t(statusKey(j.status))}</td>
                    <td>{n(j.lines)}</td>
                    <td>{n(j.failed)}</td>
                    <td>
                      <a href={`${peopleBase(c)}/import/${seg(j.id)}`} class="id">
                        {j.id}
                      </a>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <p>{t("noImports")}</p>
          )}
        </section>
        <p>
          <a href={peopleBase(c)}>{t("title")}</a>
        </p>
      </>
    ),
  });
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/**
 * The upload: the file's text goes to `POST /admin/v1/imports/users` as `application/x-ndjson`
 * (the API's streaming import; it answers with the finished job), then the job's page. A body the
 * API refused part-way (a bad byte, say) names its job, whose page shows where it stopped.
 */
async function runImport(c: Context<ConsoleEnv>): Promise<Response> {
  const t = tr(c);
  const form = await c.req.parseBody({ all: true });
  const file = form.file;
  if (!(file instanceof File) || file.size === 0) return importPage(c, { error: t("noFile"), status: 400 });
  if (file.size > MAX_UPLOAD_MB * 1024 * 1024)
    return importPage(c, { error: t("tooLarge", { mb: formatNumber(c.get("locale"), MAX_UPLOAD_MB) }), status: 413 });
  let text: string;
  try {
    text = strictUtf8.decode(await file.arrayBuffer());
  } catch {
    return importPage(c, { error: t("notUtf8"), status: 400 });
  }
  const res = await adminCall<ImportJob>(c, "POST", api(c, "/imports/users"), text, "application/x-ndjson");
  const job =
    res.data && typeof res.data === "object" && "id" in res.data
      ? res.data.id
      : /import job (imp_[A-Za-z0-9_-]+)/.exec(res.error ?? "")?.[1];
  if (!job) return importPage(c, { error: res.error, status: res.status });
  return seeOther(`${peopleBase(c)}/import/${seg(job)}`, res.ok ? "imported" : undefined);
}

/** An import job: its status and counts, and its errors by line; while it runs, the page refreshes itself. */
async function jobPage(c: Context<ConsoleEnv>): Promise<Response> {
  const t = tr(c);
  const n = (x: number) => formatNumber(c.get("locale"), x);
  const res = await adminCall<ImportJob>(c, "GET", api(c, `/imports/${seg(c.req.param("job") ?? "")}`));
  if (!res.ok)
    return renderPage(c, {
      title: res.status === 404 ? t("noJob") : t("importTitle"),
      section: "people",
      status: res.status,
      error: res.status === 404 ? undefined : res.error,
      children: (
        <p>
          <a href={`${peopleBase(c)}/import`}>{t("backToImport")}</a>
        </p>
      ),
    });
  const job = res.data;
  const running = job.status === "running";
  const notice = noticeOf(c, NOTICES);
  return renderPage(c, {
    title: t("jobTitle", { id: job.id }),
    section: "people",
    notice: notice ? t(notice) : undefined,
    // No script: the browser reloads the page while the job runs (an HTTP Refresh, like <meta refresh>).
    ...(running ? { headers: { Refresh: "3" } } : {}),
    children: (
      <>
        <p role="status">
          {t("status")}: <strong>{t(statusKey(job.status))}</strong>
          {running ? <> — {t("running", { lines: n(job.lines) })}</> : null}
        </p>
        <dl>
          <dt>{t("kind")}</dt>
          <dd class="id">{job.kind}</dd>
          <dt>{t("started")}</dt>
          <dd>{when(c, job.started_at)}</dd>
          <dt>{t("finished")}</dt>
          <dd>{when(c, job.finished_at)}</dd>
          <dt>{t("linesRead")}</dt>
          <dd>{n(job.lines)}</dd>
          <dt>{t("createdCount")}</dt>
          <dd>{n(job.created)}</dd>
          <dt>{t("updatedCount")}</dt>
          <dd>{n(job.updated)}</dd>
          <dt>{t("unchangedCount")}</dt>
          <dd>{n(job.unchanged)}</dd>
          <dt>{t("failedCount")}</dt>
          <dd>{n(job.failed)}</dd>
        </dl>
        {job.status === "failed" || job.status === "interrupted" ? <p>{t("rerunHint")}</p> : null}
        <section aria-labelledby="errors">
          <h2 id="errors">{t("errorsTitle")}</h2>
          {job.errors.length ? (
            <table>
              <thead>
                <tr>
                  <th scope="col">{t("line")}</th>
                  <th scope="col">{t("error")}</th>
                </tr>
              </thead>
              <tbody>
                {job.errors.map((e) => (
                  <tr>
                    <td>{n(e.line)}</td>
                    <td>
                      <code dir="ltr">{e.error}</code>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <p>{t("noErrors")}</p>
          )}
          {job.failed > job.errors.length ? (
            <p class="muted">{t("errorsCapped", { n: n(KEPT_ERRORS), failed: n(job.failed) })}</p>
          ) : null}
        </section>
        <p>
          <a href={`${peopleBase(c)}/import`}>{t("backToImport")}</a>
        </p>
      </>
    ),
  });
}

export function registerPeoplePages(app: Hono<ConsoleEnv>): void {
  const at = "/t/:tenant/people";
  app.get(at, peoplePage);
  app.get(`${at}/import`, (c) => importPage(c));
  app.post(`${at}/import`, runImport);
  app.get(`${at}/import/:job`, jobPage);
  app.get(`${at}/:id`, (c) => personPage(c));
  app.get(`${at}/:id/revoke`, revokeConfirm);
  app.post(`${at}/:id/revoke`, revoke);
  app.post(`${at}/:id/delete`, remove);
  app.get(`${at}/:id/passkeys/:passkey/remove`, removePasskeyConfirm);
  app.post(`${at}/:id/passkeys/:passkey/remove`, removePasskey);
}
