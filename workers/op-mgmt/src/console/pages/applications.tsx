import type { Context, Hono } from "hono";
import type { Client } from "../../../../shared/oauth/clients";
import { DEVICE_GRANT } from "../../../../shared/oauth/device";
import { DEFAULT_TENANT } from "../../../../shared/routing/tenant-route";
import type { ConsoleEnv } from "../env";
import { catalogue, formatTime, type Translate, translate } from "../i18n";
import { CsrfField, renderPage, tenantBase } from "../layout";
import { adminCall, seeOther, tenantApiPath } from "../operator";
import { CONSOLE_CLIENT_ID } from "../session";
import {
  Field,
  FieldProblems,
  FormStyle,
  lines,
  type Problem,
  ProblemSummary,
  posted,
  problemsOf,
} from "./form-problems";

/**
 * A tenant's applications (issue 43): the clients people sign in to and the machines that call its
 * APIs. Register one (its secret shown once, in the POST's own answer), change what it may do and
 * how its sign-in looks, make a new secret, delete it. Every change is an admin API call
 * (`/admin/v1/clients...`) on the operator's behalf: the API validates, the page shows its refusal
 * beside the form with what the operator typed kept.
 */

const words = catalogue({
  en: {
    title: "Applications",
    intro: "The applications people sign in to, and the machines that call this tenant's APIs.",
    register: "Register an application",
    none: "No application is registered yet.",
    listLabel: "Registered applications",
    kind_nothing: "Public: PKCE, no secret",
    kind_secret: "Confidential: a secret",
    kind_key: "Confidential: a signed key",
    consoleNote:
      "This console signs in with this application. Keyway writes it back at each sign-in, so it cannot be changed here.",
    readOnly: "read-only",
    redirects: "{n} redirect URIs",
    name: "Name",
    nameHint: "Shown to people on the sign-in page and in mail.",
    authMethod: "How it authenticates at the token endpoint",
    auth_none: "None: a public app (single-page, mobile, desktop), with PKCE",
    auth_client_secret_basic: "A secret, in the Authorization header (client_secret_basic)",
    auth_client_secret_post: "A secret, in the form body (client_secret_post)",
    auth_private_key_jwt: "A JWT signed with its own key (private_key_jwt)",
    authFixed: "Chosen at registration: public, secret and key applications cannot switch to another kind.",
    grantTypes: "What it may do",
    grant_authorization_code: "Sign people in (authorization code)",
    grant_refresh_token: "Keep people signed in (refresh tokens)",
    grant_client_credentials: "Call APIs as itself (client credentials)",
    grant_device: "Sign people in on a device without a browser (device code)",
    redirectUris: "Redirect URIs",
    redirectHint:
      "One a line: https, http only on 127.0.0.1 or localhost, or an app's own scheme such as com.example.app:/callback.",
    logoutUris: "Redirect URIs after sign-out",
    linesHint: "One a line.",
    scope: "Scopes",
    scopeHint: "Separated by spaces. Left empty at registration: every OpenID scope for an app that signs people in.",
    resources: "Resources (APIs)",
    resourcesHint: "One absolute URI a line: the APIs it may ask tokens for (RFC 8707).",
    cors: "Allowed CORS origins",
    corsHint: "One origin a line, such as https://app.example.com.",
    jwksUri: "JWK Set URL",
    jwksUriHint: "Only for private_key_jwt: where Keyway fetches the application's public keys.",
    security: "Security",
    requirePkce: "Require PKCE (a public app always uses it)",
    dpop: "Bind its access tokens to its key (DPoP)",
    par: "Require pushed authorization requests (PAR)",
    branding: "Branding",
    brandingHint:
      "What its sign-in pages and mail show instead of the tenant's, field by field. An empty field takes the tenant's.",
    productName: "Product name",
    logoUri: "Logo URL",
    primaryColor: "Main colour",
    colorHint: "As #rrggbb, such as #1f5fcc.",
    supportUri: "Help page, or a mailto: address",
    submitRegister: "Register",
    refused: "Nothing was saved. The admin API refused this:",
    registeredTitle: "Application registered",
    registered: "{name} is registered.",
    clientId: "Client ID",
    secret: "Client secret",
    secretWarning:
      "Copy the secret now into the application's configuration: it is shown this once, and only its hash is kept.",
    noSecret: "This application has no secret: it proves itself with PKCE or with its key.",
    openApp: "Go to the application",
    backToList: "Back to the applications",
    details: "About this application",
    kind: "Type",
    created: "Registered",
    updated: "Last changed",
    via: "Registered by",
    via_admin: "an operator or the admin API",
    via_dynamic: "itself (dynamic registration)",
    settings: "Settings",
    save: "Save changes",
    saved: "Changes saved.",
    secretExplain: "The secret was shown once, when it was made. If it is lost or has leaked, make a new one.",
    rotate: "Make a new secret",
    rotateTitle: "Make a new secret for {name}?",
    rotateWarning:
      "The current secret stops working at once: the application cannot get tokens until it is given the new one.",
    rotatedTitle: "New secret for {name}",
    rotated: "A new secret was made; the old one no longer works.",
    cancel: "Cancel",
    deleteSection: "Delete this application",
    deleteExplain: "Its sign-ins end: its tokens stop working at their next check. This cannot be undone.",
    deleteLink: "Delete…",
    deleteTitle: "Delete {name}?",
    deleteTyped: "To confirm, type the application's name: {name}",
    deleteConfirm: "Delete the application",
    deleteMismatch: "The name typed is not the application's. Nothing was deleted.",
    deleted: "The application was deleted.",
    notFound: "There is no such application in this tenant.",
    consoleClient: "This is the console's own application: it cannot be changed here.",
  },
  fr: {
    title: "Applications",
    intro:
      "Les applications auxquelles les personnes se connectent, et les machines qui appellent les API de ce locataire.",
    register: "Enregistrer une application",
    none: "Aucune application n’est encore enregistrée.",
    listLabel: "Applications enregistrées",
    kind_nothing: "Publique : PKCE, sans secret",
    kind_secret: "Confidentielle : un secret",
    kind_key: "Confidentielle : une clé de signature",
    consoleNote:
      "Cette console se connecte avec cette application. Keyway la réécrit à chaque connexion : elle ne peut pas être modifiée ici.",
    readOnly: "lecture seule",
    redirects: "{n} URI de redirection",
    name: "Nom",
    nameHint: "Affiché aux personnes sur la page de connexion et dans les courriels.",
    authMethod: "Comment elle s’authentifie au point de terminaison des jetons",
    auth_none: "Aucune : une application publique (monopage, mobile, bureau), avec PKCE",
    auth_client_secret_basic: "Un secret, dans l’en-tête Authorization (client_secret_basic)",
    auth_client_secret_post: "Un secret, dans le corps du formulaire (client_secret_post)",
    auth_private_key_jwt: "Un JWT signé avec sa propre clé (private_key_jwt)",
    authFixed: "Choisi à l’enregistrement : une application publique, à secret ou à clé ne peut pas changer de type.",
    grantTypes: "Ce qu’elle peut faire",
    grant_authorization_code: "Connecter des personnes (code d’autorisation)",
    grant_refresh_token: "Garder les personnes connectées (jetons de rafraîchissement)",
    grant_client_credentials: "Appeler des API en son propre nom (identifiants client)",
    grant_device: "Connecter des personnes sur un appareil sans navigateur (code d’appareil)",
    redirectUris: "URI de redirection",
    redirectHint:
      "Une par ligne : https, http seulement sur 127.0.0.1 ou localhost, ou le schéma propre d’une application comme com.example.app:/callback.",
    logoutUris: "URI de redirection après la déconnexion",
    linesHint: "Une par ligne.",
    scope: "Portées",
    scopeHint:
      "Séparées par des espaces. Vide à l’enregistrement : toutes les portées OpenID pour une application qui connecte des personnes.",
    resources: "Ressources (API)",
    resourcesHint: "Un URI absolu par ligne : les API pour lesquelles elle peut demander des jetons (RFC 8707).",
    cors: "Origines CORS autorisées",
    corsHint: "Une origine par ligne, comme https://app.example.com.",
    jwksUri: "URL du jeu de clés JWK",
    jwksUriHint: "Seulement pour private_key_jwt : où Keyway récupère les clés publiques de l’application.",
    security: "Sécurité",
    requirePkce: "Exiger PKCE (une application publique l’utilise toujours)",
    dpop: "Lier ses jetons d’accès à sa clé (DPoP)",
    par: "Exiger des demandes d’autorisation poussées (PAR)",
    branding: "Image de marque",
    brandingHint:
      "Ce que ses pages de connexion et ses courriels affichent à la place de ceux du locataire, champ par champ. Un champ vide reprend celui du locataire.",
    productName: "Nom du produit",
    logoUri: "URL du logo",
    primaryColor: "Couleur principale",
    colorHint: "Au format #rrggbb, par exemple #1f5fcc.",
    supportUri: "Page d’aide, ou une adresse mailto:",
    submitRegister: "Enregistrer",
    refused: "Rien n’a été enregistré. L’API d’administration a refusé ceci :",
    registeredTitle: "Application enregistrée",
    registered: "{name} est enregistrée.",
    clientId: "Identifiant client",
    secret: "Secret client",
    secretWarning:
      "Copiez le secret maintenant dans la configuration de l’application : il n’est affiché que cette fois, seule son empreinte est conservée.",
    noSecret: "Cette application n’a pas de secret : elle prouve son identité par PKCE ou par sa clé.",
    openApp: "Aller à l’application",
    backToList: "Retour aux applications",
    details: "À propos de cette application",
    kind: "Type",
    created: "Enregistrée le",
    updated: "Dernière modification",
    via: "Enregistrée par",
    via_admin: "un opérateur ou l’API d’administration",
    via_dynamic: "elle-même (enregistrement dynamique)",
    settings: "Réglages",
    save: "Enregistrer les modifications",
    saved: "Modifications enregistrées.",
    secretExplain:
      "Le secret a été affiché une seule fois, à sa création. S’il est perdu ou a fuité, créez-en un nouveau.",
    rotate: "Créer un nouveau secret",
    rotateTitle: "Créer un nouveau secret pour {name} ?",
    rotateWarning:
      "Le secret actuel cesse de fonctionner immédiatement : l’application ne peut plus obtenir de jetons tant qu’elle n’a pas le nouveau.",
    rotatedTitle: "Nouveau secret pour {name}",
    rotated: "Un nouveau secret a été créé ; l’ancien ne fonctionne plus.",
    cancel: "Annuler",
    deleteSection: "Supprimer cette application",
    deleteExplain:
      "Ses connexions prennent fin : ses jetons cessent de fonctionner à leur prochaine vérification. C’est irréversible.",
    deleteLink: "Supprimer…",
    deleteTitle: "Supprimer {name} ?",
    deleteTyped: "Pour confirmer, saisissez le nom de l’application : {name}",
    deleteConfirm: "Supprimer l’application",
    deleteMismatch: "Le nom saisi n’est pas celui de l’application. Rien n’a été supprimé.",
    deleted: "L’application a été supprimée.",
    notFound: "Il n’y a pas d’application de ce nom dans ce locataire.",
    consoleClient: "C’est l’application de la console elle-même : elle ne peut pas être modifiée ici.",
  },
  ar: {
    title: "التطبيقات",
    intro: "التطبيقات التي يسجّل الأشخاص الدخول إليها، والأجهزة التي تستدعي واجهات برمجة هذا المستأجر.",
    register: "تسجيل تطبيق",
    none: "لم يُسجَّل أي تطبيق بعد.",
    listLabel: "التطبيقات المسجّلة",
    kind_nothing: "عام: PKCE بلا سرّ",
    kind_secret: "سرّي: بسرّ",
    kind_key: "سرّي: بمفتاح توقيع",
    consoleNote:
      "تسجّل وحدة التحكم هذه الدخول بهذا التطبيق. يعيد Keyway كتابته عند كل تسجيل دخول، لذا لا يمكن تغييره هنا.",
    readOnly: "للقراءة فقط",
    redirects: "{n} من عناوين إعادة التوجيه",
    name: "الاسم",
    nameHint: "يظهر للأشخاص في صفحة تسجيل الدخول وفي البريد.",
    authMethod: "كيف يُثبت هويته عند نقطة نهاية الرموز",
    auth_none: "لا شيء: تطبيق عام (صفحة واحدة، جوال، سطح مكتب) مع PKCE",
    auth_client_secret_basic: "سرّ في ترويسة Authorization ‏(client_secret_basic)",
    auth_client_secret_post: "سرّ في جسم النموذج (client_secret_post)",
    auth_private_key_jwt: "رمز JWT موقّع بمفتاحه الخاص (private_key_jwt)",
    authFixed: "يُختار عند التسجيل: لا يمكن للتطبيق العام أو ذي السرّ أو ذي المفتاح أن يتحوّل إلى نوع آخر.",
    grantTypes: "ما يمكنه فعله",
    grant_authorization_code: "تسجيل دخول الأشخاص (رمز التفويض)",
    grant_refresh_token: "إبقاء الأشخاص مسجّلين (رموز التحديث)",
    grant_client_credentials: "استدعاء الواجهات البرمجية باسمه (بيانات اعتماد العميل)",
    grant_device: "تسجيل دخول الأشخاص على جهاز بلا متصفح (رمز الجهاز)",
    redirectUris: "عناوين إعادة التوجيه",
    redirectHint:
      "عنوان في كل سطر: https، أو http على 127.0.0.1 أو localhost فقط، أو مخطط خاص بالتطبيق مثل com.example.app:/callback.",
    logoutUris: "عناوين إعادة التوجيه بعد تسجيل الخروج",
    linesHint: "عنوان في كل سطر.",
    scope: "النطاقات",
    scopeHint: "مفصولة بمسافات. إذا تُركت فارغة عند التسجيل: كل نطاقات OpenID لتطبيق يسجّل دخول الأشخاص.",
    resources: "الموارد (الواجهات البرمجية)",
    resourcesHint: "عنوان URI مطلق في كل سطر: الواجهات التي يمكنه طلب رموز لها (RFC 8707).",
    cors: "أصول CORS المسموح بها",
    corsHint: "أصل في كل سطر، مثل https://app.example.com.",
    jwksUri: "عنوان مجموعة مفاتيح JWK",
    jwksUriHint: "لـ private_key_jwt فقط: حيث يجلب Keyway المفاتيح العامة للتطبيق.",
    security: "الأمان",
    requirePkce: "اشتراط PKCE (يستخدمه التطبيق العام دائمًا)",
    dpop: "ربط رموز الوصول الخاصة به بمفتاحه (DPoP)",
    par: "اشتراط طلبات التفويض المدفوعة مسبقًا (PAR)",
    branding: "الهوية البصرية",
    brandingHint:
      "ما تعرضه صفحات تسجيل الدخول والبريد الخاصة به بدلًا مما للمستأجر، حقلًا بحقل. الحقل الفارغ يأخذ قيمة المستأجر.",
    productName: "اسم المنتج",
    logoUri: "عنوان الشعار",
    primaryColor: "اللون الرئيسي",
    colorHint: "بالصيغة #rrggbb، مثل #1f5fcc.",
    supportUri: "صفحة المساعدة، أو عنوان mailto:",
    submitRegister: "تسجيل",
    refused: "لم يُحفظ شيء. رفضت واجهة الإدارة البرمجية ما يلي:",
    registeredTitle: "تم تسجيل التطبيق",
    registered: "تم تسجيل {name}.",
    clientId: "معرّف العميل",
    secret: "سرّ العميل",
    secretWarning: "انسخ السرّ الآن إلى إعدادات التطبيق: لن يُعرض إلا هذه المرة، ولا يُحفظ إلا بصمته.",
    noSecret: "ليس لهذا التطبيق سرّ: يُثبت هويته بـ PKCE أو بمفتاحه.",
    openApp: "الانتقال إلى التطبيق",
    backToList: "العودة إلى التطبيقات",
    details: "عن هذا التطبيق",
    kind: "النوع",
    created: "تاريخ التسجيل",
    updated: "آخر تغيير",
    via: "سجّله",
    via_admin: "مشغّل أو واجهة الإدارة البرمجية",
    via_dynamic: "هو نفسه (التسجيل الديناميكي)",
    settings: "الإعدادات",
    save: "حفظ التغييرات",
    saved: "تم حفظ التغييرات.",
    secretExplain: "عُرض السرّ مرة واحدة عند إنشائه. إن ضاع أو تسرّب، فأنشئ سرًّا جديدًا.",
    rotate: "إنشاء سرّ جديد",
    rotateTitle: "إنشاء سرّ جديد لـ {name}؟",
    rotateWarning: "يتوقف السرّ الحالي عن العمل فورًا: لا يستطيع التطبيق الحصول على رموز حتى يُعطى السرّ الجديد.",
    rotatedTitle: "سرّ جديد لـ {name}",
    rotated: "أُنشئ سرّ جديد؛ ولم يعد السرّ القديم يعمل.",
    cancel: "إلغاء",
    deleteSection: "حذف هذا التطبيق",
    deleteExplain: "تنتهي عمليات تسجيل الدخول به: تتوقف رموزه عن العمل عند فحصها التالي. لا يمكن التراجع عن ذلك.",
    deleteLink: "حذف…",
    deleteTitle: "حذف {name}؟",
    deleteTyped: "للتأكيد، اكتب اسم التطبيق: {name}",
    deleteConfirm: "حذف التطبيق",
    deleteMismatch: "الاسم المكتوب ليس اسم التطبيق. لم يُحذف شيء.",
    deleted: "تم حذف التطبيق.",
    notFound: "لا يوجد تطبيق كهذا في هذا المستأجر.",
    consoleClient: "هذا تطبيق وحدة التحكم نفسها: لا يمكن تغييره هنا.",
  },
});
type Key = keyof (typeof words)["en"];

type AppView = Omit<Client, "secret_hash" | "registration_access_token_hash">;

const AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none", "private_key_jwt"] as const;
const GRANTS = [
  ["authorization_code", "grant_authorization_code"],
  ["refresh_token", "grant_refresh_token"],
  ["client_credentials", "grant_client_credentials"],
  [DEVICE_GRANT, "grant_device"],
] as const;
/** The fields the form has, as the API names them (its problems are shown beside them). */
const FIELDS = [
  "client_name",
  "token_endpoint_auth_method",
  "grant_types",
  "redirect_uris",
  "post_logout_redirect_uris",
  "scope",
  "resources",
  "allowed_cors_origins",
  "jwks_uri",
  "require_pkce",
  "dpop_bound_access_tokens",
  "require_pushed_authorization_requests",
  "branding.product_name",
  "branding.logo_uri",
  "branding.primary_color",
  "branding.support_uri",
  "branding",
] as const;
const BRANDING = [
  ["product_name", "productName", false],
  ["logo_uri", "logoUri", true],
  ["primary_color", "primaryColor", true],
  ["support_uri", "supportUri", true],
] as const;
type BrandingField = (typeof BRANDING)[number][0];

/** What a public, secret or key application proves itself with (client-registration.ts's authProof). */
const proofOf = (m: string) => (m === "none" ? "nothing" : m === "private_key_jwt" ? "key" : "secret");

/** The form as the operator sees it: what was typed, kept across a refusal. */
interface AppForm {
  client_name: string;
  token_endpoint_auth_method: string;
  grant_types: string[];
  redirect_uris: string;
  post_logout_redirect_uris: string;
  scope: string;
  resources: string;
  allowed_cors_origins: string;
  jwks_uri: string;
  require_pkce: boolean;
  dpop_bound_access_tokens: boolean;
  require_pushed_authorization_requests: boolean;
  branding: Record<BrandingField, string>;
}

const EMPTY_FORM: AppForm = {
  client_name: "",
  token_endpoint_auth_method: "client_secret_basic",
  grant_types: ["authorization_code", "refresh_token"],
  redirect_uris: "",
  post_logout_redirect_uris: "",
  scope: "",
  resources: "",
  allowed_cors_origins: "",
  jwks_uri: "",
  require_pkce: true,
  dpop_bound_access_tokens: false,
  require_pushed_authorization_requests: false,
  branding: { product_name: "", logo_uri: "", primary_color: "", support_uri: "" },
};

function formOfClient(a: AppView): AppForm {
  return {
    client_name: a.client_name,
    token_endpoint_auth_method: a.token_endpoint_auth_method,
    grant_types: a.grant_types,
    redirect_uris: a.redirect_uris.join("\n"),
    post_logout_redirect_uris: a.post_logout_redirect_uris.join("\n"),
    scope: a.scope,
    resources: a.resources.join("\n"),
    allowed_cors_origins: a.allowed_cors_origins.join("\n"),
    jwks_uri: a.jwks_uri ?? "",
    require_pkce: a.require_pkce,
    dpop_bound_access_tokens: a.dpop_bound_access_tokens,
    require_pushed_authorization_requests: a.require_pushed_authorization_requests,
    branding: {
      product_name: a.branding.product_name ?? "",
      logo_uri: a.branding.logo_uri ?? "",
      primary_color: a.branding.primary_color ?? "",
      support_uri: a.branding.support_uri ?? "",
    },
  };
}

async function formOfPost(c: Context<ConsoleEnv>): Promise<AppForm> {
  const p = await posted(c);
  return {
    client_name: p.text("client_name"),
    token_endpoint_auth_method: p.text("token_endpoint_auth_method"),
    grant_types: p.all("grant_types"),
    redirect_uris: p.text("redirect_uris"),
    post_logout_redirect_uris: p.text("post_logout_redirect_uris"),
    scope: p.text("scope").split(/\s+/).filter(Boolean).join(" "),
    resources: p.text("resources"),
    allowed_cors_origins: p.text("allowed_cors_origins"),
    jwks_uri: p.text("jwks_uri"),
    require_pkce: p.has("require_pkce"),
    dpop_bound_access_tokens: p.has("dpop_bound_access_tokens"),
    require_pushed_authorization_requests: p.has("require_pushed_authorization_requests"),
    branding: {
      product_name: p.text("branding.product_name"),
      logo_uri: p.text("branding.logo_uri"),
      primary_color: p.text("branding.primary_color"),
      support_uri: p.text("branding.support_uri"),
    },
  };
}

/** The fields every form sends; an empty branding field is the tenant's (not sent). */
function commonBody(f: AppForm) {
  return {
    client_name: f.client_name,
    grant_types: f.grant_types,
    redirect_uris: lines(f.redirect_uris),
    post_logout_redirect_uris: lines(f.post_logout_redirect_uris),
    resources: lines(f.resources),
    allowed_cors_origins: lines(f.allowed_cors_origins),
    require_pkce: f.require_pkce,
    dpop_bound_access_tokens: f.dpop_bound_access_tokens,
    require_pushed_authorization_requests: f.require_pushed_authorization_requests,
    branding: Object.fromEntries(Object.entries(f.branding).filter(([, v]) => v !== "")),
  };
}

/** POST /clients: the scope left out when empty (the API's default), the key URL only when given. */
const createBody = (f: AppForm) => ({
  ...commonBody(f),
  token_endpoint_auth_method: f.token_endpoint_auth_method,
  ...(f.scope ? { scope: f.scope } : {}),
  ...(f.jwks_uri ? { jwks_uri: f.jwks_uri } : {}),
});

/**
 * PATCH /clients/{id}: what the form shows. A secret application may move between the two ways of
 * sending its secret; a key application's keys move to a URL (its keys by value are dropped) or stay.
 */
function patchBody(f: AppForm, current: AppView) {
  const proof = proofOf(current.token_endpoint_auth_method);
  return {
    ...commonBody(f),
    scope: f.scope,
    ...(proof === "secret" ? { token_endpoint_auth_method: f.token_endpoint_auth_method } : {}),
    ...(proof === "key" && f.jwks_uri
      ? { jwks_uri: f.jwks_uri, ...(current.jwks ? { jwks: null } : {}) }
      : proof === "key" && current.jwks_uri
        ? { jwks_uri: null }
        : {}),
  };
}

const appsPath = (tenant: string) => `${tenantBase(tenant)}/apps`;
const appPath = (tenant: string, id: string) => `${appsPath(tenant)}/${encodeURIComponent(id)}`;
const apiPath = (tenant: string, id?: string, rest = "") =>
  tenantApiPath(tenant, `/clients${id === undefined ? "" : `/${encodeURIComponent(id)}`}${rest}`);
const isConsoleClient = (tenant: string, id: string) => tenant === DEFAULT_TENANT && id === CONSOLE_CLIENT_ID;

/** A notice named in the URL after a change (`?notice=`): only the page's own words are shown. */
function noticeOf(c: Context<ConsoleEnv>, t: Translate<Key>, allowed: readonly Key[]): string | undefined {
  const key = c.req.query("notice") as Key | undefined;
  return key && allowed.includes(key) ? t(key) : undefined;
}

// ---- The list

async function listPage(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const tenant = c.get("tenant");
  const res = await adminCall<{ clients: AppView[] }>(c, "GET", apiPath(tenant.id));
  const apps = res.ok ? res.data.clients : [];
  return renderPage(c, {
    title: t("title"),
    section: "applications",
    notice: noticeOf(c, t, ["deleted"]),
    error: res.ok ? undefined : res.error,
    children: (
      <>
        <FormStyle c={c} />
        <p>{t("intro")}</p>
        <p>
          <a href={`${appsPath(tenant.id)}/new`}>{t("register")}</a>
        </p>
        {apps.length ? (
          <ul class="plain apps" aria-label={t("listLabel")}>
            {apps.map((a) => (
              <li>
                {isConsoleClient(tenant.id, a.client_id) ? (
                  <>
                    <bdi>{a.client_name}</bdi> <span class="badge">{t("readOnly")}</span>{" "}
                    <span class="id">{a.client_id}</span>
                    <br />
                    <span class="muted">{t("consoleNote")}</span>
                  </>
                ) : (
                  <>
                    <a href={appPath(tenant.id, a.client_id)}>
                      <bdi>{a.client_name}</bdi>
                    </a>{" "}
                    <span class="id">{a.client_id}</span>
                    <br />
                    <span class="muted">
                      {t(`kind_${proofOf(a.token_endpoint_auth_method)}` as Key)} ·{" "}
                      {t("redirects", { n: a.redirect_uris.length })}
                    </span>
                  </>
                )}
              </li>
            ))}
          </ul>
        ) : (
          <p>{t("none")}</p>
        )}
      </>
    ),
  });
}

// ---- The form (registration and settings)

function AppFormFields(props: { t: Translate<Key>; f: AppForm; problems: Problem[]; current?: AppView }) {
  const { t, f, problems, current } = props;
  const proof = current ? proofOf(current.token_endpoint_auth_method) : null;
  const methods = proof === null ? AUTH_METHODS : proof === "secret" ? AUTH_METHODS.slice(0, 2) : null;
  const authId = "f-token_endpoint_auth_method";
  const authInvalid = problems.some((p) => p.field === "token_endpoint_auth_method");
  return (
    <>
      <Field
        name="client_name"
        label={t("name")}
        hint={t("nameHint")}
        value={f.client_name}
        problems={problems}
        required
      />
      <div class="field">
        {methods ? (
          <>
            <label for={authId}>{t("authMethod")}</label>
            {current ? (
              <p class="hint" id={`${authId}-hint`}>
                {t("authFixed")}
              </p>
            ) : null}
            <select
              id={authId}
              name="token_endpoint_auth_method"
              aria-describedby={
                [current ? `${authId}-hint` : "", authInvalid ? "problem-token_endpoint_auth_method" : ""]
                  .filter(Boolean)
                  .join(" ") || undefined
              }
              aria-invalid={authInvalid ? "true" : undefined}
            >
              {methods.map((m) => (
                <option value={m} selected={f.token_endpoint_auth_method === m}>
                  {t(`auth_${m}`)}
                </option>
              ))}
            </select>
          </>
        ) : (
          <>
            <p>
              <strong>{t("authMethod")}</strong>:{" "}
              {t(`auth_${current?.token_endpoint_auth_method ?? f.token_endpoint_auth_method}` as Key)}
            </p>
            <p class="hint">{t("authFixed")}</p>
          </>
        )}
        <FieldProblems problems={problems} field="token_endpoint_auth_method" />
      </div>
      <fieldset aria-describedby={problems.some((p) => p.field === "grant_types") ? "problem-grant_types" : undefined}>
        <legend>{t("grantTypes")}</legend>
        {GRANTS.map(([value, key]) => (
          <label class="check">
            <input type="checkbox" name="grant_types" value={value} checked={f.grant_types.includes(value)} />
            {t(key)}
          </label>
        ))}
        <FieldProblems problems={problems} field="grant_types" />
      </fieldset>
      <Field
        name="redirect_uris"
        label={t("redirectUris")}
        hint={t("redirectHint")}
        value={f.redirect_uris}
        problems={problems}
        multiline
        ltr
      />
      <Field
        name="post_logout_redirect_uris"
        label={t("logoutUris")}
        hint={t("linesHint")}
        value={f.post_logout_redirect_uris}
        problems={problems}
        multiline
        ltr
      />
      <Field name="scope" label={t("scope")} hint={t("scopeHint")} value={f.scope} problems={problems} ltr />
      <Field
        name="resources"
        label={t("resources")}
        hint={t("resourcesHint")}
        value={f.resources}
        problems={problems}
        multiline
        ltr
      />
      <Field
        name="allowed_cors_origins"
        label={t("cors")}
        hint={t("corsHint")}
        value={f.allowed_cors_origins}
        problems={problems}
        multiline
        ltr
      />
      {proof === null || proof === "key" ? (
        <Field
          name="jwks_uri"
          label={t("jwksUri")}
          hint={t("jwksUriHint")}
          value={f.jwks_uri}
          problems={problems}
          type="url"
          ltr
        />
      ) : null}
      <fieldset>
        <legend>{t("security")}</legend>
        {(
          [
            ["require_pkce", "requirePkce"],
            ["dpop_bound_access_tokens", "dpop"],
            ["require_pushed_authorization_requests", "par"],
          ] as const
        ).map(([name, key]) => (
          <>
            <label class="check">
              <input
                type="checkbox"
                name={name}
                value="on"
                checked={f[name]}
                aria-describedby={problems.some((p) => p.field === name) ? `problem-${name}` : undefined}
              />
              {t(key)}
            </label>
            <FieldProblems problems={problems} field={name} />
          </>
        ))}
      </fieldset>
      <fieldset>
        <legend>{t("branding")}</legend>
        <p class="hint">{t("brandingHint")}</p>
        {BRANDING.map(([name, key, ltr]) => (
          <Field
            name={`branding.${name}`}
            label={t(key)}
            hint={name === "primary_color" ? t("colorHint") : undefined}
            value={f.branding[name]}
            problems={problems}
            ltr={ltr}
          />
        ))}
        <FieldProblems problems={problems} field="branding" />
      </fieldset>
    </>
  );
}

function registerPage(c: Context<ConsoleEnv>, f = EMPTY_FORM, problems: Problem[] = [], status = 200): Response {
  const t = translate(words, c.get("locale"));
  const tenant = c.get("tenant");
  return renderPage(c, {
    title: t("register"),
    section: "applications",
    status,
    children: (
      <>
        <FormStyle c={c} />
        <p>
          <a href={appsPath(tenant.id)}>{t("backToList")}</a>
        </p>
        <form method="post" action={`${appsPath(tenant.id)}/new`} novalidate>
          <CsrfField c={c} />
          <ProblemSummary problems={problems} heading={t("refused")} />
          <AppFormFields t={t} f={f} problems={problems} />
          <div class="actions">
            <button type="submit" class="primary">
              {t("submitRegister")}
            </button>
          </div>
        </form>
      </>
    ),
  });
}

/** The registration's answer: the client id, and its secret this once (no-store, never in a URL). */
function SecretShown(props: { t: Translate<Key>; app: AppView & { client_secret?: string } }) {
  const { t, app } = props;
  return (
    <section aria-labelledby="secret-heading" class="secret-box">
      <h2 id="secret-heading">{app.client_secret ? t("secret") : t("clientId")}</h2>
      <dl class="facts">
        <dt>{t("clientId")}</dt>
        <dd>
          <code id="client-id">{app.client_id}</code>
        </dd>
        {app.client_secret ? (
          <>
            <dt>{t("secret")}</dt>
            <dd>
              <code class="secret" id="client-secret">
                {app.client_secret}
              </code>
            </dd>
          </>
        ) : null}
      </dl>
      <p>{app.client_secret ? t("secretWarning") : t("noSecret")}</p>
    </section>
  );
}

async function register(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const tenant = c.get("tenant");
  const f = await formOfPost(c);
  const res = await adminCall<AppView & { client_secret?: string }>(c, "POST", apiPath(tenant.id), createBody(f));
  if (!res.ok) return registerPage(c, f, problemsOf(res.error, FIELDS), res.status === 403 ? 403 : 400);
  return renderPage(c, {
    title: t("registeredTitle"),
    section: "applications",
    notice: t("registered", { name: res.data.client_name }),
    children: (
      <>
        <FormStyle c={c} />
        <SecretShown t={t} app={res.data} />
        <p>
          <a href={appPath(tenant.id, res.data.client_id)}>{t("openApp")}</a>
        </p>
      </>
    ),
  });
}

// ---- An application's page

async function loadApp(c: Context<ConsoleEnv>): Promise<{ app: AppView } | { response: Response }> {
  const t = translate(words, c.get("locale"));
  const tenant = c.get("tenant");
  const id = c.req.param("id") ?? "";
  const res = await adminCall<AppView>(c, "GET", apiPath(tenant.id, id));
  if (res.ok) return { app: res.data };
  return {
    response: renderPage(c, {
      title: t("title"),
      section: "applications",
      status: res.status === 404 ? 404 : res.status,
      error: res.status === 404 ? t("notFound") : res.error,
      children: (
        <p>
          <a href={appsPath(tenant.id)}>{t("backToList")}</a>
        </p>
      ),
    }),
  };
}

function appPage(
  c: Context<ConsoleEnv>,
  app: AppView,
  o: { f?: AppForm; problems?: Problem[]; status?: number; error?: string } = {},
): Response {
  const t = translate(words, c.get("locale"));
  const locale = c.get("locale");
  const tenant = c.get("tenant");
  const readOnly = isConsoleClient(tenant.id, app.client_id);
  const proof = proofOf(app.token_endpoint_auth_method);
  const problems = o.problems ?? [];
  return renderPage(c, {
    title: app.client_name,
    section: "applications",
    status: o.status ?? 200,
    notice: noticeOf(c, t, ["saved"]),
    error: o.error,
    children: (
      <>
        <FormStyle c={c} />
        <p>
          <a href={appsPath(tenant.id)}>{t("backToList")}</a>
        </p>
        <section aria-labelledby="details">
          <h2 id="details">{t("details")}</h2>
          <dl class="facts">
            <dt>{t("clientId")}</dt>
            <dd>
              <code>{app.client_id}</code>
            </dd>
            <dt>{t("kind")}</dt>
            <dd>{t(`kind_${proof}` as Key)}</dd>
            <dt>{t("via")}</dt>
            <dd>{t(`via_${app.registered_via}` as Key)}</dd>
            <dt>{t("created")}</dt>
            <dd>{formatTime(locale, app.created_at)}</dd>
            <dt>{t("updated")}</dt>
            <dd>{formatTime(locale, app.updated_at)}</dd>
          </dl>
          {readOnly ? <p class="notice">{t("consoleNote")}</p> : null}
        </section>
        {readOnly ? null : (
          <>
            <section aria-labelledby="settings">
              <h2 id="settings">{t("settings")}</h2>
              <form method="post" action={appPath(tenant.id, app.client_id)} novalidate>
                <CsrfField c={c} />
                <ProblemSummary problems={problems} heading={t("refused")} />
                <AppFormFields t={t} f={o.f ?? formOfClient(app)} problems={problems} current={app} />
                <div class="actions">
                  <button type="submit" class="primary">
                    {t("save")}
                  </button>
                </div>
              </form>
            </section>
            {proof === "secret" ? (
              <section aria-labelledby="secret">
                <h2 id="secret">{t("secret")}</h2>
                <p>{t("secretExplain")}</p>
                <p>
                  <a href={`${appPath(tenant.id, app.client_id)}/rotate-secret`}>{t("rotate")}…</a>
                </p>
              </section>
            ) : null}
            <section aria-labelledby="delete" class="danger">
              <h2 id="delete">{t("deleteSection")}</h2>
              <p>{t("deleteExplain")}</p>
              <p>
                <a href={`${appPath(tenant.id, app.client_id)}/delete`}>{t("deleteLink")}</a>
              </p>
            </section>
          </>
        )}
      </>
    ),
  });
}

/** The console's own client is shown, never changed: its page says so to any form. */
function refuseConsoleClient(c: Context<ConsoleEnv>, app: AppView): Response {
  return appPage(c, app, { status: 403, error: translate(words, c.get("locale"))("consoleClient") });
}

async function showApp(c: Context<ConsoleEnv>): Promise<Response> {
  const loaded = await loadApp(c);
  return "response" in loaded ? loaded.response : appPage(c, loaded.app);
}

async function saveApp(c: Context<ConsoleEnv>): Promise<Response> {
  const loaded = await loadApp(c);
  if ("response" in loaded) return loaded.response;
  const { app } = loaded;
  const tenant = c.get("tenant");
  if (isConsoleClient(tenant.id, app.client_id)) return refuseConsoleClient(c, app);
  const f = await formOfPost(c);
  const res = await adminCall(c, "PATCH", apiPath(tenant.id, app.client_id), patchBody(f, app));
  if (!res.ok) return appPage(c, app, { f, problems: problemsOf(res.error, FIELDS), status: 400 });
  return seeOther(appPath(tenant.id, app.client_id), "saved");
}

// ---- Confirmation steps: a new secret, deletion

function confirmPage(
  c: Context<ConsoleEnv>,
  app: AppView,
  o: { title: string; text: string; action: string; button: string; typed?: string; error?: string; status?: number },
): Response {
  const t = translate(words, c.get("locale"));
  const tenant = c.get("tenant");
  return renderPage(c, {
    title: o.title,
    section: "applications",
    status: o.status ?? 200,
    children: (
      <>
        <FormStyle c={c} />
        <form method="post" action={o.action}>
          <CsrfField c={c} />
          <p>{o.text}</p>
          {o.typed !== undefined ? (
            <Field
              name="confirm"
              label={t("deleteTyped", { name: app.client_name })}
              value={o.typed}
              problems={o.error ? [{ field: "confirm", message: o.error }] : []}
              required
            />
          ) : null}
          <div class="actions">
            <button type="submit" class="danger">
              {o.button}
            </button>
            <a href={appPath(tenant.id, app.client_id)}>{t("cancel")}</a>
          </div>
        </form>
      </>
    ),
  });
}

async function confirmRotate(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const loaded = await loadApp(c);
  if ("response" in loaded) return loaded.response;
  const { app } = loaded;
  if (isConsoleClient(c.get("tenant").id, app.client_id)) return refuseConsoleClient(c, app);
  return confirmPage(c, app, {
    title: t("rotateTitle", { name: app.client_name }),
    text: t("rotateWarning"),
    action: `${appPath(c.get("tenant").id, app.client_id)}/rotate-secret`,
    button: t("rotate"),
  });
}

async function rotate(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const loaded = await loadApp(c);
  if ("response" in loaded) return loaded.response;
  const tenant = c.get("tenant");
  if (isConsoleClient(tenant.id, loaded.app.client_id)) return refuseConsoleClient(c, loaded.app);
  const res = await adminCall<AppView & { client_secret: string }>(
    c,
    "POST",
    apiPath(tenant.id, loaded.app.client_id, "/rotate-secret"),
  );
  if (!res.ok) return appPage(c, loaded.app, { status: res.status, error: res.error });
  return renderPage(c, {
    title: t("rotatedTitle", { name: res.data.client_name }),
    section: "applications",
    notice: t("rotated"),
    children: (
      <>
        <FormStyle c={c} />
        <SecretShown t={t} app={res.data} />
        <p>
          <a href={appPath(tenant.id, res.data.client_id)}>{t("openApp")}</a>
        </p>
      </>
    ),
  });
}

async function confirmDelete(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const loaded = await loadApp(c);
  if ("response" in loaded) return loaded.response;
  const { app } = loaded;
  if (isConsoleClient(c.get("tenant").id, app.client_id)) return refuseConsoleClient(c, app);
  return confirmPage(c, app, {
    title: t("deleteTitle", { name: app.client_name }),
    text: t("deleteExplain"),
    action: `${appPath(c.get("tenant").id, app.client_id)}/delete`,
    button: t("deleteConfirm"),
    typed: "",
  });
}

async function remove(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const loaded = await loadApp(c);
  if ("response" in loaded) return loaded.response;
  const { app } = loaded;
  const tenant = c.get("tenant");
  if (isConsoleClient(tenant.id, app.client_id)) return refuseConsoleClient(c, app);
  const typed = (await posted(c)).text("confirm");
  if (typed !== app.client_name.trim())
    return confirmPage(c, app, {
      title: t("deleteTitle", { name: app.client_name }),
      text: t("deleteExplain"),
      action: `${appPath(tenant.id, app.client_id)}/delete`,
      button: t("deleteConfirm"),
      typed,
      error: t("deleteMismatch"),
      status: 400,
    });
  const res = await adminCall(c, "DELETE", apiPath(tenant.id, app.client_id));
  if (!res.ok) return appPage(c, app, { status: res.status, error: res.error });
  return seeOther(appsPath(tenant.id), "deleted");
}

export function registerApplicationPages(app: Hono<ConsoleEnv>): void {
  app.get("/t/:tenant/apps", listPage);
  app.get("/t/:tenant/apps/new", (c) => registerPage(c));
  app.post("/t/:tenant/apps/new", register);
  app.get("/t/:tenant/apps/:id", showApp);
  app.post("/t/:tenant/apps/:id", saveApp);
  app.get("/t/:tenant/apps/:id/rotate-secret", confirmRotate);
  app.post("/t/:tenant/apps/:id/rotate-secret", rotate);
  app.get("/t/:tenant/apps/:id/delete", confirmDelete);
  app.post("/t/:tenant/apps/:id/delete", remove);
}
