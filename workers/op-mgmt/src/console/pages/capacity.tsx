import type { Context, Hono, Next } from "hono";
import type { Child } from "hono/jsx";
import type { Locale } from "../../../../shared/branding/i18n";
import { MAX_SHARDS } from "../../../../shared/config/shard-plan";
import { LIVE_STORES } from "../../../../shared/config/shards";
import type { ConsoleEnv } from "../env";
import { catalogue, formatNumber, formatTime, type Translate, translate } from "../i18n";
import { CsrfField, renderMessagePage, renderPage } from "../layout";
import { adminCall, seeOther } from "../operator";
import { PageStyle } from "./forms";

/**
 * `/console/capacity` (issue 43), a deployment operator's only: each store's shards and generations
 * (`GET /admin/v1/shards`), the planner's recommendation from the rates the stores take now
 * (`POST /admin/v1/shards/plan` with `measured`), a live change of a store's shard count after a
 * confirmation step (`POST /admin/v1/shards`), and the bill per million logins from the counters
 * (`POST /admin/v1/stats/bill`, priced as docs/cost.md says). Charts are SVG drawn here, each with a
 * table of the same figures.
 */

const words = catalogue({
  en: {
    title: "Capacity",
    lead: "The Durable Object stores every login goes through, how many shards each has, and what a login costs.",
    shards: "Shards",
    shardsLead:
      "Each store's shard count now (the generation new ids go to). A change appends a generation: ids already issued keep their shards.",
    shardsChart: "Shards per store, current generation",
    store: "Store",
    generation: "Generation",
    count: "Shards",
    liveGenerations: "Live generations (shards each)",
    pending: "Pending",
    issuedFrom: "new ids from {time}",
    change: "Change…",
    changeStore: "Change {store}",
    planner: "Planner",
    plannerLead:
      "Measures the calls a second each store takes now, in each region, and proposes shard counts: what was measured is taken as the typical load, the peak as a multiple of it. At most 300 calls a second a shard at peak; at least 3 a second to keep a shard warm.",
    window: "Measure for (seconds)",
    peakFactor: "Peak, as a multiple of what is measured",
    measure: "Measure and plan",
    planResult: "Recommendation from {seconds} s measured, peak × {factor}",
    region: "Region {region}",
    measured: "Calls/s measured",
    recommended: "Recommended",
    current: "Now",
    reasoning: "Reasoning",
    apply: "Change to {n}…",
    regionNote:
      "A change applies to the deployment's default counts, those of every region without its own (docs/sharding.md).",
    bill: "Bill per million logins",
    billLead:
      "Reads the billing counters twice, the given seconds apart, and divides what they grew by the sign-ins in between (counted from the audit trail about 8 seconds later). Priced with docs/cost.md's table; Workers CPU and mail are not in it. Idle deployments have nothing to divide by: sign in while it measures.",
    billWindow: "Measure for (seconds)",
    measureBill: "Measure the bill",
    billResult: "Sign-ins in the {seconds} s measured: {logins}. The bill: {usd} per million logins.",
    unit_requests: "requests",
    unit_rows: "rows",
    "unit_GB-month": "GB-months",
    noLogins: "No sign-in in the {seconds} s measured: nothing to divide by. Measure again while people sign in.",
    costChart: "Cost per million logins, by line (USD)",
    callsChart: "Durable Object calls per login, by store",
    rowsChart: "Durable Object rows written per login, by store",
    line: "Line",
    perLogin: "Per login",
    usd: "USD per million logins",
    total: "Total",
    calls: "Calls",
    rows: "Rows written",
    notPriced: "Not priced: {what}.",
    line_worker_requests: "Workers requests",
    line_durable_object_requests: "Durable Object requests",
    line_durable_object_rows_written: "Durable Object rows written",
    line_durable_object_later_deletes: "Durable Object rows deleted later",
    line_durable_object_rows_read: "Durable Object rows read",
    line_d1_rows_written: "D1 rows written",
    line_d1_rows_read: "D1 rows read",
    line_durable_object_storage_bytes: "Durable Object storage, a month",
    line_d1_storage_bytes: "D1 storage, a month",
    changeTitle: "Change a store's shard count",
    changeLead:
      "The new count is appended as a generation: every Worker routes to it within {cache} s, and new ids go to it about a minute after that. Ids already issued keep their shards until they expire; a generation cannot be removed, and one change may be pending at a time per store.",
    newCount: "New shard count (1 to {max})",
    review: "Review the change",
    confirmTitle: "Change {store} from {from} to {to} shards?",
    confirmLead:
      "Generation {gen} of {store} will have {to} shards. Every Worker routes to it within {cache} s and new ids go to it from about a minute later. This cannot be undone: a later change appends another generation.",
    confirm: "Append the generation",
    newValue: "New",
    cancel: "Cancel",
    same: "{store} has {n} shards already: nothing to change.",
    badCount: "The shard count must be a whole number from 1 to {max}.",
    notice_changed: "The generation is appended; new ids go to it once every Worker routes to it.",
    failed: "The change was refused: {error}",
    measureFailed: "The measure failed: {error}",
  },
  fr: {
    title: "Capacité",
    lead: "Les stockages Durable Object par lesquels passe chaque connexion, leur nombre de fragments, et ce que coûte une connexion.",
    shards: "Fragments",
    shardsLead:
      "Le nombre de fragments actuel de chaque stockage (la génération où vont les nouveaux identifiants). Un changement ajoute une génération : les identifiants déjà émis gardent leurs fragments.",
    shardsChart: "Fragments par stockage, génération actuelle",
    store: "Stockage",
    generation: "Génération",
    count: "Fragments",
    liveGenerations: "Générations actives (fragments de chacune)",
    pending: "En attente",
    issuedFrom: "nouveaux identifiants à partir du {time}",
    change: "Modifier…",
    changeStore: "Modifier {store}",
    planner: "Planificateur",
    plannerLead:
      "Mesure les appels par seconde que chaque stockage reçoit maintenant, dans chaque région, et propose des nombres de fragments : la mesure est prise comme la charge habituelle, la pointe comme un multiple de celle-ci. Au plus 300 appels par seconde et par fragment en pointe ; au moins 3 par seconde pour garder un fragment chaud.",
    window: "Mesurer pendant (secondes)",
    peakFactor: "Pointe, en multiple de la mesure",
    measure: "Mesurer et planifier",
    planResult: "Recommandation d’après {seconds} s de mesure, pointe × {factor}",
    region: "Région {region}",
    measured: "Appels/s mesurés",
    recommended: "Recommandé",
    current: "Actuel",
    reasoning: "Raisonnement",
    apply: "Passer à {n}…",
    regionNote:
      "Un changement s’applique aux nombres par défaut du déploiement, ceux de chaque région qui n’a pas les siens (docs/sharding.md).",
    bill: "Facture par million de connexions",
    billLead:
      "Lit deux fois les compteurs de facturation, à l’intervalle donné, et divise leur croissance par les connexions entre les deux (comptées dans le journal d’audit environ 8 secondes plus tard). Tarifé selon le tableau de docs/cost.md ; le CPU des Workers et le courrier n’y sont pas. Un déploiement inactif n’a rien à diviser : connectez-vous pendant la mesure.",
    billWindow: "Mesurer pendant (secondes)",
    measureBill: "Mesurer la facture",
    billResult: "Connexions pendant les {seconds} s mesurées : {logins}. La facture : {usd} par million de connexions.",
    unit_requests: "requêtes",
    unit_rows: "lignes",
    "unit_GB-month": "Go-mois",
    noLogins:
      "Aucune connexion pendant les {seconds} s mesurées : rien à diviser. Mesurez de nouveau pendant que des personnes se connectent.",
    costChart: "Coût par million de connexions, par poste (USD)",
    callsChart: "Appels Durable Object par connexion, par stockage",
    rowsChart: "Lignes Durable Object écrites par connexion, par stockage",
    line: "Poste",
    perLogin: "Par connexion",
    usd: "USD par million de connexions",
    total: "Total",
    calls: "Appels",
    rows: "Lignes écrites",
    notPriced: "Non tarifé : {what}.",
    line_worker_requests: "Requêtes Workers",
    line_durable_object_requests: "Requêtes Durable Object",
    line_durable_object_rows_written: "Lignes Durable Object écrites",
    line_durable_object_later_deletes: "Lignes Durable Object supprimées plus tard",
    line_durable_object_rows_read: "Lignes Durable Object lues",
    line_d1_rows_written: "Lignes D1 écrites",
    line_d1_rows_read: "Lignes D1 lues",
    line_durable_object_storage_bytes: "Stockage Durable Object, un mois",
    line_d1_storage_bytes: "Stockage D1, un mois",
    changeTitle: "Modifier le nombre de fragments d’un stockage",
    changeLead:
      "Le nouveau nombre est ajouté comme une génération : chaque Worker l’achemine sous {cache} s, et les nouveaux identifiants y vont environ une minute plus tard. Les identifiants déjà émis gardent leurs fragments jusqu’à leur expiration ; une génération ne peut pas être retirée, et un seul changement peut être en attente par stockage.",
    newCount: "Nouveau nombre de fragments (1 à {max})",
    review: "Vérifier le changement",
    confirmTitle: "Passer {store} de {from} à {to} fragments ?",
    confirmLead:
      "La génération {gen} de {store} aura {to} fragments. Chaque Worker l’achemine sous {cache} s et les nouveaux identifiants y vont environ une minute plus tard. C’est irréversible : un changement ultérieur ajoute une autre génération.",
    confirm: "Ajouter la génération",
    newValue: "Nouveau",
    cancel: "Annuler",
    same: "{store} a déjà {n} fragments : rien à changer.",
    badCount: "Le nombre de fragments doit être un entier de 1 à {max}.",
    notice_changed: "La génération est ajoutée ; les nouveaux identifiants y vont dès que chaque Worker l’achemine.",
    failed: "La modification a été refusée : {error}",
    measureFailed: "La mesure a échoué : {error}",
  },
  ar: {
    title: "السعة",
    lead: "مخازن Durable Object التي يمر بها كل تسجيل دخول، وعدد أجزاء كل منها، وكلفة تسجيل الدخول.",
    shards: "الأجزاء",
    shardsLead:
      "عدد أجزاء كل مخزن الآن (الجيل الذي تذهب إليه المعرّفات الجديدة). التغيير يضيف جيلًا: تحتفظ المعرّفات الصادرة بأجزائها.",
    shardsChart: "الأجزاء لكل مخزن، الجيل الحالي",
    store: "المخزن",
    generation: "الجيل",
    count: "الأجزاء",
    liveGenerations: "الأجيال الحية (أجزاء كل منها)",
    pending: "قيد الانتظار",
    issuedFrom: "معرّفات جديدة من {time}",
    change: "تغيير…",
    changeStore: "تغيير {store}",
    planner: "المخطِّط",
    plannerLead:
      "يقيس الطلبات في الثانية التي يتلقاها كل مخزن الآن في كل منطقة، ويقترح أعداد الأجزاء: ما يُقاس يُعدّ الحمل المعتاد، والذروة مضاعفًا له. 300 طلب في الثانية لكل جزء على الأكثر في الذروة؛ و3 على الأقل لإبقاء الجزء نشطًا.",
    window: "مدة القياس (بالثواني)",
    peakFactor: "الذروة، مضاعفًا لما يُقاس",
    measure: "القياس والتخطيط",
    planResult: "التوصية من قياس {seconds} ث، الذروة × {factor}",
    region: "المنطقة {region}",
    measured: "الطلبات/ث المقيسة",
    recommended: "الموصى به",
    current: "الآن",
    reasoning: "التعليل",
    apply: "التغيير إلى {n}…",
    regionNote:
      "يسري التغيير على الأعداد الافتراضية للنشر، أي أعداد كل منطقة ليس لها أعدادها الخاصة (docs/sharding.md).",
    bill: "الفاتورة لكل مليون تسجيل دخول",
    billLead:
      "يقرأ عدادات الفوترة مرتين بفاصل الثواني المحددة، ويقسم ما زادته على تسجيلات الدخول بينهما (تُعدّ من سجل التدقيق بعد نحو 8 ثوانٍ). التسعير من جدول docs/cost.md؛ لا يشمل معالجة Workers ولا البريد. النشر الخامل لا شيء فيه للقسمة: سجّل الدخول أثناء القياس.",
    billWindow: "مدة القياس (بالثواني)",
    measureBill: "قياس الفاتورة",
    billResult: "تسجيلات الدخول خلال {seconds} ث المقيسة: {logins}. الفاتورة: {usd} لكل مليون تسجيل دخول.",
    unit_requests: "طلب",
    unit_rows: "صف",
    "unit_GB-month": "غيغابايت-شهر",
    noLogins: "لا تسجيل دخول خلال {seconds} ث المقيسة: لا شيء للقسمة. أعد القياس أثناء تسجيل الأشخاص دخولهم.",
    costChart: "الكلفة لكل مليون تسجيل دخول، حسب البند (دولار أمريكي)",
    callsChart: "طلبات Durable Object لكل تسجيل دخول، حسب المخزن",
    rowsChart: "صفوف Durable Object المكتوبة لكل تسجيل دخول، حسب المخزن",
    line: "البند",
    perLogin: "لكل تسجيل دخول",
    usd: "دولار لكل مليون تسجيل دخول",
    total: "المجموع",
    calls: "الطلبات",
    rows: "الصفوف المكتوبة",
    notPriced: "غير مسعّر: {what}.",
    line_worker_requests: "طلبات Workers",
    line_durable_object_requests: "طلبات Durable Object",
    line_durable_object_rows_written: "صفوف Durable Object المكتوبة",
    line_durable_object_later_deletes: "صفوف Durable Object المحذوفة لاحقًا",
    line_durable_object_rows_read: "صفوف Durable Object المقروءة",
    line_d1_rows_written: "صفوف D1 المكتوبة",
    line_d1_rows_read: "صفوف D1 المقروءة",
    line_durable_object_storage_bytes: "تخزين Durable Object لشهر",
    line_d1_storage_bytes: "تخزين D1 لشهر",
    changeTitle: "تغيير عدد أجزاء مخزن",
    changeLead:
      "يُضاف العدد الجديد جيلًا: يوجّه إليه كل Worker خلال {cache} ث، وتذهب إليه المعرّفات الجديدة بعد نحو دقيقة. تحتفظ المعرّفات الصادرة بأجزائها حتى تنتهي؛ لا يمكن إزالة جيل، ولا يُسمح إلا بتغيير واحد معلّق لكل مخزن.",
    newCount: "عدد الأجزاء الجديد (من 1 إلى {max})",
    review: "مراجعة التغيير",
    confirmTitle: "تغيير {store} من {from} إلى {to} جزءًا؟",
    confirmLead:
      "سيكون للجيل {gen} من {store} عدد {to} من الأجزاء. يوجّه إليه كل Worker خلال {cache} ث وتذهب إليه المعرّفات الجديدة بعد نحو دقيقة. لا يمكن التراجع: أي تغيير لاحق يضيف جيلًا آخر.",
    confirm: "إضافة الجيل",
    newValue: "الجديد",
    cancel: "إلغاء",
    same: "لدى {store} بالفعل {n} من الأجزاء: لا شيء للتغيير.",
    badCount: "يجب أن يكون عدد الأجزاء عددًا صحيحًا من 1 إلى {max}.",
    notice_changed: "أُضيف الجيل؛ تذهب إليه المعرّفات الجديدة حين يوجّه إليه كل Worker.",
    failed: "رُفض التغيير: {error}",
    measureFailed: "فشل القياس: {error}",
  },
});
type Key = keyof (typeof words)["en"];

interface StoreShards {
  generation: number;
  shards: number;
  first_live_generation: number;
  generations: (number | null)[];
  issue_from: (string | null)[];
}
type ShardsAnswer = { stores: Record<string, StoreShards> };

interface StorePlan {
  store: string;
  shards: number;
  reasoning: string;
}
interface PlanAnswer {
  window_seconds: number;
  peak_factor: number;
  regions: Record<string, { measured: Record<string, number>; plan: StorePlan[] }>;
}

interface BillAnswer {
  window_seconds: number;
  logins: number;
  stores: Record<string, { calls: number; rows_written: number }> | null;
  lines: { line: string; quantity: number; unit: string; usd_per_million: number }[];
  usd_per_million: number | null;
  not_priced: string[];
}

/** Every capacity page is a deployment operator's: a tenant operator is refused before anything is read. */
async function deploymentOnly(c: Context<ConsoleEnv>, next: Next): Promise<Response | undefined> {
  if (c.get("operator").scope !== "all") return renderMessagePage(c, { kind: "notYours", status: 403 });
  await next();
  return undefined;
}

const number = (locale: Locale, n: number, digits = 2) =>
  new Intl.NumberFormat(locale, { maximumFractionDigits: digits }).format(n);
const dollars = (locale: Locale, n: number) =>
  new Intl.NumberFormat(locale, {
    style: "currency",
    currency: "USD",
    minimumFractionDigits: 2,
    maximumFractionDigits: n < 1 ? 4 : 2,
  }).format(n);

/**
 * Horizontal bars, drawn here as SVG (no script, no image request). Hidden from assistive technology:
 * every chart is followed by a table of the same figures.
 */
function BarChart(props: { rows: { label: string; value: number; text: string }[]; color?: string }) {
  const width = 720;
  const labelWidth = 280;
  const textWidth = 110;
  const rowHeight = 28;
  const span = width - labelWidth - textWidth;
  const max = Math.max(0, ...props.rows.map((r) => r.value)) || 1;
  const height = props.rows.length * rowHeight + 8;
  return (
    <svg
      class="chart"
      viewBox={`0 0 ${width} ${height}`}
      width={width}
      height={height}
      aria-hidden="true"
      focusable="false"
      direction="ltr"
    >
      {props.rows.map((r, i) => {
        const w = Math.max(r.value > 0 ? 2 : 0, (r.value / max) * span);
        return (
          <g transform={`translate(0 ${i * rowHeight + 4})`}>
            <text x={labelWidth - 8} y={18} text-anchor="end">
              {r.label}
            </text>
            <rect x={labelWidth} y={4} width={w.toFixed(1)} height={18} rx={3} fill={props.color ?? "#1d4ed8"} />
            <text x={(labelWidth + w + 6).toFixed(1)} y={18}>
              {r.text}
            </text>
          </g>
        );
      })}
    </svg>
  );
}

function Chart(props: { id: string; title: string; children: Child }) {
  return (
    <figure aria-labelledby={`${props.id}-caption`}>
      <figcaption id={`${props.id}-caption`}>{props.title}</figcaption>
      {props.children}
    </figure>
  );
}

function ShardsSection(props: { c: Context<ConsoleEnv>; t: Translate<Key>; shards: ShardsAnswer | null }) {
  const { c, t, shards } = props;
  const locale = c.get("locale");
  if (!shards) return null;
  const stores = LIVE_STORES.filter((s) => shards.stores[s]).map((s) => [s, shards.stores[s] as StoreShards] as const);
  return (
    <section aria-labelledby="shards-heading">
      <h2 id="shards-heading">{t("shards")}</h2>
      <p>{t("shardsLead")}</p>
      <Chart id="shards-chart" title={t("shardsChart")}>
        <BarChart
          rows={stores.map(([store, s]) => ({ label: store, value: s.shards, text: formatNumber(locale, s.shards) }))}
        />
      </Chart>
      <table class="numbers">
        <caption class="sr-only">{t("shardsChart")}</caption>
        <thead>
          <tr>
            <th scope="col">{t("store")}</th>
            <th scope="col" class="n">
              {t("count")}
            </th>
            <th scope="col" class="n">
              {t("generation")}
            </th>
            <th scope="col">{t("liveGenerations")}</th>
            <th scope="col">
              <span class="sr-only">{t("change")}</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {stores.map(([store, s]) => {
            const pending = s.issue_from.at(-1);
            return (
              <tr>
                <th scope="row" class="id">
                  {store}
                </th>
                <td class="n">{formatNumber(locale, s.shards)}</td>
                <td class="n">{formatNumber(locale, s.generation)}</td>
                <td>
                  {s.generations
                    .map((n, i) => `${formatNumber(locale, s.first_live_generation + i)}: ${n ?? "–"}`)
                    .join(", ")}
                  {pending && Date.parse(pending) > Date.now() ? (
                    <span class="badge off">
                      {t("pending")}: {t("issuedFrom", { time: formatTime(locale, Date.parse(pending)) })}
                    </span>
                  ) : null}
                </td>
                <td>
                  <a
                    href={`/console/capacity/change?store=${encodeURIComponent(store)}`}
                    aria-label={t("changeStore", { store })}
                  >
                    {t("change")}
                  </a>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
}

function PlanSection(props: {
  c: Context<ConsoleEnv>;
  t: Translate<Key>;
  plan?: PlanAnswer | undefined;
  current: Record<string, StoreShards>;
}) {
  const { c, t, plan } = props;
  const locale = c.get("locale");
  return (
    <section aria-labelledby="plan-heading">
      <h2 id="plan-heading">{t("planner")}</h2>
      <p>{t("plannerLead")}</p>
      <form method="post" action="/console/capacity/plan" class="actions">
        <CsrfField c={c} />
        <span>
          <label for="plan-window">{t("window")}</label>
          <input id="plan-window" name="window_seconds" type="number" min={1} max={30} value="10" required />
        </span>
        <span>
          <label for="plan-peak">{t("peakFactor")}</label>
          <input id="plan-peak" name="peak_factor" type="number" min={1} max={100} step="0.5" value="3" required />
        </span>
        <button type="submit" class="primary">
          {t("measure")}
        </button>
      </form>
      {plan ? (
        <>
          <h3>{t("planResult", { seconds: plan.window_seconds, factor: plan.peak_factor })}</h3>
          <p class="hint">{t("regionNote")}</p>
          {Object.entries(plan.regions).map(([region, r]) => (
            <table class="numbers">
              <caption>{t("region", { region })}</caption>
              <thead>
                <tr>
                  <th scope="col">{t("store")}</th>
                  <th scope="col" class="n">
                    {t("measured")}
                  </th>
                  <th scope="col" class="n">
                    {t("current")}
                  </th>
                  <th scope="col" class="n">
                    {t("recommended")}
                  </th>
                  <th scope="col">{t("reasoning")}</th>
                </tr>
              </thead>
              <tbody>
                {r.plan.map((p) => {
                  const now = props.current[p.store]?.shards;
                  return (
                    <tr>
                      <th scope="row" class="id">
                        {p.store}
                      </th>
                      <td class="n">{number(locale, r.measured[p.store] ?? 0, 1)}</td>
                      <td class="n">{now === undefined ? "–" : formatNumber(locale, now)}</td>
                      <td class="n">
                        <strong>{formatNumber(locale, p.shards)}</strong>
                        {now !== undefined && now !== p.shards ? (
                          <>
                            {" "}
                            <a
                              href={`/console/capacity/change?store=${encodeURIComponent(p.store)}&shards=${p.shards}`}
                            >
                              {t("apply", { n: formatNumber(locale, p.shards) })}
                            </a>
                          </>
                        ) : null}
                      </td>
                      <td class="hint" dir="ltr" lang="en">
                        {p.reasoning}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          ))}
        </>
      ) : null}
    </section>
  );
}

function BillSection(props: { c: Context<ConsoleEnv>; t: Translate<Key>; bill?: BillAnswer | undefined }) {
  const { c, t, bill } = props;
  const locale = c.get("locale");
  const lineName = (line: string) => t(`line_${line}` as Key);
  return (
    <section aria-labelledby="bill-heading">
      <h2 id="bill-heading">{t("bill")}</h2>
      <p>{t("billLead")}</p>
      <form method="post" action="/console/capacity/bill" class="actions">
        <CsrfField c={c} />
        <span>
          <label for="bill-window">{t("billWindow")}</label>
          <input id="bill-window" name="window_seconds" type="number" min={1} max={60} value="10" required />
        </span>
        <button type="submit" class="primary">
          {t("measureBill")}
        </button>
      </form>
      {bill && bill.logins === 0 ? <p class="warn">{t("noLogins", { seconds: bill.window_seconds })}</p> : null}
      {bill && bill.logins > 0 && bill.usd_per_million !== null ? (
        <>
          <p>
            <strong>
              {t("billResult", {
                logins: formatNumber(locale, bill.logins),
                seconds: bill.window_seconds,
                usd: dollars(locale, bill.usd_per_million),
              })}
            </strong>
          </p>
          <Chart id="cost-chart" title={t("costChart")}>
            <BarChart
              color="#047857"
              rows={bill.lines.map((l) => ({
                label: lineName(l.line),
                value: l.usd_per_million,
                text: dollars(locale, l.usd_per_million),
              }))}
            />
          </Chart>
          <table class="numbers">
            <caption class="sr-only">{t("costChart")}</caption>
            <thead>
              <tr>
                <th scope="col">{t("line")}</th>
                <th scope="col" class="n">
                  {t("perLogin")}
                </th>
                <th scope="col" class="n">
                  {t("usd")}
                </th>
              </tr>
            </thead>
            <tbody>
              {bill.lines.map((l) => (
                <tr>
                  <th scope="row">{lineName(l.line)}</th>
                  <td class="n">
                    {number(locale, l.quantity, l.unit === "GB-month" ? 9 : 2)} {t(`unit_${l.unit}` as Key)}
                  </td>
                  <td class="n">{dollars(locale, l.usd_per_million)}</td>
                </tr>
              ))}
            </tbody>
            <tfoot>
              <tr>
                <th scope="row">{t("total")}</th>
                <td />
                <td class="n">
                  <strong>{dollars(locale, bill.usd_per_million)}</strong>
                </td>
              </tr>
            </tfoot>
          </table>
          <p class="hint">{t("notPriced", { what: bill.not_priced.join("; ") })}</p>
          {bill.stores ? <StoresPerLogin c={c} t={t} stores={bill.stores} /> : null}
        </>
      ) : null}
    </section>
  );
}

function StoresPerLogin(props: {
  c: Context<ConsoleEnv>;
  t: Translate<Key>;
  stores: Record<string, { calls: number; rows_written: number }>;
}) {
  const { c, t } = props;
  const locale = c.get("locale");
  const rows = Object.entries(props.stores).filter(([, s]) => s.calls > 0 || s.rows_written > 0);
  return (
    <>
      <Chart id="calls-chart" title={t("callsChart")}>
        <BarChart rows={rows.map(([store, s]) => ({ label: store, value: s.calls, text: number(locale, s.calls) }))} />
      </Chart>
      <Chart id="rows-chart" title={t("rowsChart")}>
        <BarChart
          color="#b45309"
          rows={rows.map(([store, s]) => ({
            label: store,
            value: s.rows_written,
            text: number(locale, s.rows_written),
          }))}
        />
      </Chart>
      <table class="numbers">
        <caption class="sr-only">{t("callsChart")}</caption>
        <thead>
          <tr>
            <th scope="col">{t("store")}</th>
            <th scope="col" class="n">
              {t("calls")}
            </th>
            <th scope="col" class="n">
              {t("rows")}
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map(([store, s]) => (
            <tr>
              <th scope="row" class="id">
                {store}
              </th>
              <td class="n">{number(locale, s.calls)}</td>
              <td class="n">{number(locale, s.rows_written)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

async function capacityPage(
  c: Context<ConsoleEnv>,
  o: { plan?: PlanAnswer; bill?: BillAnswer; error?: string; status?: number } = {},
): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const shards = await adminCall<ShardsAnswer>(c, "GET", "/admin/v1/shards");
  const notice = c.req.query("notice") === "changed" ? t("notice_changed") : undefined;
  return renderPage(c, {
    title: t("title"),
    top: "capacity",
    notice,
    error: o.error,
    status: o.status ?? 200,
    children: (
      <>
        <PageStyle c={c} />
        <p>{t("lead")}</p>
        <ShardsSection c={c} t={t} shards={shards.ok ? shards.data : null} />
        <PlanSection c={c} t={t} plan={o.plan} current={shards.ok ? shards.data.stores : {}} />
        <BillSection c={c} t={t} bill={o.bill} />
      </>
    ),
  });
}

const bounded = (v: unknown, min: number, max: number, fallback: number) => {
  const n = typeof v === "string" && v.trim() !== "" ? Number(v) : fallback;
  return Number.isFinite(n) ? Math.min(max, Math.max(min, n)) : fallback;
};

async function plan(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const form = await c.req.parseBody();
  const res = await adminCall<PlanAnswer>(c, "POST", "/admin/v1/shards/plan", {
    measured: {
      window_seconds: Math.round(bounded(form.window_seconds, 1, 30, 10)),
      peak_factor: bounded(form.peak_factor, 1, 100, 3),
    },
  });
  if (!res.ok) return capacityPage(c, { error: t("measureFailed", { error: res.error ?? "" }), status: res.status });
  return capacityPage(c, { plan: res.data });
}

async function bill(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const form = await c.req.parseBody();
  const res = await adminCall<BillAnswer>(c, "POST", "/admin/v1/stats/bill", {
    window_seconds: Math.round(bounded(form.window_seconds, 1, 60, 10)),
  });
  if (!res.ok) return capacityPage(c, { error: t("measureFailed", { error: res.error ?? "" }), status: res.status });
  return capacityPage(c, { bill: res.data });
}

/** The change's two steps: the form (a store, a count), then what will happen, confirmed by a POST. */
async function changePage(c: Context<ConsoleEnv>, o: { error?: string; status?: number } = {}): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const locale = c.get("locale");
  const cache = c.get("config").POLICY.shard_config_cache_seconds;
  const shards = await adminCall<ShardsAnswer>(c, "GET", "/admin/v1/shards");
  const stores = shards.ok ? shards.data.stores : {};
  const askedStore = c.req.query("store") ?? "";
  const store = (LIVE_STORES as readonly string[]).includes(askedStore) ? askedStore : "session";
  const current = stores[store];
  const rawCount = c.req.query("shards");
  const count = rawCount === undefined ? null : Number(rawCount);
  const valid = count !== null && Number.isInteger(count) && count >= 1 && count <= MAX_SHARDS;
  const reviewing = valid && current && count !== current.shards;
  const error =
    o.error ??
    (count !== null && !valid
      ? t("badCount", { max: MAX_SHARDS })
      : valid && current && count === current.shards
        ? t("same", { store, n: current.shards })
        : undefined);
  return renderPage(c, {
    title: reviewing
      ? t("confirmTitle", { store, from: current.shards, to: formatNumber(locale, count) })
      : t("changeTitle"),
    top: "capacity",
    error,
    status: o.status ?? (error ? 400 : 200),
    children: (
      <>
        <PageStyle c={c} />
        {reviewing ? (
          <form method="post" action="/console/capacity/change">
            <CsrfField c={c} />
            <input type="hidden" name="store" value={store} />
            <input type="hidden" name="shards" value={String(count)} />
            <p>
              {t("confirmLead", {
                gen: formatNumber(locale, current.first_live_generation + current.generations.length),
                store,
                to: formatNumber(locale, count),
                cache,
              })}
            </p>
            <Chart id="change-chart" title={`${store}: ${current.shards} → ${count}`}>
              <BarChart
                rows={[
                  { label: t("current"), value: current.shards, text: formatNumber(locale, current.shards) },
                  { label: t("newValue"), value: count, text: formatNumber(locale, count) },
                ]}
              />
            </Chart>
            <div class="actions">
              <button type="submit" class="danger">
                {t("confirm")}
              </button>
              <a href="/console/capacity">{t("cancel")}</a>
            </div>
          </form>
        ) : (
          <form method="get" action="/console/capacity/change">
            <p>{t("changeLead", { cache })}</p>
            <label for="change-store">{t("store")}</label>
            <select id="change-store" name="store">
              {LIVE_STORES.map((s) => (
                <option value={s} selected={s === store}>
                  {`${s} (${stores[s]?.shards ?? "?"})`}
                </option>
              ))}
            </select>
            <label for="change-shards">{t("newCount", { max: MAX_SHARDS })}</label>
            <input
              id="change-shards"
              name="shards"
              type="number"
              min={1}
              max={MAX_SHARDS}
              required
              value={rawCount ?? String(current?.shards ?? 1)}
              aria-invalid={error ? "true" : undefined}
            />
            <div class="actions">
              <button type="submit" class="primary">
                {t("review")}
              </button>
              <a href="/console/capacity">{t("cancel")}</a>
            </div>
          </form>
        )}
      </>
    ),
  });
}

async function change(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const form = await c.req.parseBody();
  const res = await adminCall(c, "POST", "/admin/v1/shards", {
    store: String(form.store ?? ""),
    shards: Number(form.shards),
  });
  if (!res.ok) return changePage(c, { error: t("failed", { error: res.error ?? "" }), status: res.status });
  return seeOther("/console/capacity", "changed");
}

export function registerCapacityPages(app: Hono<ConsoleEnv>): void {
  app.use("/capacity", deploymentOnly);
  app.use("/capacity/*", deploymentOnly);
  app.get("/capacity", (c) => capacityPage(c));
  app.post("/capacity/plan", plan);
  app.post("/capacity/bill", bill);
  app.get("/capacity/change", (c) => changePage(c));
  app.post("/capacity/change", change);
}
