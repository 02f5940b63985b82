import type { Context, Hono } from "hono";
import type { Child } from "hono/jsx";
import { WEBHOOK_EVENT_TYPES } from "../../../../shared/events/webhooks/catalogue";
import type { ConsoleEnv } from "../env";
import { catalogue, formatNumber, formatTime, type Translate, translate } from "../i18n";
import { CsrfField, renderPage, tenantBase } from "../layout";
import { adminCall, seeOther, tenantApiPath } from "../operator";
import { Field, FieldProblems, FormStyle, type Problem, ProblemSummary, posted, problemsOf } from "./form-problems";

/**
 * A tenant's webhooks (issue 43, docs/webhooks.md): its endpoints, each with the events it receives;
 * an endpoint's delivery log (every attempt), its failed messages and their replay, a test event, a
 * new signing secret (shown once, in the POST's own answer), disabling and deleting it. Every action
 * is an admin API call (`/admin/v1/webhooks...`) on the operator's behalf.
 */

const words = catalogue({
  en: {
    title: "Webhooks",
    intro:
      "Keyway tells your applications what happens here: sign-ins, people created or deleted, applications changed. Each endpoint receives the events it asks for, signed with its own secret.",
    listLabel: "Endpoints",
    none: "No endpoint yet.",
    add: "Add an endpoint",
    delivering: "Delivering",
    disabled: "Disabled",
    failing: "{n} failed attempts in a row",
    allEvents: "all events",
    eventsCount: "{n} event types",
    url: "URL",
    urlHint: "Where Keyway sends each event (a POST): https; http only to a loopback address outside production.",
    description: "Description",
    descriptionHint: "For you: what receives these events.",
    events: "Events",
    eventsHint: "The events this endpoint receives.",
    everyEvent: "Every event, present and future (*)",
    submitAdd: "Add the endpoint",
    refused: "Nothing was saved. The admin API refused this:",
    addedTitle: "Endpoint added",
    added: "The endpoint is added. Events reach it from a few seconds from now.",
    secret: "Signing secret",
    secretWarning:
      "Copy the secret now into the receiver's configuration: it is shown this once. The receiver checks each delivery's webhook-signature with it (Standard Webhooks).",
    openEndpoint: "Go to the endpoint",
    backToList: "Back to the webhooks",
    about: "About this endpoint",
    status: "Status",
    disabledBecause: "Disabled: {reason}",
    failures: "Failed attempts in a row",
    failingSince: "Failing since",
    rotationEnds: "The previous secret also signs until",
    created: "Added",
    test: "Send a test event",
    testExplain: "A webhook.test event is queued for this endpoint alone; it shows in the delivery log within seconds.",
    testQueued: "A test event was queued.",
    log: "Delivery log",
    logExplain: "The latest attempts, newest first.",
    noAttempts: "No attempt yet.",
    time: "Time",
    event: "Event",
    message: "Message",
    answer: "Answer",
    latency: "Took",
    error: "Error",
    nextTry: "Next try",
    noAnswer: "no answer",
    ms: "{n} ms",
    messages: "Messages",
    messagesExplain:
      "The events queued for this endpoint. A message that fails is retried for a day, then kept 14 days as failed, to be replayed.",
    show: "Show",
    status_failed: "Failed",
    status_pending: "Waiting",
    status_delivered: "Delivered",
    status_all: "All",
    apply: "Show",
    noMessages: "No message.",
    attempts: "Attempts",
    lastAnswer: "Last answer",
    replay: "Replay",
    replayOne: "Replay {id}",
    replayed: "Queued again: the messages are sent within seconds.",
    replaySince: "Replay everything since a time",
    replaySinceExplain:
      "Every message queued since then is sent again on a fresh retry schedule, delivered or not. Receivers deduplicate by webhook-id.",
    since: "Since (UTC)",
    badTime: "Give a date and a time.",
    settings: "Settings",
    save: "Save changes",
    saved: "Changes saved.",
    secretExplain:
      "Make a new secret if the current one has leaked, or to rotate it. The old one can keep signing beside the new one for a while, so the receiver switches without losing a delivery.",
    rotate: "Make a new secret",
    rotateTitle: "Make a new signing secret?",
    rotateWarning: "Deliveries are signed with the new secret from now on.",
    overlap: "The old secret also signs for",
    overlap_0: "no time: it stops at once",
    overlap_3600: "an hour",
    overlap_86400: "a day",
    overlap_604800: "a week",
    rotatedTitle: "New signing secret",
    rotated: "A new secret was made.",
    stop: "Stop deliveries",
    enableExplain: "Deliveries are stopped. Enable the endpoint to deliver again, then replay what it missed.",
    enable: "Enable",
    enabledNotice: "The endpoint is enabled.",
    disableExplain: "Disable the endpoint to stop deliveries without losing its settings.",
    disable: "Disable…",
    disableTitle: "Disable this endpoint?",
    disableWarning:
      "Events are no longer delivered to it: the messages queued for it fail without a request. Enabling it again does not send them: replay them then.",
    disableConfirm: "Disable the endpoint",
    disabledNotice: "The endpoint is disabled.",
    deleteSection: "Delete this endpoint",
    deleteExplain: "Its queued messages are no longer sent, and its delivery log goes with it. This cannot be undone.",
    deleteLink: "Delete…",
    deleteTitle: "Delete this endpoint?",
    deleteConfirm: "Delete the endpoint",
    deleted: "The endpoint was deleted.",
    notFound: "There is no such endpoint in this tenant.",
    cancel: "Cancel",
  },
  fr: {
    title: "Webhooks",
    intro:
      "Keyway informe vos applications de ce qui se passe ici : connexions, personnes créées ou supprimées, applications modifiées. Chaque point de terminaison reçoit les événements qu’il demande, signés avec son propre secret.",
    listLabel: "Points de terminaison",
    none: "Aucun point de terminaison pour l’instant.",
    add: "Ajouter un point de terminaison",
    delivering: "Livraisons actives",
    disabled: "Désactivé",
    failing: "{n} tentatives échouées d’affilée",
    allEvents: "tous les événements",
    eventsCount: "{n} types d’événements",
    url: "URL",
    urlHint:
      "Où Keyway envoie chaque événement (un POST) : https ; http seulement vers une adresse de bouclage hors production.",
    description: "Description",
    descriptionHint: "Pour vous : ce qui reçoit ces événements.",
    events: "Événements",
    eventsHint: "Les événements que reçoit ce point de terminaison.",
    everyEvent: "Tous les événements, actuels et futurs (*)",
    submitAdd: "Ajouter le point de terminaison",
    refused: "Rien n’a été enregistré. L’API d’administration a refusé ceci :",
    addedTitle: "Point de terminaison ajouté",
    added: "Le point de terminaison est ajouté. Les événements l’atteignent d’ici quelques secondes.",
    secret: "Secret de signature",
    secretWarning:
      "Copiez le secret maintenant dans la configuration du récepteur : il n’est affiché que cette fois. Le récepteur vérifie avec lui la webhook-signature de chaque livraison (Standard Webhooks).",
    openEndpoint: "Aller au point de terminaison",
    backToList: "Retour aux webhooks",
    about: "À propos de ce point de terminaison",
    status: "État",
    disabledBecause: "Désactivé : {reason}",
    failures: "Tentatives échouées d’affilée",
    failingSince: "En échec depuis",
    rotationEnds: "L’ancien secret signe aussi jusqu’au",
    created: "Ajouté le",
    test: "Envoyer un événement de test",
    testExplain:
      "Un événement webhook.test est mis en file pour ce seul point de terminaison ; il apparaît dans le journal des livraisons en quelques secondes.",
    testQueued: "Un événement de test a été mis en file.",
    log: "Journal des livraisons",
    logExplain: "Les dernières tentatives, les plus récentes d’abord.",
    noAttempts: "Aucune tentative pour l’instant.",
    time: "Heure",
    event: "Événement",
    message: "Message",
    answer: "Réponse",
    latency: "Durée",
    error: "Erreur",
    nextTry: "Prochain essai",
    noAnswer: "pas de réponse",
    ms: "{n} ms",
    messages: "Messages",
    messagesExplain:
      "Les événements mis en file pour ce point de terminaison. Un message en échec est réessayé pendant un jour, puis gardé 14 jours comme échoué, pour être rejoué.",
    show: "Afficher",
    status_failed: "Échoués",
    status_pending: "En attente",
    status_delivered: "Livrés",
    status_all: "Tous",
    apply: "Afficher",
    noMessages: "Aucun message.",
    attempts: "Tentatives",
    lastAnswer: "Dernière réponse",
    replay: "Rejouer",
    replayOne: "Rejouer {id}",
    replayed: "Remis en file : les messages partent d’ici quelques secondes.",
    replaySince: "Tout rejouer depuis un moment donné",
    replaySinceExplain:
      "Chaque message mis en file depuis ce moment est renvoyé avec un nouveau calendrier d’essais, livré ou non. Les récepteurs dédupliquent par webhook-id.",
    since: "Depuis (UTC)",
    badTime: "Indiquez une date et une heure.",
    settings: "Réglages",
    save: "Enregistrer les modifications",
    saved: "Modifications enregistrées.",
    secretExplain:
      "Créez un nouveau secret si l’actuel a fuité, ou pour le renouveler. L’ancien peut continuer à signer à côté du nouveau pendant un temps, pour que le récepteur change sans perdre de livraison.",
    rotate: "Créer un nouveau secret",
    rotateTitle: "Créer un nouveau secret de signature ?",
    rotateWarning: "Les livraisons sont signées avec le nouveau secret dès maintenant.",
    overlap: "L’ancien secret signe aussi pendant",
    overlap_0: "aucune durée : il s’arrête aussitôt",
    overlap_3600: "une heure",
    overlap_86400: "un jour",
    overlap_604800: "une semaine",
    rotatedTitle: "Nouveau secret de signature",
    rotated: "Un nouveau secret a été créé.",
    stop: "Arrêter les livraisons",
    enableExplain:
      "Les livraisons sont arrêtées. Activez le point de terminaison pour livrer à nouveau, puis rejouez ce qu’il a manqué.",
    enable: "Activer",
    enabledNotice: "Le point de terminaison est activé.",
    disableExplain: "Désactivez le point de terminaison pour arrêter les livraisons sans perdre ses réglages.",
    disable: "Désactiver…",
    disableTitle: "Désactiver ce point de terminaison ?",
    disableWarning:
      "Les événements ne lui sont plus livrés : les messages en file échouent sans requête. Le réactiver ne les envoie pas : rejouez-les alors.",
    disableConfirm: "Désactiver le point de terminaison",
    disabledNotice: "Le point de terminaison est désactivé.",
    deleteSection: "Supprimer ce point de terminaison",
    deleteExplain:
      "Ses messages en file ne sont plus envoyés, et son journal des livraisons disparaît avec lui. C’est irréversible.",
    deleteLink: "Supprimer…",
    deleteTitle: "Supprimer ce point de terminaison ?",
    deleteConfirm: "Supprimer le point de terminaison",
    deleted: "Le point de terminaison a été supprimé.",
    notFound: "Il n’y a pas de tel point de terminaison dans ce locataire.",
    cancel: "Annuler",
  },
  ar: {
    title: "خطافات الويب",
    intro:
      "يُعلم Keyway تطبيقاتك بما يحدث هنا: عمليات تسجيل الدخول، وإنشاء الأشخاص أو حذفهم، وتغيير التطبيقات. تتلقى كل نقطة نهاية الأحداث التي تطلبها، موقّعة بسرّها الخاص.",
    listLabel: "نقاط النهاية",
    none: "لا توجد نقطة نهاية بعد.",
    add: "إضافة نقطة نهاية",
    delivering: "التسليم جارٍ",
    disabled: "معطّلة",
    failing: "{n} من المحاولات الفاشلة المتتالية",
    allEvents: "كل الأحداث",
    eventsCount: "{n} من أنواع الأحداث",
    url: "العنوان",
    urlHint: "حيث يرسل Keyway كل حدث (طلب POST): https؛ وhttp فقط إلى عنوان استرجاع خارج بيئة الإنتاج.",
    description: "الوصف",
    descriptionHint: "لك: ما الذي يتلقى هذه الأحداث.",
    events: "الأحداث",
    eventsHint: "الأحداث التي تتلقاها نقطة النهاية هذه.",
    everyEvent: "كل الأحداث، الحالية والمستقبلية (*)",
    submitAdd: "إضافة نقطة النهاية",
    refused: "لم يُحفظ شيء. رفضت واجهة الإدارة البرمجية ما يلي:",
    addedTitle: "أُضيفت نقطة النهاية",
    added: "أُضيفت نقطة النهاية. تصلها الأحداث خلال ثوانٍ من الآن.",
    secret: "سرّ التوقيع",
    secretWarning:
      "انسخ السرّ الآن إلى إعدادات المستقبِل: لن يُعرض إلا هذه المرة. يتحقق به المستقبِل من webhook-signature لكل تسليم (Standard Webhooks).",
    openEndpoint: "الانتقال إلى نقطة النهاية",
    backToList: "العودة إلى خطافات الويب",
    about: "عن نقطة النهاية هذه",
    status: "الحالة",
    disabledBecause: "معطّلة: {reason}",
    failures: "المحاولات الفاشلة المتتالية",
    failingSince: "تفشل منذ",
    rotationEnds: "يوقّع السرّ السابق أيضًا حتى",
    created: "تاريخ الإضافة",
    test: "إرسال حدث تجريبي",
    testExplain: "يُضاف حدث webhook.test إلى الطابور لنقطة النهاية هذه وحدها؛ ويظهر في سجل التسليم خلال ثوانٍ.",
    testQueued: "أُضيف حدث تجريبي إلى الطابور.",
    log: "سجل التسليم",
    logExplain: "أحدث المحاولات، الأحدث أولًا.",
    noAttempts: "لا توجد محاولة بعد.",
    time: "الوقت",
    event: "الحدث",
    message: "الرسالة",
    answer: "الرد",
    latency: "المدة",
    error: "الخطأ",
    nextTry: "المحاولة التالية",
    noAnswer: "لا رد",
    ms: "{n} ملّي ثانية",
    messages: "الرسائل",
    messagesExplain:
      "الأحداث المضافة إلى طابور نقطة النهاية هذه. تُعاد محاولة الرسالة الفاشلة طوال يوم، ثم تُحفظ 14 يومًا على أنها فاشلة لإعادة إرسالها.",
    show: "عرض",
    status_failed: "الفاشلة",
    status_pending: "المنتظرة",
    status_delivered: "المُسلَّمة",
    status_all: "الكل",
    apply: "عرض",
    noMessages: "لا توجد رسائل.",
    attempts: "المحاولات",
    lastAnswer: "آخر رد",
    replay: "إعادة الإرسال",
    replayOne: "إعادة إرسال {id}",
    replayed: "أُعيدت إلى الطابور: تُرسل الرسائل خلال ثوانٍ.",
    replaySince: "إعادة إرسال كل شيء منذ وقت معيّن",
    replaySinceExplain:
      "تُرسل مجددًا كل رسالة أُضيفت إلى الطابور منذ ذلك الوقت بجدول محاولات جديد، سواء سُلّمت أم لا. يزيل المستقبِلون التكرار بحسب webhook-id.",
    since: "منذ (بالتوقيت العالمي)",
    badTime: "أدخل تاريخًا ووقتًا.",
    settings: "الإعدادات",
    save: "حفظ التغييرات",
    saved: "تم حفظ التغييرات.",
    secretExplain:
      "أنشئ سرًّا جديدًا إن تسرّب السرّ الحالي، أو لتجديده. يمكن أن يستمر السرّ القديم في التوقيع إلى جانب الجديد لبعض الوقت، فينتقل المستقبِل دون أن يفقد أي تسليم.",
    rotate: "إنشاء سرّ جديد",
    rotateTitle: "إنشاء سرّ توقيع جديد؟",
    rotateWarning: "تُوقَّع عمليات التسليم بالسرّ الجديد من الآن.",
    overlap: "يوقّع السرّ القديم أيضًا لمدة",
    overlap_0: "لا شيء: يتوقف فورًا",
    overlap_3600: "ساعة",
    overlap_86400: "يوم",
    overlap_604800: "أسبوع",
    rotatedTitle: "سرّ توقيع جديد",
    rotated: "أُنشئ سرّ جديد.",
    stop: "إيقاف التسليم",
    enableExplain: "التسليم متوقف. فعّل نقطة النهاية لتستأنف التسليم، ثم أعد إرسال ما فاتها.",
    enable: "تفعيل",
    enabledNotice: "تم تفعيل نقطة النهاية.",
    disableExplain: "عطّل نقطة النهاية لإيقاف التسليم دون فقدان إعداداتها.",
    disable: "تعطيل…",
    disableTitle: "تعطيل نقطة النهاية هذه؟",
    disableWarning:
      "لن تُسلَّم إليها الأحداث بعد الآن: تفشل الرسائل المنتظرة دون أي طلب. إعادة تفعيلها لا ترسلها: أعد إرسالها حينئذٍ.",
    disableConfirm: "تعطيل نقطة النهاية",
    disabledNotice: "تم تعطيل نقطة النهاية.",
    deleteSection: "حذف نقطة النهاية هذه",
    deleteExplain: "لن تُرسل رسائلها المنتظرة بعد الآن، ويُحذف سجل التسليم معها. لا يمكن التراجع عن ذلك.",
    deleteLink: "حذف…",
    deleteTitle: "حذف نقطة النهاية هذه؟",
    deleteConfirm: "حذف نقطة النهاية",
    deleted: "تم حذف نقطة النهاية.",
    notFound: "لا توجد نقطة نهاية كهذه في هذا المستأجر.",
    cancel: "إلغاء",
  },
});
type Key = keyof (typeof words)["en"];

interface Endpoint {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  disabled_reason: string | null;
  consecutive_failures: number;
  failing_since: string | null;
  secret_rotation_ends: string | null;
  created_at: string;
  updated_at: string;
}
interface Attempt {
  message_id: string;
  type: string;
  at: string;
  status: number;
  latency_ms: number;
  error: string | null;
  next_at: string | null;
}
interface Message {
  id: string;
  type: string;
  status: "pending" | "delivered" | "failed";
  attempts: number;
  created_at: string;
  next_at: string | null;
  last_status: number | null;
  last_error: string | null;
}

const FIELDS = ["url", "events", "description"] as const;
const STATUSES = ["failed", "pending", "delivered", "all"] as const;
type StatusFilter = (typeof STATUSES)[number];
const OVERLAPS = [86_400, 3_600, 604_800, 0] as const;

interface HookForm {
  url: string;
  description: string;
  events: string[];
}
const EMPTY_FORM: HookForm = { url: "", description: "", events: [] };

const hooksPath = (tenant: string) => `${tenantBase(tenant)}/webhooks`;
const hookPath = (tenant: string, id: string) => `${hooksPath(tenant)}/${encodeURIComponent(id)}`;
const apiPath = (tenant: string, id?: string, rest = "") =>
  tenantApiPath(tenant, `/webhooks${id === undefined ? "" : `/${encodeURIComponent(id)}`}${rest}`);

function noticeOf(c: Context<ConsoleEnv>, t: Translate<Key>, allowed: readonly Key[]): string | undefined {
  const key = c.req.query("notice") as Key | undefined;
  return key && allowed.includes(key) ? t(key) : undefined;
}

async function formOfPost(c: Context<ConsoleEnv>): Promise<HookForm> {
  const p = await posted(c);
  return { url: p.text("url"), description: p.text("description"), events: p.all("events") };
}

const when = (locale: Parameters<typeof formatTime>[0], iso: string | null) =>
  iso ? formatTime(locale, Date.parse(iso)) : "";

/** `datetime-local`'s value for a time, in UTC (the field says so). */
const localValue = (ms: number) => new Date(ms).toISOString().slice(0, 16);

// ---- The list, and adding an endpoint

function HookFields(props: { t: Translate<Key>; f: HookForm; problems: Problem[] }) {
  const { t, f, problems } = props;
  const eventsInvalid = problems.some((p) => p.field === "events");
  return (
    <>
      <Field
        name="url"
        label={t("url")}
        hint={t("urlHint")}
        value={f.url}
        problems={problems}
        type="url"
        ltr
        required
      />
      <Field
        name="description"
        label={t("description")}
        hint={t("descriptionHint")}
        value={f.description}
        problems={problems}
      />
      <fieldset aria-describedby={eventsInvalid ? "events-hint problem-events" : "events-hint"}>
        <legend>{t("events")}</legend>
        <p class="hint" id="events-hint">
          {t("eventsHint")}
        </p>
        <label class="check">
          <input type="checkbox" name="events" value="*" checked={f.events.includes("*")} />
          {t("everyEvent")}
        </label>
        <div class="columns">
          {WEBHOOK_EVENT_TYPES.map((type) => (
            <label class="check">
              <input type="checkbox" name="events" value={type} checked={f.events.includes(type)} />
              <code>{type}</code>
            </label>
          ))}
        </div>
        <FieldProblems problems={problems} field="events" />
      </fieldset>
    </>
  );
}

function StatusBadge(props: { t: Translate<Key>; hook: Endpoint }) {
  const { t, hook } = props;
  if (!hook.enabled) return <span class="badge bad">{t("disabled")}</span>;
  if (hook.consecutive_failures > 0)
    return <span class="badge bad">{t("failing", { n: hook.consecutive_failures })}</span>;
  return <span class="badge ok">{t("delivering")}</span>;
}

async function listPage(
  c: Context<ConsoleEnv>,
  o: { f?: HookForm; problems?: Problem[]; status?: number } = {},
): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const tenant = c.get("tenant");
  const res = await adminCall<{ webhooks: Endpoint[] }>(c, "GET", `${apiPath(tenant.id)}?limit=1000`);
  const hooks = res.ok ? res.data.webhooks : [];
  const problems = o.problems ?? [];
  return renderPage(c, {
    title: t("title"),
    section: "webhooks",
    status: o.status ?? 200,
    notice: noticeOf(c, t, ["deleted"]),
    error: res.ok ? undefined : res.error,
    children: (
      <>
        <FormStyle c={c} />
        <p>{t("intro")}</p>
        {hooks.length ? (
          <ul class="plain hooks" aria-label={t("listLabel")}>
            {hooks.map((h) => (
              <li>
                <a href={hookPath(tenant.id, h.id)}>
                  <bdi>{h.description || h.url}</bdi>
                </a>{" "}
                <StatusBadge t={t} hook={h} />
                <br />
                <code dir="ltr">{h.url}</code>
                <br />
                <span class="muted">
                  {h.events.includes("*") ? t("allEvents") : t("eventsCount", { n: h.events.length })}
                </span>
              </li>
            ))}
          </ul>
        ) : (
          <p>{t("none")}</p>
        )}
        <section aria-labelledby="add">
          <h2 id="add">{t("add")}</h2>
          <form method="post" action={hooksPath(tenant.id)} novalidate>
            <CsrfField c={c} />
            <ProblemSummary problems={problems} heading={t("refused")} />
            <HookFields t={t} f={o.f ?? EMPTY_FORM} problems={problems} />
            <div class="actions">
              <button type="submit" class="primary">
                {t("submitAdd")}
              </button>
            </div>
          </form>
        </section>
      </>
    ),
  });
}

/** A signing secret, shown this once in the POST's own answer (no-store, never in a URL). */
function SecretShown(props: { t: Translate<Key>; secret: string }) {
  return (
    <section aria-labelledby="secret-heading" class="secret-box">
      <h2 id="secret-heading">{props.t("secret")}</h2>
      <p>
        <code class="secret" id="signing-secret">
          {props.secret}
        </code>
      </p>
      <p>{props.t("secretWarning")}</p>
    </section>
  );
}

async function add(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const tenant = c.get("tenant");
  const f = await formOfPost(c);
  const res = await adminCall<Endpoint & { secret: string }>(c, "POST", apiPath(tenant.id), {
    url: f.url,
    events: f.events,
    ...(f.description ? { description: f.description } : {}),
  });
  if (!res.ok) return listPage(c, { f, problems: problemsOf(res.error, FIELDS), status: res.status });
  return renderPage(c, {
    title: t("addedTitle"),
    section: "webhooks",
    notice: t("added"),
    children: (
      <>
        <FormStyle c={c} />
        <SecretShown t={t} secret={res.data.secret} />
        <p>
          <a href={hookPath(tenant.id, res.data.id)}>{t("openEndpoint")}</a>
        </p>
      </>
    ),
  });
}

// ---- An endpoint's page

async function loadHook(c: Context<ConsoleEnv>): Promise<{ hook: Endpoint } | { response: Response }> {
  const t = translate(words, c.get("locale"));
  const tenant = c.get("tenant");
  const res = await adminCall<Endpoint>(c, "GET", apiPath(tenant.id, c.req.param("id") ?? ""));
  if (res.ok) return { hook: res.data };
  return {
    response: renderPage(c, {
      title: t("title"),
      section: "webhooks",
      status: res.status,
      error: res.status === 404 ? t("notFound") : res.error,
      children: (
        <p>
          <a href={hooksPath(tenant.id)}>{t("backToList")}</a>
        </p>
      ),
    }),
  };
}

const statusFilterOf = (c: Context<ConsoleEnv>, raw?: string): StatusFilter => {
  const s = raw ?? c.req.query("status");
  return (STATUSES as readonly string[]).includes(s ?? "") ? (s as StatusFilter) : "failed";
};

async function hookPage(
  c: Context<ConsoleEnv>,
  hook: Endpoint,
  o: { f?: HookForm; problems?: Problem[]; status?: number; error?: string; since?: string; sinceError?: string } = {},
): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const locale = c.get("locale");
  const tenant = c.get("tenant");
  const path = hookPath(tenant.id, hook.id);
  const filter = statusFilterOf(c);
  const [attempts, messages] = await Promise.all([
    adminCall<{ attempts: Attempt[] }>(c, "GET", `${apiPath(tenant.id, hook.id, "/attempts")}?limit=50`),
    adminCall<{ messages: Message[] }>(
      c,
      "GET",
      `${apiPath(tenant.id, hook.id, "/messages")}?limit=50${filter === "all" ? "" : `&status=${filter}`}`,
    ),
  ]);
  const problems = o.problems ?? [];
  const f = o.f ?? { url: hook.url, description: hook.description ?? "", events: hook.events };
  const sinceProblems: Problem[] = o.sinceError ? [{ field: "since", message: o.sinceError }] : [];
  return renderPage(c, {
    title: hook.description || hook.url,
    section: "webhooks",
    status: o.status ?? 200,
    notice: noticeOf(c, t, ["saved", "testQueued", "replayed", "enabledNotice", "disabledNotice"]),
    error: o.error ?? (attempts.ok ? undefined : attempts.error) ?? (messages.ok ? undefined : messages.error),
    children: (
      <>
        <FormStyle c={c} />
        <p>
          <a href={hooksPath(tenant.id)}>{t("backToList")}</a>
        </p>
        <section aria-labelledby="about">
          <h2 id="about">{t("about")}</h2>
          <dl class="facts">
            <dt>{t("url")}</dt>
            <dd>
              <code dir="ltr">{hook.url}</code>
            </dd>
            <dt>{t("status")}</dt>
            <dd>
              <StatusBadge t={t} hook={hook} />
              {hook.disabled_reason ? <> {t("disabledBecause", { reason: hook.disabled_reason })}</> : null}
            </dd>
            {hook.failing_since ? (
              <>
                <dt>{t("failingSince")}</dt>
                <dd>{when(locale, hook.failing_since)}</dd>
              </>
            ) : null}
            <dt>{t("events")}</dt>
            <dd>{hook.events.includes("*") ? t("allEvents") : hook.events.map((e) => <code>{e} </code>)}</dd>
            {hook.secret_rotation_ends ? (
              <>
                <dt>{t("rotationEnds")}</dt>
                <dd>{when(locale, hook.secret_rotation_ends)}</dd>
              </>
            ) : null}
            <dt>{t("created")}</dt>
            <dd>{when(locale, hook.created_at)}</dd>
          </dl>
          <form method="post" action={`${path}/test`} class="actions">
            <CsrfField c={c} />
            <button type="submit" class="primary" aria-describedby="test-explain">
              {t("test")}
            </button>
            <span class="hint" id="test-explain">
              {t("testExplain")}
            </span>
          </form>
        </section>

        <section aria-labelledby="log">
          <h2 id="log">{t("log")}</h2>
          <p class="hint">{t("logExplain")}</p>
          {attempts.ok && attempts.data.attempts.length ? (
            <section class="scroll" aria-labelledby="log" tabindex={0}>
              <table class="attempts">
                <thead>
                  <tr>
                    <th scope="col">{t("time")}</th>
                    <th scope="col">{t("event")}</th>
                    <th scope="col">{t("answer")}</th>
                    <th scope="col">{t("latency")}</th>
                    <th scope="col">{t("error")}</th>
                    <th scope="col">{t("nextTry")}</th>
                    <th scope="col">{t("message")}</th>
                  </tr>
                </thead>
                <tbody>
                  {attempts.data.attempts.map((a) => (
                    <tr>
                      <td>{when(locale, a.at)}</td>
                      <td>
                        <code class="event">{a.type}</code>
                      </td>
                      <td>
                        <span class={`badge ${a.status >= 200 && a.status < 300 ? "ok" : "bad"}`}>
                          {a.status === 0 ? t("noAnswer") : a.status}
                        </span>
                      </td>
                      <td>{t("ms", { n: formatNumber(locale, a.latency_ms) })}</td>
                      <td dir="ltr">{a.error ?? ""}</td>
                      <td>{when(locale, a.next_at)}</td>
                      <td>
                        <code class="id">{a.message_id}</code>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </section>
          ) : (
            <p>{t("noAttempts")}</p>
          )}
        </section>

        <section aria-labelledby="messages">
          <h2 id="messages">{t("messages")}</h2>
          <p class="hint">{t("messagesExplain")}</p>
          <form method="get" action={`${path}#messages`} class="actions">
            <label for="status-filter">{t("show")}</label>
            <select id="status-filter" name="status">
              {STATUSES.map((s) => (
                <option value={s} selected={s === filter}>
                  {t(`status_${s}`)}
                </option>
              ))}
            </select>
            <button type="submit">{t("apply")}</button>
          </form>
          {messages.ok && messages.data.messages.length ? (
            <section class="scroll" aria-labelledby="messages" tabindex={0}>
              <table class="messages">
                <thead>
                  <tr>
                    <th scope="col">{t("time")}</th>
                    <th scope="col">{t("event")}</th>
                    <th scope="col">{t("status")}</th>
                    <th scope="col">{t("attempts")}</th>
                    <th scope="col">{t("lastAnswer")}</th>
                    <th scope="col">{t("message")}</th>
                    <th scope="col">{t("replay")}</th>
                  </tr>
                </thead>
                <tbody>
                  {messages.data.messages.map((m) => (
                    <tr>
                      <td>{when(locale, m.created_at)}</td>
                      <td>
                        <code class="event">{m.type}</code>
                      </td>
                      <td>{t(`status_${m.status}`)}</td>
                      <td>{formatNumber(locale, m.attempts)}</td>
                      <td dir="ltr">
                        {m.last_status === null ? "" : m.last_status === 0 ? t("noAnswer") : m.last_status}
                        {m.last_error ? ` ${m.last_error}` : ""}
                      </td>
                      <td>
                        <code class="id">{m.id}</code>
                      </td>
                      <td>
                        {m.status === "pending" ? null : (
                          <form method="post" action={`${path}/replay`}>
                            <CsrfField c={c} />
                            <input type="hidden" name="message_id" value={m.id} />
                            <input type="hidden" name="status" value={filter} />
                            <button type="submit" aria-label={t("replayOne", { id: m.id })}>
                              {t("replay")}
                            </button>
                          </form>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </section>
          ) : (
            <p>{t("noMessages")}</p>
          )}
          <h3 id="replay-since">{t("replaySince")}</h3>
          <form method="post" action={`${path}/replay`} aria-labelledby="replay-since" novalidate>
            <CsrfField c={c} />
            <input type="hidden" name="status" value={filter} />
            <p class="hint">{t("replaySinceExplain")}</p>
            <Field
              name="since"
              label={t("since")}
              type="datetime-local"
              value={o.since ?? localValue(Date.now() - 86_400_000)}
              problems={sinceProblems}
              required
            />
            <div class="actions">
              <button type="submit">{t("replay")}</button>
            </div>
          </form>
        </section>

        <section aria-labelledby="settings">
          <h2 id="settings">{t("settings")}</h2>
          <form method="post" action={path} novalidate>
            <CsrfField c={c} />
            <ProblemSummary problems={problems} heading={t("refused")} />
            <HookFields t={t} f={f} problems={problems} />
            <div class="actions">
              <button type="submit" class="primary">
                {t("save")}
              </button>
            </div>
          </form>
        </section>

        <section aria-labelledby="secret">
          <h2 id="secret">{t("secret")}</h2>
          <p>{t("secretExplain")}</p>
          <p>
            <a href={`${path}/rotate-secret`}>{t("rotate")}…</a>
          </p>
        </section>

        <section aria-labelledby="stop" class="danger">
          <h2 id="stop">{t("stop")}</h2>
          {hook.enabled ? (
            <>
              <p>{t("disableExplain")}</p>
              <p>
                <a href={`${path}/disable`}>{t("disable")}</a>
              </p>
            </>
          ) : (
            <form method="post" action={`${path}/enable`}>
              <CsrfField c={c} />
              <p>{t("enableExplain")}</p>
              <button type="submit" class="primary">
                {t("enable")}
              </button>
            </form>
          )}
          <h3>{t("deleteSection")}</h3>
          <p>{t("deleteExplain")}</p>
          <p>
            <a href={`${path}/delete`}>{t("deleteLink")}</a>
          </p>
        </section>
      </>
    ),
  });
}

async function showHook(c: Context<ConsoleEnv>): Promise<Response> {
  const loaded = await loadHook(c);
  return "response" in loaded ? loaded.response : hookPage(c, loaded.hook);
}

async function saveHook(c: Context<ConsoleEnv>): Promise<Response> {
  const loaded = await loadHook(c);
  if ("response" in loaded) return loaded.response;
  const tenant = c.get("tenant");
  const f = await formOfPost(c);
  const res = await adminCall(c, "PATCH", apiPath(tenant.id, loaded.hook.id), {
    url: f.url,
    events: f.events,
    description: f.description || null,
  });
  if (!res.ok) return hookPage(c, loaded.hook, { f, problems: problemsOf(res.error, FIELDS), status: res.status });
  return seeOther(hookPath(tenant.id, loaded.hook.id), "saved");
}

/** An action with nothing to type: it is done, and the endpoint's page says so (or what went wrong). */
function simpleAction(
  notice: Key,
  call: (
    c: Context<ConsoleEnv>,
    hook: Endpoint,
  ) => { method: "POST" | "PATCH" | "DELETE"; rest: string; body?: unknown },
) {
  return async (c: Context<ConsoleEnv>): Promise<Response> => {
    const loaded = await loadHook(c);
    if ("response" in loaded) return loaded.response;
    const tenant = c.get("tenant");
    const { method, rest, body } = call(c, loaded.hook);
    const res = await adminCall(c, method, apiPath(tenant.id, loaded.hook.id, rest), body);
    if (!res.ok) return hookPage(c, loaded.hook, { status: res.status, error: res.error });
    return seeOther(hookPath(tenant.id, loaded.hook.id), notice);
  };
}

async function replay(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const loaded = await loadHook(c);
  if ("response" in loaded) return loaded.response;
  const tenant = c.get("tenant");
  const p = await posted(c);
  const filter = statusFilterOf(c, p.text("status"));
  let body: { message_id: string } | { since: string };
  if (p.has("message_id")) body = { message_id: p.text("message_id") };
  else {
    const raw = p.text("since");
    const ms = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(raw) ? Date.parse(`${raw}Z`) : Number.NaN;
    if (!Number.isFinite(ms)) return hookPage(c, loaded.hook, { status: 400, since: raw, sinceError: t("badTime") });
    body = { since: new Date(ms).toISOString() };
  }
  const res = await adminCall(c, "POST", apiPath(tenant.id, loaded.hook.id, "/replay"), body);
  if (!res.ok) return hookPage(c, loaded.hook, { status: res.status, error: res.error });
  return seeOther(`${hookPath(tenant.id, loaded.hook.id)}?status=${filter}`, "replayed");
}

// ---- Confirmation steps: a new secret, disabling, deleting

function confirmPage(
  c: Context<ConsoleEnv>,
  hook: Endpoint,
  o: { title: string; text: string; action: string; button: string; extra?: Child },
): Response {
  const t = translate(words, c.get("locale"));
  return renderPage(c, {
    title: o.title,
    section: "webhooks",
    children: (
      <>
        <FormStyle c={c} />
        <form method="post" action={o.action}>
          <CsrfField c={c} />
          <p>
            <code dir="ltr">{hook.url}</code>
          </p>
          <p>{o.text}</p>
          {o.extra}
          <div class="actions">
            <button type="submit" class="danger">
              {o.button}
            </button>
            <a href={hookPath(c.get("tenant").id, hook.id)}>{t("cancel")}</a>
          </div>
        </form>
      </>
    ),
  });
}

function confirmStep(kind: "rotate-secret" | "disable" | "delete") {
  return async (c: Context<ConsoleEnv>): Promise<Response> => {
    const t = translate(words, c.get("locale"));
    const loaded = await loadHook(c);
    if ("response" in loaded) return loaded.response;
    const { hook } = loaded;
    const action = `${hookPath(c.get("tenant").id, hook.id)}/${kind}`;
    if (kind === "disable")
      return confirmPage(c, hook, {
        title: t("disableTitle"),
        text: t("disableWarning"),
        action,
        button: t("disableConfirm"),
      });
    if (kind === "delete")
      return confirmPage(c, hook, {
        title: t("deleteTitle"),
        text: t("deleteExplain"),
        action,
        button: t("deleteConfirm"),
      });
    return confirmPage(c, hook, {
      title: t("rotateTitle"),
      text: t("rotateWarning"),
      action,
      button: t("rotate"),
      extra: (
        <div class="field">
          <label for="overlap">{t("overlap")}</label>
          <select id="overlap" name="overlap_seconds">
            {OVERLAPS.map((s) => (
              <option value={String(s)} selected={s === 86_400}>
                {t(`overlap_${s}`)}
              </option>
            ))}
          </select>
        </div>
      ),
    });
  };
}

async function rotate(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const loaded = await loadHook(c);
  if ("response" in loaded) return loaded.response;
  const tenant = c.get("tenant");
  const overlap = Number((await posted(c)).text("overlap_seconds") || "86400");
  const res = await adminCall<Endpoint & { secret: string }>(
    c,
    "POST",
    apiPath(tenant.id, loaded.hook.id, "/rotate-secret"),
    { overlap_seconds: overlap },
  );
  if (!res.ok) return hookPage(c, loaded.hook, { status: res.status, error: res.error });
  return renderPage(c, {
    title: t("rotatedTitle"),
    section: "webhooks",
    notice: t("rotated"),
    children: (
      <>
        <FormStyle c={c} />
        <SecretShown t={t} secret={res.data.secret} />
        {res.data.secret_rotation_ends ? (
          <p>
            {t("rotationEnds")} {when(c.get("locale"), res.data.secret_rotation_ends)}
          </p>
        ) : null}
        <p>
          <a href={hookPath(tenant.id, res.data.id)}>{t("openEndpoint")}</a>
        </p>
      </>
    ),
  });
}

async function remove(c: Context<ConsoleEnv>): Promise<Response> {
  const loaded = await loadHook(c);
  if ("response" in loaded) return loaded.response;
  const tenant = c.get("tenant");
  const res = await adminCall(c, "DELETE", apiPath(tenant.id, loaded.hook.id));
  if (!res.ok) return hookPage(c, loaded.hook, { status: res.status, error: res.error });
  return seeOther(hooksPath(tenant.id), "deleted");
}

export function registerWebhookPages(app: Hono<ConsoleEnv>): void {
  app.get("/t/:tenant/webhooks", (c) => listPage(c));
  app.post("/t/:tenant/webhooks", add);
  app.get("/t/:tenant/webhooks/:id", showHook);
  app.post("/t/:tenant/webhooks/:id", saveHook);
  app.post(
    "/t/:tenant/webhooks/:id/test",
    simpleAction("testQueued", () => ({ method: "POST", rest: "/test" })),
  );
  app.post("/t/:tenant/webhooks/:id/replay", replay);
  app.post(
    "/t/:tenant/webhooks/:id/enable",
    simpleAction("enabledNotice", () => ({ method: "PATCH", rest: "", body: { enabled: true } })),
  );
  app.get("/t/:tenant/webhooks/:id/disable", confirmStep("disable"));
  app.post(
    "/t/:tenant/webhooks/:id/disable",
    simpleAction("disabledNotice", () => ({ method: "PATCH", rest: "", body: { enabled: false } })),
  );
  app.get("/t/:tenant/webhooks/:id/rotate-secret", confirmStep("rotate-secret"));
  app.post("/t/:tenant/webhooks/:id/rotate-secret", rotate);
  app.get("/t/:tenant/webhooks/:id/delete", confirmStep("delete"));
  app.post("/t/:tenant/webhooks/:id/delete", remove);
}
