import type { Context, Hono } from "hono";
import type { Child } from "hono/jsx";
import { type Branding, brandingSchema, brandUrlProblem, lookOf } from "../../../../shared/branding/branding";
import { isLocale, LOCALES, type Locale, translator } from "../../../../shared/branding/i18n";
import { LOCALE_TAGS } from "../../../../shared/branding/i18n/locales";
import { DEFAULT_TENANT, issuerOf } from "../../../../shared/routing/tenant-route";
import { type TenantRow, tenantFromRow } from "../../../../shared/tenancy/tenants";
import type { ConsoleEnv } from "../env";
import { catalogue, formatNumber, formatTime, type Translate, translate } from "../i18n";
import { CsrfField, renderMessagePage, renderPage, tenantBase } from "../layout";
import { adminCall, seeOther, tenantApiPath } from "../operator";
import { FieldError, fieldErrors, PageStyle } from "./forms";

/**
 * A tenant's settings (issue 43, the "Settings" section of /console/t/{tenant}): its status (disable,
 * enable), its default language, its branding with a preview of its sign-in page, its signing keys
 * (rotate), its admin keys (mint, shown once; revoke) and its deletion with the purge's progress.
 * Every change is the admin API's (`adminCall`): `PATCH|DELETE /admin/v1/tenants/{id}`,
 * `POST .../keys/rotate`, `POST|DELETE .../admin-keys`, `GET /admin/v1/tenant-purges/{id}`. What
 * the API keeps to the platform token (a tenant's status, branding, language, deletion, admin keys)
 * a tenant operator sees, with why they cannot change it; the API refuses it them too.
 */

const words = catalogue({
  en: {
    settings: "Settings",
    overview: "Overview",
    branding: "Branding",
    keys: "Keys",
    deleteTab: "Delete",
    id: "Id",
    issuer: "Issuer",
    discovery: "Discovery document",
    status: "Status",
    created: "Created",
    active: "Active",
    disabled: "Disabled",
    statusActive: "People can sign in to this tenant's applications.",
    statusDisabled:
      "Every endpoint of this tenant answers 403 tenant_disabled: nobody can sign in and no token is issued. Its data is kept.",
    disable: "Disable…",
    enable: "Enable",
    disableTitle: "Disable {name}?",
    disableLead:
      "While it is disabled, every endpoint of {name} answers 403: nobody can sign in to its applications, no token is issued or refreshed. Its people, applications and keys are kept, and you can enable it again at any time.",
    disableConfirm: "Disable the tenant",
    cancel: "Cancel",
    language: "Language",
    languageLead:
      "The language of its sign-in pages and mail when the person's browser asks for none Keyway has (English, French and Arabic are available).",
    localeLabel: "Default language",
    deploymentDefault: "The deployment's default ({lang})",
    save: "Save",
    defaultIsConfig:
      "This is the deployment's own tenant: its name, status, branding and language are set by the deployment's variables (ISSUER_NAME, BRANDING, DEFAULT_LOCALE), not here.",
    platformOnly:
      "Changing a tenant's status, branding and language, its deletion and its admin keys take a deployment operator: the admin API keeps them to the platform token. You can see them here.",
    brandingLead:
      "What people see on this tenant's sign-in pages and in its mail. An application can override it with its own branding.",
    productLabel: "Product name",
    productHint: "Shown beside the logo and in mail; the tenant's name when empty.",
    logoLabel: "Logo URL",
    logoHint: "An https URL of an image on your own host, at most 512 characters.",
    colorLabel: "Primary colour",
    colorHint:
      "As #rrggbb: buttons, links and the focus ring. Text on it is made black or white, and links darker, until they are legible.",
    supportLabel: "Support link",
    supportHint: "An https page or mailto:help@example.com; shown under the sign-in form.",
    previewLocaleLabel: "Preview in",
    preview: "Preview",
    saveBranding: "Save branding",
    previewTitle: "Preview of the sign-in page",
    previewUnsaved: "Preview of the sign-in page with the values above, not saved yet",
    previewSummary:
      "The page shows {product}; buttons are {primary} with {on} text, links and the focus ring {accent}.",
    previewSupport: "A support link is shown under the form.",
    previewLogo: "The logo is loaded from {origin}.",
    notSaved: "Nothing was saved: {error}",
    signingKeys: "Signing keys",
    signingLead:
      "The keys that sign this tenant's ID tokens and access tokens, published at its JWKS. A rotation publishes new keys now; they start signing after a delay so that relying parties fetch them first, and the current keys keep verifying until they retire.",
    kid: "Key id",
    alg: "Algorithm",
    use: "State",
    signsNow: "Signs now",
    published: "Published (verifies)",
    rotate: "Rotate keys…",
    rotateTitle: "Rotate the signing keys of {name}?",
    rotateLead:
      "A new RS256 key and a new ES256 key are published now and sign after the publish delay; the keys signing now keep verifying tokens until they retire. Relying parties that cache the JWKS for longer than the delay may refuse tokens for a while.",
    rotateConfirm: "Rotate now",
    adminKeys: "Admin keys",
    adminKeysLead:
      "A tenant admin key opens this tenant's admin API routes only (Authorization: Bearer kwa_…). It is shown once, when it is made.",
    adminKeysDefault: "The deployment's own tenant has no admin keys: its admin API takes the platform token.",
    adminKeysPlatformOnly:
      "Only a deployment operator mints and revokes admin keys: a leaked tenant key must not be able to mint keys that outlive its own revocation.",
    noAdminKeys: "No admin key yet.",
    keyName: "Name",
    keyNameHint: "What the key is for, such as “CI deploys”.",
    mint: "Mint a key",
    revoked: "Revoked {time}",
    revoke: "Revoke…",
    inUse: "Active",
    newKey: "The new admin key {name}. Copy it now: it is not shown again.",
    newKeyLabel: "Admin key",
    revokeTitle: "Revoke the admin key {name}?",
    revokeLead: "Every call made with it is refused at once, everywhere. This cannot be undone.",
    revokeConfirm: "Revoke the key",
    deleteTitle: "Delete {name}",
    deleteLead:
      "Deleting a tenant cannot be undone. At once every endpoint of it answers 404 and every session, code and token it issued is refused; then its people, applications, keys, admin keys, webhooks, organizations and entities are deleted. Its id is never given to another tenant.",
    deleteTypeLabel: "Type the tenant's id, {id}, to confirm",
    deleteButton: "Delete this tenant and all its data",
    deleteMismatch: "The id typed does not match {id}: nothing was deleted.",
    purgeTitle: "Deleting {id}",
    purgeDone: "The tenant {id} and all its data are deleted.",
    purgeRunning:
      "The tenant no longer answers. Its data is being deleted; this page refreshes every 5 seconds. A purge cut short is finished by the 5-minute cron.",
    purgeProgress: "Tables emptied",
    purgeRemaining: "Rows left",
    purgeTable: "Table",
    refresh: "Refresh now",
    purgeContinue: "Continue the purge now",
    backToTenants: "Back to the tenants",
    notDeleted: "There is no deleted tenant {id}.",
    notice_created: "The tenant is created, with its first signing keys.",
    notice_disabled: "The tenant is disabled.",
    notice_enabled: "The tenant is enabled.",
    notice_language: "The default language is saved.",
    notice_branding: "The branding is saved; the sign-in pages show it now.",
    notice_rotated: "New signing keys are published.",
    notice_revoked: "The admin key is revoked.",
    failed: "The change was refused: {error}",
  },
  fr: {
    settings: "Réglages",
    overview: "Vue d’ensemble",
    branding: "Image de marque",
    keys: "Clés",
    deleteTab: "Suppression",
    id: "Identifiant",
    issuer: "Émetteur",
    discovery: "Document de découverte",
    status: "État",
    created: "Créé le",
    active: "Actif",
    disabled: "Désactivé",
    statusActive: "Les personnes peuvent se connecter aux applications de ce locataire.",
    statusDisabled:
      "Chaque point d’accès de ce locataire répond 403 tenant_disabled : personne ne peut se connecter et aucun jeton n’est émis. Ses données sont conservées.",
    disable: "Désactiver…",
    enable: "Activer",
    disableTitle: "Désactiver {name} ?",
    disableLead:
      "Tant qu’il est désactivé, chaque point d’accès de {name} répond 403 : personne ne peut se connecter à ses applications, aucun jeton n’est émis ni renouvelé. Ses personnes, applications et clés sont conservées, et vous pouvez le réactiver à tout moment.",
    disableConfirm: "Désactiver le locataire",
    cancel: "Annuler",
    language: "Langue",
    languageLead:
      "La langue de ses pages de connexion et de ses courriels quand le navigateur de la personne n’en demande aucune que Keyway connaît (anglais, français et arabe sont disponibles).",
    localeLabel: "Langue par défaut",
    deploymentDefault: "Celle du déploiement ({lang})",
    save: "Enregistrer",
    defaultIsConfig:
      "C’est le locataire du déploiement lui-même : son nom, son état, son image de marque et sa langue sont fixés par les variables du déploiement (ISSUER_NAME, BRANDING, DEFAULT_LOCALE), pas ici.",
    platformOnly:
      "Changer l’état, l’image de marque ou la langue d’un locataire, le supprimer et gérer ses clés d’administration demandent un opérateur du déploiement : l’API d’administration les réserve au jeton de la plateforme. Vous pouvez les consulter ici.",
    brandingLead:
      "Ce que les personnes voient sur les pages de connexion de ce locataire et dans ses courriels. Une application peut la remplacer par la sienne.",
    productLabel: "Nom du produit",
    productHint: "Affiché à côté du logo et dans les courriels ; le nom du locataire s’il est vide.",
    logoLabel: "URL du logo",
    logoHint: "Une URL https d’une image sur votre propre hôte, 512 caractères au plus.",
    colorLabel: "Couleur principale",
    colorHint:
      "Au format #rrggbb : boutons, liens et contour de focus. Le texte posé dessus devient noir ou blanc, et les liens plus foncés, jusqu’à être lisibles.",
    supportLabel: "Lien d’assistance",
    supportHint: "Une page https ou mailto:aide@example.com ; affiché sous le formulaire de connexion.",
    previewLocaleLabel: "Aperçu en",
    preview: "Aperçu",
    saveBranding: "Enregistrer l’image de marque",
    previewTitle: "Aperçu de la page de connexion",
    previewUnsaved: "Aperçu de la page de connexion avec les valeurs ci-dessus, pas encore enregistrées",
    previewSummary:
      "La page affiche {product} ; les boutons sont {primary} avec un texte {on}, les liens et le contour de focus {accent}.",
    previewSupport: "Un lien d’assistance est affiché sous le formulaire.",
    previewLogo: "Le logo est chargé depuis {origin}.",
    notSaved: "Rien n’a été enregistré : {error}",
    signingKeys: "Clés de signature",
    signingLead:
      "Les clés qui signent les jetons d’identité et d’accès de ce locataire, publiées dans son JWKS. Une rotation publie de nouvelles clés maintenant ; elles signent après un délai pour que les parties de confiance les récupèrent d’abord, et les clés actuelles continuent de vérifier jusqu’à leur retrait.",
    kid: "Identifiant de clé",
    alg: "Algorithme",
    use: "État",
    signsNow: "Signe maintenant",
    published: "Publiée (vérifie)",
    rotate: "Faire tourner les clés…",
    rotateTitle: "Faire tourner les clés de signature de {name} ?",
    rotateLead:
      "Une nouvelle clé RS256 et une nouvelle clé ES256 sont publiées maintenant et signent après le délai de publication ; les clés qui signent aujourd’hui continuent de vérifier les jetons jusqu’à leur retrait. Les parties de confiance qui gardent le JWKS en cache plus longtemps que ce délai peuvent refuser des jetons un moment.",
    rotateConfirm: "Faire tourner maintenant",
    adminKeys: "Clés d’administration",
    adminKeysLead:
      "Une clé d’administration de locataire n’ouvre que les routes d’administration de ce locataire (Authorization: Bearer kwa_…). Elle n’est montrée qu’une fois, à sa création.",
    adminKeysDefault:
      "Le locataire du déploiement n’a pas de clés d’administration : son API d’administration prend le jeton de la plateforme.",
    adminKeysPlatformOnly:
      "Seul un opérateur du déploiement crée et révoque les clés d’administration : une clé de locataire divulguée ne doit pas pouvoir créer des clés qui survivraient à sa propre révocation.",
    noAdminKeys: "Aucune clé d’administration pour l’instant.",
    keyName: "Nom",
    keyNameHint: "À quoi sert la clé, par exemple « Déploiements CI ».",
    mint: "Créer une clé",
    revoked: "Révoquée le {time}",
    revoke: "Révoquer…",
    inUse: "Active",
    newKey: "La nouvelle clé d’administration {name}. Copiez-la maintenant : elle ne sera plus montrée.",
    newKeyLabel: "Clé d’administration",
    revokeTitle: "Révoquer la clé d’administration {name} ?",
    revokeLead: "Chaque appel fait avec elle est refusé aussitôt, partout. C’est irréversible.",
    revokeConfirm: "Révoquer la clé",
    deleteTitle: "Supprimer {name}",
    deleteLead:
      "La suppression d’un locataire est irréversible. Aussitôt, chacun de ses points d’accès répond 404 et chaque session, code ou jeton qu’il a émis est refusé ; puis ses personnes, applications, clés, clés d’administration, webhooks, organisations et entités sont supprimées. Son identifiant n’est jamais redonné à un autre locataire.",
    deleteTypeLabel: "Saisissez l’identifiant du locataire, {id}, pour confirmer",
    deleteButton: "Supprimer ce locataire et toutes ses données",
    deleteMismatch: "L’identifiant saisi ne correspond pas à {id} : rien n’a été supprimé.",
    purgeTitle: "Suppression de {id}",
    purgeDone: "Le locataire {id} et toutes ses données sont supprimés.",
    purgeRunning:
      "Le locataire ne répond plus. Ses données sont en cours de suppression ; cette page se recharge toutes les 5 secondes. Une purge interrompue est terminée par la tâche planifiée toutes les 5 minutes.",
    purgeProgress: "Tables vidées",
    purgeRemaining: "Lignes restantes",
    purgeTable: "Table",
    refresh: "Actualiser maintenant",
    purgeContinue: "Poursuivre la purge maintenant",
    backToTenants: "Retour aux locataires",
    notDeleted: "Il n’y a pas de locataire supprimé {id}.",
    notice_created: "Le locataire est créé, avec ses premières clés de signature.",
    notice_disabled: "Le locataire est désactivé.",
    notice_enabled: "Le locataire est activé.",
    notice_language: "La langue par défaut est enregistrée.",
    notice_branding: "L’image de marque est enregistrée ; les pages de connexion l’affichent dès maintenant.",
    notice_rotated: "De nouvelles clés de signature sont publiées.",
    notice_revoked: "La clé d’administration est révoquée.",
    failed: "La modification a été refusée : {error}",
  },
  ar: {
    settings: "الإعدادات",
    overview: "نظرة عامة",
    branding: "الهوية البصرية",
    keys: "المفاتيح",
    deleteTab: "الحذف",
    id: "المعرّف",
    issuer: "المُصدِر",
    discovery: "مستند الاكتشاف",
    status: "الحالة",
    created: "أُنشئ في",
    active: "نشط",
    disabled: "معطّل",
    statusActive: "يمكن للأشخاص تسجيل الدخول إلى تطبيقات هذا المستأجر.",
    statusDisabled:
      "كل نقطة وصول لهذا المستأجر تجيب 403 tenant_disabled: لا يمكن لأحد تسجيل الدخول ولا يُصدر أي رمز. تبقى بياناته محفوظة.",
    disable: "تعطيل…",
    enable: "تفعيل",
    disableTitle: "تعطيل {name}؟",
    disableLead:
      "ما دام معطّلًا، تجيب كل نقطة وصول لـ {name} بالرمز 403: لا يمكن لأحد تسجيل الدخول إلى تطبيقاته، ولا يُصدر أي رمز ولا يُجدَّد. يبقى أشخاصه وتطبيقاته ومفاتيحه، ويمكنك تفعيله مجددًا في أي وقت.",
    disableConfirm: "تعطيل المستأجر",
    cancel: "إلغاء",
    language: "اللغة",
    languageLead:
      "لغة صفحات تسجيل الدخول ورسائله حين لا يطلب متصفح الشخص لغة يعرفها Keyway (الإنجليزية والفرنسية والعربية متاحة).",
    localeLabel: "اللغة الافتراضية",
    deploymentDefault: "اللغة الافتراضية للنشر ({lang})",
    save: "حفظ",
    defaultIsConfig:
      "هذا هو مستأجر النشر نفسه: اسمه وحالته وهويته البصرية ولغته تحددها متغيرات النشر (ISSUER_NAME وBRANDING وDEFAULT_LOCALE)، لا هذه الصفحة.",
    platformOnly:
      "تغيير حالة المستأجر وهويته البصرية ولغته، وحذفه، ومفاتيح إدارته، كلها تتطلب مشغّلًا للنشر: تحصرها واجهة الإدارة في رمز المنصة. يمكنك الاطلاع عليها هنا.",
    brandingLead:
      "ما يراه الأشخاص في صفحات تسجيل الدخول لهذا المستأجر وفي رسائله. يمكن لأي تطبيق أن يستبدلها بهويته الخاصة.",
    productLabel: "اسم المنتج",
    productHint: "يظهر بجانب الشعار وفي الرسائل؛ اسم المستأجر إن كان فارغًا.",
    logoLabel: "عنوان الشعار",
    logoHint: "عنوان https لصورة على نطاقك، 512 حرفًا على الأكثر.",
    colorLabel: "اللون الأساسي",
    colorHint:
      "بصيغة ‎#rrggbb‎: الأزرار والروابط وإطار التركيز. يصبح النص فوقه أسود أو أبيض، والروابط أغمق، حتى تكون مقروءة.",
    supportLabel: "رابط الدعم",
    supportHint: "صفحة https أو ‎mailto:help@example.com‎؛ يظهر تحت نموذج تسجيل الدخول.",
    previewLocaleLabel: "المعاينة باللغة",
    preview: "معاينة",
    saveBranding: "حفظ الهوية البصرية",
    previewTitle: "معاينة صفحة تسجيل الدخول",
    previewUnsaved: "معاينة صفحة تسجيل الدخول بالقيم أعلاه، غير محفوظة بعد",
    previewSummary: "تعرض الصفحة {product}؛ الأزرار باللون {primary} ونصها {on}، والروابط وإطار التركيز {accent}.",
    previewSupport: "يظهر رابط دعم تحت النموذج.",
    previewLogo: "يُحمَّل الشعار من {origin}.",
    notSaved: "لم يُحفظ شيء: {error}",
    signingKeys: "مفاتيح التوقيع",
    signingLead:
      "المفاتيح التي توقّع رموز الهوية ورموز الوصول لهذا المستأجر، منشورة في JWKS الخاص به. التدوير ينشر مفاتيح جديدة الآن؛ تبدأ التوقيع بعد مهلة حتى تجلبها الأطراف المعتمدة أولًا، وتستمر المفاتيح الحالية في التحقق حتى تتقاعد.",
    kid: "معرّف المفتاح",
    alg: "الخوارزمية",
    use: "الحالة",
    signsNow: "يوقّع الآن",
    published: "منشور (يتحقق)",
    rotate: "تدوير المفاتيح…",
    rotateTitle: "تدوير مفاتيح توقيع {name}؟",
    rotateLead:
      "يُنشر الآن مفتاح RS256 جديد ومفتاح ES256 جديد ويبدآن التوقيع بعد مهلة النشر؛ وتستمر المفاتيح الموقِّعة حاليًا في التحقق من الرموز حتى تتقاعد. الأطراف المعتمدة التي تخزّن JWKS مدة أطول من المهلة قد ترفض الرموز لبعض الوقت.",
    rotateConfirm: "التدوير الآن",
    adminKeys: "مفاتيح الإدارة",
    adminKeysLead:
      "مفتاح إدارة المستأجر يفتح مسارات واجهة الإدارة لهذا المستأجر فقط (Authorization: Bearer kwa_…). يُعرض مرة واحدة، عند إنشائه.",
    adminKeysDefault: "لا مفاتيح إدارة لمستأجر النشر نفسه: واجهة إدارته تأخذ رمز المنصة.",
    adminKeysPlatformOnly:
      "مشغّل النشر وحده ينشئ مفاتيح الإدارة ويلغيها: يجب ألا يتمكن مفتاح مستأجر مسرَّب من إنشاء مفاتيح تبقى بعد إلغائه.",
    noAdminKeys: "لا يوجد مفتاح إدارة بعد.",
    keyName: "الاسم",
    keyNameHint: "الغرض من المفتاح، مثل «نشر CI».",
    mint: "إنشاء مفتاح",
    revoked: "أُلغي في {time}",
    revoke: "إلغاء…",
    inUse: "نشط",
    newKey: "مفتاح الإدارة الجديد {name}. انسخه الآن: لن يُعرض مرة أخرى.",
    newKeyLabel: "مفتاح الإدارة",
    revokeTitle: "إلغاء مفتاح الإدارة {name}؟",
    revokeLead: "يُرفض كل طلب به فورًا وفي كل مكان. لا يمكن التراجع عن ذلك.",
    revokeConfirm: "إلغاء المفتاح",
    deleteTitle: "حذف {name}",
    deleteLead:
      "لا يمكن التراجع عن حذف المستأجر. فورًا تجيب كل نقطة وصول له بالرمز 404 ويُرفض كل جلسة ورمز أصدرها؛ ثم يُحذف أشخاصه وتطبيقاته ومفاتيحه ومفاتيح إدارته وخطافاته ومؤسساته وكياناته. لا يُعطى معرّفه لمستأجر آخر أبدًا.",
    deleteTypeLabel: "اكتب معرّف المستأجر، {id}، للتأكيد",
    deleteButton: "حذف هذا المستأجر وكل بياناته",
    deleteMismatch: "المعرّف المكتوب لا يطابق {id}: لم يُحذف شيء.",
    purgeTitle: "حذف {id}",
    purgeDone: "حُذف المستأجر {id} وكل بياناته.",
    purgeRunning:
      "لم يعد المستأجر يجيب. تُحذف بياناته الآن؛ تتحدّث هذه الصفحة كل 5 ثوانٍ. المهمة المجدولة كل 5 دقائق تُكمل أي حذف انقطع.",
    purgeProgress: "الجداول التي أُفرغت",
    purgeRemaining: "الصفوف المتبقية",
    purgeTable: "الجدول",
    refresh: "تحديث الآن",
    purgeContinue: "متابعة الحذف الآن",
    backToTenants: "العودة إلى المستأجرين",
    notDeleted: "لا يوجد مستأجر محذوف بالمعرّف {id}.",
    notice_created: "أُنشئ المستأجر مع أول مفاتيح توقيعه.",
    notice_disabled: "عُطّل المستأجر.",
    notice_enabled: "فُعّل المستأجر.",
    notice_language: "حُفظت اللغة الافتراضية.",
    notice_branding: "حُفظت الهوية البصرية؛ تعرضها صفحات تسجيل الدخول الآن.",
    notice_rotated: "نُشرت مفاتيح توقيع جديدة.",
    notice_revoked: "أُلغي مفتاح الإدارة.",
    failed: "رُفض التغيير: {error}",
  },
});
type Key = keyof (typeof words)["en"];

const NOTICES = ["created", "disabled", "enabled", "language", "branding", "rotated", "revoked"] as const;

/** The notice a redirect named (`?notice=`), translated; nothing for a name this page does not have. */
function noticeOf(c: Context<ConsoleEnv>, t: Translate<Key>): string | undefined {
  const n = c.req.query("notice");
  return NOTICES.find((k) => k === n) ? t(`notice_${n}` as Key) : undefined;
}

/** The tenant as these pages show it: the default tenant from the deployment's variables, another from D1. */
interface TenantView {
  id: string;
  name: string;
  status: string;
  issuer: string;
  branding: Branding;
  locale: Locale | null;
  created_at: number | null;
  isDefault: boolean;
}

async function tenantView(c: Context<ConsoleEnv>): Promise<TenantView> {
  const { id } = c.get("tenant");
  const config = c.get("config");
  const issuer = issuerOf(config, id);
  if (id === DEFAULT_TENANT)
    return {
      id,
      name: config.ISSUER_NAME,
      status: "active",
      issuer,
      branding: config.BRANDING,
      locale: config.DEFAULT_LOCALE,
      created_at: null,
      isDefault: true,
    };
  // A read, as requireTenant's: every change below is the admin API's.
  const row = await c.env.DB.prepare("SELECT * FROM tenants WHERE id = ? AND status != 'deleted'")
    .bind(id)
    .first<TenantRow>();
  const tenant = tenantFromRow(row as TenantRow);
  return {
    id,
    name: tenant.name,
    status: tenant.status,
    issuer,
    branding: tenant.settings.branding,
    locale: tenant.settings.locale ?? null,
    created_at: tenant.created_at,
    isDefault: false,
  };
}

/** Whether this operator may change the tenant's own record (a platform route), and if not, why. */
function changeable(c: Context<ConsoleEnv>, tenant: TenantView): { ok: boolean; why?: Key } {
  if (tenant.isDefault) return { ok: false, why: "defaultIsConfig" };
  if (c.get("operator").scope !== "all") return { ok: false, why: "platformOnly" };
  return { ok: true };
}

type Tab = "overview" | "branding" | "keys" | "delete";

/** A settings page: the section's own navigation, then the page. */
function settingsPage(
  c: Context<ConsoleEnv>,
  o: {
    tab: Tab;
    title: string;
    children: Child;
    notice?: string | undefined;
    error?: string | undefined;
    status?: number;
    imageOrigins?: string[];
    extraStyle?: string;
  },
): Response {
  const t = translate(words, c.get("locale"));
  const base = tenantBase(c.get("tenant").id);
  const tabs: [Tab, Key, string][] = [
    ["overview", "overview", base],
    ["branding", "branding", `${base}/branding`],
    ["keys", "keys", `${base}/keys`],
    ...(c.get("tenant").id === DEFAULT_TENANT ? [] : [["delete", "deleteTab", `${base}/delete`] as [Tab, Key, string]]),
  ];
  return renderPage(c, {
    title: o.title,
    section: "overview",
    notice: o.notice ?? noticeOf(c, t),
    error: o.error,
    status: o.status ?? 200,
    ...(o.imageOrigins ? { imageOrigins: o.imageOrigins } : {}),
    children: (
      <>
        <PageStyle c={c} extra={o.extraStyle} />
        <nav aria-label={t("settings")}>
          <ul class="plain actions">
            {tabs.map(([tab, key, href]) => (
              <li>
                <a href={href} aria-current={tab === o.tab ? "page" : undefined}>
                  {t(key)}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        {o.children}
      </>
    ),
  });
}

// ---- Overview: status and language.

async function overviewPage(c: Context<ConsoleEnv>, o: { error?: string; status?: number } = {}): Promise<Response> {
  const locale = c.get("locale");
  const t = translate(words, locale);
  const tenant = await tenantView(c);
  const can = changeable(c, tenant);
  const base = tenantBase(tenant.id);
  const deploymentLang = LOCALES[c.get("config").DEFAULT_LOCALE].name;
  return settingsPage(c, {
    tab: "overview",
    title: tenant.name,
    error: o.error,
    ...(o.status ? { status: o.status } : {}),
    children: (
      <>
        {can.why ? <p class="warn">{t(can.why)}</p> : null}
        <dl class="facts">
          <dt>{t("id")}</dt>
          <dd class="id">{tenant.id}</dd>
          <dt>{t("issuer")}</dt>
          <dd class="id">{tenant.issuer}</dd>
          <dt>{t("discovery")}</dt>
          <dd class="id">{`${tenant.issuer}/.well-known/openid-configuration`}</dd>
          {tenant.created_at ? (
            <>
              <dt>{t("created")}</dt>
              <dd>{formatTime(locale, tenant.created_at)}</dd>
            </>
          ) : null}
        </dl>
        <section aria-labelledby="status-heading">
          <h2 id="status-heading">{t("status")}</h2>
          <p>
            <span class={tenant.status === "active" ? "badge ok" : "badge off"}>
              {tenant.status === "active" ? t("active") : t("disabled")}
            </span>{" "}
            {tenant.status === "active" ? t("statusActive") : t("statusDisabled")}
          </p>
          {can.ok ? (
            tenant.status === "active" ? (
              <p>
                <a href={`${base}/status/disable`}>{t("disable")}</a>
              </p>
            ) : (
              <form method="post" action={`${base}/status`}>
                <CsrfField c={c} />
                <input type="hidden" name="status" value="active" />
                <button type="submit" class="primary">
                  {t("enable")}
                </button>
              </form>
            )
          ) : null}
        </section>
        <section aria-labelledby="language-heading">
          <h2 id="language-heading">{t("language")}</h2>
          <p>{t("languageLead")}</p>
          {can.ok ? (
            <form method="post" action={`${base}/language`}>
              <CsrfField c={c} />
              <label for="locale">{t("localeLabel")}</label>
              <div class="actions">
                <select id="locale" name="locale">
                  <option value="" selected={tenant.locale === null}>
                    {t("deploymentDefault", { lang: deploymentLang })}
                  </option>
                  {LOCALE_TAGS.map((tag) => (
                    <option value={tag} lang={tag} selected={tenant.locale === tag}>
                      {LOCALES[tag].name}
                    </option>
                  ))}
                </select>
                <button type="submit">{t("save")}</button>
              </div>
            </form>
          ) : (
            <p>
              {t("localeLabel")}:{" "}
              <strong>
                {tenant.locale ? LOCALES[tenant.locale].name : t("deploymentDefault", { lang: deploymentLang })}
              </strong>
            </p>
          )}
        </section>
      </>
    ),
  });
}

/** The refusal of a change the admin API answered with an error, shown on the page it came from. */
const refused = (c: Context<ConsoleEnv>, error: string | undefined, status: number) =>
  overviewPage(c, { error: translate(words, c.get("locale"))("failed", { error: error ?? String(status) }), status });

async function disablePage(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const tenant = await tenantView(c);
  const can = changeable(c, tenant);
  if (!can.ok) return overviewPage(c, { error: t(can.why as Key), status: 403 });
  const base = tenantBase(tenant.id);
  return settingsPage(c, {
    tab: "overview",
    title: t("disableTitle", { name: tenant.name }),
    children: (
      <form method="post" action={`${base}/status`}>
        <CsrfField c={c} />
        <p>{t("disableLead", { name: tenant.name })}</p>
        <input type="hidden" name="status" value="disabled" />
        <div class="actions">
          <button type="submit" class="danger">
            {t("disableConfirm")}
          </button>
          <a href={base}>{t("cancel")}</a>
        </div>
      </form>
    ),
  });
}

async function setStatus(c: Context<ConsoleEnv>): Promise<Response> {
  const form = await c.req.parseBody();
  const status = form.status === "disabled" ? "disabled" : "active";
  const id = c.get("tenant").id;
  const res = await adminCall(c, "PATCH", `/admin/v1/tenants/${encodeURIComponent(id)}`, { status });
  if (!res.ok) return refused(c, res.error, res.status);
  return seeOther(tenantBase(id), status === "disabled" ? "disabled" : "enabled");
}

async function setLanguage(c: Context<ConsoleEnv>): Promise<Response> {
  const form = await c.req.parseBody();
  const locale = typeof form.locale === "string" && form.locale ? form.locale : null;
  const id = c.get("tenant").id;
  const res = await adminCall(c, "PATCH", `/admin/v1/tenants/${encodeURIComponent(id)}`, { locale });
  if (!res.ok) return refused(c, res.error, res.status);
  return seeOther(tenantBase(id), "language");
}

// ---- Branding, with a preview of the sign-in page.

const BRAND_FIELDS = ["product_name", "logo_uri", "primary_color", "support_uri"] as const;
type BrandForm = Record<(typeof BRAND_FIELDS)[number], string>;

const formOf = (b: Branding): BrandForm => ({
  product_name: b.product_name ?? "",
  logo_uri: b.logo_uri ?? "",
  primary_color: b.primary_color ?? "",
  support_uri: b.support_uri ?? "",
});

/** The form's filled fields as a branding (empty ones are unset). */
const brandingOf = (f: BrandForm): Record<string, string> =>
  Object.fromEntries(Object.entries(f).filter(([, v]) => v !== ""));

/**
 * The preview's own styles: op-auth's login page (workers/op-auth/src/pages/layout.ts) in small,
 * under `.kw-preview`, with the look's colours (lookOf: the same computation the login page makes).
 */
const previewStyle = (look: { primary: string; onPrimary: string; accent: string }) => `
.kw-preview{--primary:${look.primary};--on-primary:${look.onPrimary};--accent:${look.accent};background:#f3f4f6;border-radius:12px;padding:20px 12px;display:flex;flex-direction:column;align-items:center;gap:12px;color:#1b1f24;border:1px solid #d1d5db}
.kw-card{width:min(100%,400px);background:#fff;border-radius:14px;padding:24px;box-shadow:0 1px 3px #0000001f,0 8px 24px #0000000d}
.kw-brand{display:flex;align-items:center;gap:10px;margin:0 0 16px;font-weight:600;color:#374151}
.kw-brand img{height:36px;width:auto;max-width:160px;object-fit:contain}
.kw-h{font-size:22px;line-height:1.3;margin:0 0 6px;font-weight:700;color:#1b1f24}
.kw-lead{margin:8px 0 14px;color:#4b5563}
.kw-label{display:block;font-weight:600;margin:14px 0 6px}
.kw-input{height:44px;border:1px solid #8a919c;border-radius:8px;background:#fff}
.kw-primary{display:block;margin-top:16px;padding:11px;border-radius:8px;background:var(--primary);color:var(--on-primary);font-weight:600;text-align:center}
.kw-link{display:inline-block;margin-top:12px;color:var(--accent);text-decoration:underline}
.kw-footer{font-size:14px;color:#374151;text-decoration:underline}`;

function Preview(props: {
  c: Context<ConsoleEnv>;
  tenant: TenantView;
  branding: Branding;
  lang: Locale;
  unsaved: boolean;
}) {
  const t = translate(words, props.c.get("locale"));
  const look = lookOf({ name: props.tenant.name, branding: props.branding });
  const tt = translator(props.lang);
  const logo = look.logoUri && brandUrlProblem(look.logoUri) === null ? look.logoUri : undefined;
  return (
    <figure aria-labelledby="preview-caption">
      <figcaption id="preview-caption">{props.unsaved ? t("previewUnsaved") : t("previewTitle")}</figcaption>
      {/* A picture of the page, not the page: hidden from assistive technology, described below. */}
      <div class="kw-preview" lang={props.lang} dir={tt.dir} aria-hidden="true">
        <div class="kw-card">
          <div class="kw-brand">
            {logo ? <img src={logo} alt="" height={36} /> : null}
            <span>{look.product}</span>
          </div>
          <p class="kw-h">{tt.text("login.heading", { app: look.app })}</p>
          <p class="kw-lead">{tt.text("login.lead")}</p>
          <span class="kw-label">{tt.text("login.email_label")}</span>
          <div class="kw-input" />
          <span class="kw-primary">{tt.text("login.submit")}</span>
          <span class="kw-link">{tt.text("login.cancel")}</span>
        </div>
        {look.supportUri ? <span class="kw-footer">{tt.text("page.support")}</span> : null}
      </div>
      <p class="hint">
        {/* Colours read left to right, a name in its own direction, inside any sentence (Unicode isolates). */}
        {t("previewSummary", {
          product: `\u2068${look.product}\u2069`,
          primary: `\u2066${look.primary}\u2069`,
          on: `\u2066${look.onPrimary}\u2069`,
          accent: `\u2066${look.accent}\u2069`,
        })}{" "}
        {look.supportUri ? t("previewSupport") : null}{" "}
        {logo ? t("previewLogo", { origin: new URL(logo).origin }) : null}
      </p>
    </figure>
  );
}

async function brandingPage(
  c: Context<ConsoleEnv>,
  o: { form?: BrandForm; lang?: Locale; error?: string; status?: number; unsaved?: boolean } = {},
): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const tenant = await tenantView(c);
  const can = changeable(c, tenant);
  const form = o.form ?? formOf(tenant.branding);
  const asked = c.req.query("preview");
  const lang: Locale = o.lang ?? (isLocale(asked) ? asked : (tenant.locale ?? c.get("config").DEFAULT_LOCALE));
  const invalid = fieldErrors(o.error, BRAND_FIELDS);
  // What the preview shows: each field that is valid (a bad one is shown under its field instead).
  const shown: Branding = {};
  for (const k of BRAND_FIELDS) {
    const one = brandingSchema.safeParse(form[k] ? { [k]: form[k] } : {});
    if (one.success && !invalid[k]) Object.assign(shown, one.data);
  }
  const look = lookOf({ name: tenant.name, branding: shown });
  const logoOrigin = look.logoUri && brandUrlProblem(look.logoUri) === null ? new URL(look.logoUri).origin : undefined;
  const base = tenantBase(tenant.id);
  const hints: Record<(typeof BRAND_FIELDS)[number], Key> = {
    product_name: "productHint",
    logo_uri: "logoHint",
    primary_color: "colorHint",
    support_uri: "supportHint",
  };
  const labels: Record<(typeof BRAND_FIELDS)[number], Key> = {
    product_name: "productLabel",
    logo_uri: "logoLabel",
    primary_color: "colorLabel",
    support_uri: "supportLabel",
  };
  return settingsPage(c, {
    tab: "branding",
    title: t("branding"),
    error: o.error ? t("notSaved", { error: o.error }) : undefined,
    ...(o.status ? { status: o.status } : {}),
    ...(logoOrigin ? { imageOrigins: [logoOrigin] } : {}),
    extraStyle: previewStyle(look),
    children: (
      <>
        {can.why ? <p class="warn">{t(can.why)}</p> : null}
        <p>{t("brandingLead")}</p>
        <div class="cards">
          <form method="post" action={`${base}/branding`} novalidate>
            <CsrfField c={c} />
            {BRAND_FIELDS.map((k) => (
              <>
                <label for={`brand-${k}`}>{t(labels[k])}</label>
                <input
                  id={`brand-${k}`}
                  name={k}
                  value={form[k]}
                  size={40}
                  dir={k === "product_name" ? undefined : "ltr"}
                  maxlength={k === "product_name" ? 100 : 512}
                  readonly={!can.ok}
                  aria-invalid={invalid[k] ? "true" : undefined}
                  aria-describedby={[`brand-${k}-hint`, invalid[k] ? `brand-${k}-error` : ""].join(" ").trim()}
                />
                <p class="hint" id={`brand-${k}-hint`}>
                  {t(hints[k])}
                </p>
                <FieldError id={`brand-${k}-error`} message={invalid[k]} />
              </>
            ))}
            <label for="preview-lang">{t("previewLocaleLabel")}</label>
            <select id="preview-lang" name="preview_locale">
              {LOCALE_TAGS.map((tag) => (
                <option value={tag} lang={tag} selected={lang === tag}>
                  {LOCALES[tag].name}
                </option>
              ))}
            </select>
            <div class="actions">
              <button type="submit" name="action" value="preview">
                {t("preview")}
              </button>
              {can.ok ? (
                <button type="submit" name="action" value="save" class="primary">
                  {t("saveBranding")}
                </button>
              ) : null}
            </div>
          </form>
          <Preview c={c} tenant={tenant} branding={shown} lang={lang} unsaved={o.unsaved === true} />
        </div>
      </>
    ),
  });
}

async function postBranding(c: Context<ConsoleEnv>): Promise<Response> {
  const body = await c.req.parseBody();
  const form = Object.fromEntries(
    BRAND_FIELDS.map((k) => [k, typeof body[k] === "string" ? (body[k] as string).trim() : ""]),
  ) as BrandForm;
  const lang = isLocale(body.preview_locale) ? body.preview_locale : undefined;
  const withLang = lang ? { lang } : {};
  if (body.action !== "save") {
    // A preview: the same schema the admin API validates with, nothing stored.
    const parsed = brandingSchema.safeParse(brandingOf(form));
    const error = parsed.success
      ? undefined
      : parsed.error.issues.map((i) => `${i.path.join(".") || "branding"}: ${i.message}`).join("; ");
    return brandingPage(c, { form, ...withLang, unsaved: true, ...(error ? { error, status: 400 } : {}) });
  }
  const id = c.get("tenant").id;
  const res = await adminCall(c, "PATCH", `/admin/v1/tenants/${encodeURIComponent(id)}`, {
    branding: brandingOf(form),
  });
  if (!res.ok) return brandingPage(c, { form, ...withLang, unsaved: true, error: res.error, status: res.status });
  return seeOther(`${tenantBase(id)}/branding${lang ? `?preview=${lang}` : ""}`, "branding");
}

// ---- Keys: signing keys (rotate) and admin keys (mint, revoke).

interface KeyList {
  signing: Record<string, string>;
  keys: { kid: string; alg: string }[];
}
interface AdminKey {
  id: string;
  name: string;
  created_at: number;
  revoked_at: number | null;
}

async function keysPage(
  c: Context<ConsoleEnv>,
  o: { minted?: { name: string; key: string }; error?: string; status?: number; keyName?: string } = {},
): Promise<Response> {
  const locale = c.get("locale");
  const t = translate(words, locale);
  const tenant = await tenantView(c);
  const can = changeable(c, tenant);
  const base = tenantBase(tenant.id);
  const [signing, admins] = await Promise.all([
    adminCall<KeyList>(c, "GET", tenantApiPath(tenant.id, "/keys")),
    tenant.isDefault ? null : adminCall<{ admin_keys: AdminKey[] }>(c, "GET", tenantApiPath(tenant.id, "/admin-keys")),
  ]);
  const signsNow = new Set(Object.values(signing.data?.signing ?? {}));
  const adminKeys = admins?.data?.admin_keys ?? [];
  const invalid = fieldErrors(o.error, ["name"] as const, "name");
  return settingsPage(c, {
    tab: "keys",
    title: t("keys"),
    error: o.error ? t("failed", { error: o.error }) : undefined,
    ...(o.status ? { status: o.status } : {}),
    children: (
      <>
        {o.minted ? (
          <section aria-labelledby="minted-heading" class="card">
            <h2 id="minted-heading">{t("newKey", { name: o.minted.name })}</h2>
            <label for="minted-key">{t("newKeyLabel")}</label>
            <input id="minted-key" class="secret" readonly value={o.minted.key} size={60} dir="ltr" />
          </section>
        ) : null}
        <section aria-labelledby="signing-heading">
          <h2 id="signing-heading">{t("signingKeys")}</h2>
          <p>{t("signingLead")}</p>
          <table>
            <caption class="sr-only">{t("signingKeys")}</caption>
            <thead>
              <tr>
                <th scope="col">{t("kid")}</th>
                <th scope="col">{t("alg")}</th>
                <th scope="col">{t("use")}</th>
              </tr>
            </thead>
            <tbody>
              {(signing.data?.keys ?? []).map((k) => (
                <tr>
                  <td class="id">{k.kid}</td>
                  <td>{k.alg}</td>
                  <td>{signsNow.has(k.kid) ? <strong>{t("signsNow")}</strong> : t("published")}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p>
            <a href={`${base}/keys/rotate`}>{t("rotate")}</a>
          </p>
        </section>
        <section aria-labelledby="admin-keys-heading">
          <h2 id="admin-keys-heading">{t("adminKeys")}</h2>
          {tenant.isDefault ? (
            <p>{t("adminKeysDefault")}</p>
          ) : (
            <>
              <p>{t("adminKeysLead")}</p>
              {adminKeys.length ? (
                <ul class="plain">
                  {adminKeys.map((k) => (
                    <li>
                      <bdi>{k.name}</bdi> <span class="id">{k.id}</span>{" "}
                      {k.revoked_at ? (
                        <span class="muted">{t("revoked", { time: formatTime(locale, k.revoked_at) })}</span>
                      ) : (
                        <>
                          <span class="badge ok">{t("inUse")}</span>{" "}
                          {can.ok ? (
                            <a
                              href={`${base}/admin-keys/${encodeURIComponent(k.id)}/revoke`}
                              aria-label={`${t("revoke")} ${k.name}`}
                            >
                              {t("revoke")}
                            </a>
                          ) : null}
                        </>
                      )}
                    </li>
                  ))}
                </ul>
              ) : (
                <p class="muted">{t("noAdminKeys")}</p>
              )}
              {can.ok ? (
                <form method="post" action={`${base}/admin-keys`}>
                  <CsrfField c={c} />
                  <label for="key-name">{t("keyName")}</label>
                  <div class="actions">
                    <input
                      id="key-name"
                      name="name"
                      required
                      maxlength={100}
                      value={o.keyName ?? ""}
                      aria-invalid={invalid.name ? "true" : undefined}
                      aria-describedby={`key-name-hint${invalid.name ? " key-name-error" : ""}`}
                    />
                    <button type="submit" class="primary">
                      {t("mint")}
                    </button>
                  </div>
                  <p class="hint" id="key-name-hint">
                    {t("keyNameHint")}
                  </p>
                  <FieldError id="key-name-error" message={invalid.name} />
                </form>
              ) : (
                <p class="warn">{t("adminKeysPlatformOnly")}</p>
              )}
            </>
          )}
        </section>
      </>
    ),
  });
}

async function rotatePage(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const tenant = c.get("tenant");
  const base = tenantBase(tenant.id);
  return settingsPage(c, {
    tab: "keys",
    title: t("rotateTitle", { name: tenant.name }),
    children: (
      <form method="post" action={`${base}/keys/rotate`}>
        <CsrfField c={c} />
        <p>{t("rotateLead")}</p>
        <div class="actions">
          <button type="submit" class="danger">
            {t("rotateConfirm")}
          </button>
          <a href={`${base}/keys`}>{t("cancel")}</a>
        </div>
      </form>
    ),
  });
}

async function rotate(c: Context<ConsoleEnv>): Promise<Response> {
  const id = c.get("tenant").id;
  const res = await adminCall(c, "POST", tenantApiPath(id, "/keys/rotate"));
  if (!res.ok) return keysPage(c, { error: res.error, status: res.status });
  return seeOther(`${tenantBase(id)}/keys`, "rotated");
}

/** `POST .../admin-keys`: the key is shown in this response only (no-store, never in a URL). */
async function mintAdminKey(c: Context<ConsoleEnv>): Promise<Response> {
  const body = await c.req.parseBody();
  const name = typeof body.name === "string" ? body.name.trim() : "";
  const id = c.get("tenant").id;
  if (id === DEFAULT_TENANT) return renderMessagePage(c, { kind: "notFound", status: 404 });
  const res = await adminCall<{ name: string; key: string }>(c, "POST", tenantApiPath(id, "/admin-keys"), { name });
  if (!res.ok) return keysPage(c, { error: res.error, status: res.status, keyName: name });
  return keysPage(c, { minted: { name: res.data.name, key: res.data.key } });
}

async function adminKeyOf(c: Context<ConsoleEnv>): Promise<AdminKey | undefined> {
  const list = await adminCall<{ admin_keys: AdminKey[] }>(c, "GET", tenantApiPath(c.get("tenant").id, "/admin-keys"));
  return list.data?.admin_keys?.find((k) => k.id === c.req.param("key") && !k.revoked_at);
}

async function revokePage(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const base = tenantBase(c.get("tenant").id);
  const key = c.get("tenant").id === DEFAULT_TENANT ? undefined : await adminKeyOf(c);
  if (!key) return renderMessagePage(c, { kind: "notFound", status: 404 });
  return settingsPage(c, {
    tab: "keys",
    title: t("revokeTitle", { name: key.name }),
    children: (
      <form method="post" action={`${base}/admin-keys/${encodeURIComponent(key.id)}/revoke`}>
        <CsrfField c={c} />
        <p>{t("revokeLead")}</p>
        <div class="actions">
          <button type="submit" class="danger">
            {t("revokeConfirm")}
          </button>
          <a href={`${base}/keys`}>{t("cancel")}</a>
        </div>
      </form>
    ),
  });
}

async function revokeAdminKey(c: Context<ConsoleEnv>): Promise<Response> {
  const id = c.get("tenant").id;
  if (id === DEFAULT_TENANT) return renderMessagePage(c, { kind: "notFound", status: 404 });
  const res = await adminCall(
    c,
    "DELETE",
    tenantApiPath(id, `/admin-keys/${encodeURIComponent(c.req.param("key") ?? "")}`),
  );
  if (!res.ok) return keysPage(c, { error: res.error, status: res.status });
  return seeOther(`${tenantBase(id)}/keys`, "revoked");
}

// ---- Deletion, and the purge's progress.

async function deletePage(c: Context<ConsoleEnv>, o: { error?: string; status?: number } = {}): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const tenant = await tenantView(c);
  const can = changeable(c, tenant);
  if (tenant.isDefault) return renderMessagePage(c, { kind: "notFound", status: 404 });
  const base = tenantBase(tenant.id);
  return settingsPage(c, {
    tab: "delete",
    title: t("deleteTitle", { name: tenant.name }),
    error: o.error,
    ...(o.status ? { status: o.status } : {}),
    children: (
      <>
        <p>{t("deleteLead")}</p>
        {can.ok ? (
          <form method="post" action={`${base}/delete`}>
            <CsrfField c={c} />
            <label for="confirm-id">{t("deleteTypeLabel", { id: tenant.id })}</label>
            <input
              id="confirm-id"
              name="confirm"
              required
              dir="ltr"
              autocomplete="off"
              spellcheck={false}
              aria-invalid={o.error ? "true" : undefined}
            />
            <div class="actions">
              <button type="submit" class="danger">
                {t("deleteButton")}
              </button>
              <a href={base}>{t("cancel")}</a>
            </div>
          </form>
        ) : (
          <p class="warn">{t("platformOnly")}</p>
        )}
      </>
    ),
  });
}

async function deleteTenant(c: Context<ConsoleEnv>): Promise<Response> {
  const t = translate(words, c.get("locale"));
  const id = c.get("tenant").id;
  const body = await c.req.parseBody();
  if (id === DEFAULT_TENANT) return renderMessagePage(c, { kind: "notFound", status: 404 });
  if (body.confirm !== id) return deletePage(c, { error: t("deleteMismatch", { id }), status: 400 });
  const res = await adminCall(c, "DELETE", `/admin/v1/tenants/${encodeURIComponent(id)}`);
  // A purge cut short (a limit hit) still left a tombstone: its page shows where it is.
  if (!res.ok && res.status !== 503 && res.status < 500)
    return deletePage(c, { error: t("failed", { error: res.error ?? String(res.status) }), status: res.status });
  return seeOther(`/console/purges/${encodeURIComponent(id)}`);
}

interface Purge {
  id: string;
  done: boolean;
  purged_at: number | null;
  deleted_at: number;
  remaining: Record<string, number>;
}

/** `GET /console/purges/{tenant}`: a deleted tenant's purge, refreshed every 5 s (a `Refresh` header, no script) until done. */
async function purgePage(c: Context<ConsoleEnv>): Promise<Response> {
  const locale = c.get("locale");
  const t = translate(words, locale);
  if (c.get("operator").scope !== "all") return renderMessagePage(c, { kind: "notYours", status: 403 });
  const id = c.req.param("tenant") ?? "";
  const res = await adminCall<Purge>(c, "GET", `/admin/v1/tenant-purges/${encodeURIComponent(id)}`);
  if (!res.ok)
    return renderPage(c, {
      title: t("purgeTitle", { id }),
      status: 404,
      children: (
        <p>
          {t("notDeleted", { id })} <a href="/console">{t("backToTenants")}</a>
        </p>
      ),
    });
  const purge = res.data;
  const tables = Object.entries(purge.remaining);
  const emptied = tables.filter(([, n]) => n === 0).length;
  const here = `/console/purges/${encodeURIComponent(id)}`;
  return renderPage(c, {
    title: t("purgeTitle", { id }),
    top: "tenants",
    ...(purge.done ? {} : { headers: { Refresh: "5" } }),
    children: (
      <>
        <PageStyle c={c} />
        <p role="status">{purge.done ? t("purgeDone", { id }) : t("purgeRunning")}</p>
        <label for="purge-progress">{t("purgeProgress")}</label>
        <progress id="purge-progress" max={tables.length} value={purge.done ? tables.length : emptied}>
          {`${emptied} / ${tables.length}`}
        </progress>
        <table class="numbers">
          <caption class="sr-only">{t("purgeRemaining")}</caption>
          <thead>
            <tr>
              <th scope="col">{t("purgeTable")}</th>
              <th scope="col" class="n">
                {t("purgeRemaining")}
              </th>
            </tr>
          </thead>
          <tbody>
            {tables.map(([table, n]) => (
              <tr>
                <td class="id">{table}</td>
                <td class="n">{formatNumber(locale, n)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <div class="actions">
          {purge.done ? (
            <a href={`/console?deleted=${encodeURIComponent(id)}`}>{t("backToTenants")}</a>
          ) : (
            <>
              <a href={here}>{t("refresh")}</a>
              <form method="post" action={here} class="inline">
                <CsrfField c={c} />
                <button type="submit">{t("purgeContinue")}</button>
              </form>
            </>
          )}
        </div>
      </>
    ),
  });
}

/** `POST /console/purges/{tenant}`: the DELETE again, which finishes a purge an earlier one did not. */
async function continuePurge(c: Context<ConsoleEnv>): Promise<Response> {
  if (c.get("operator").scope !== "all") return renderMessagePage(c, { kind: "notYours", status: 403 });
  const id = c.req.param("tenant") ?? "";
  await adminCall(c, "DELETE", `/admin/v1/tenants/${encodeURIComponent(id)}`);
  return seeOther(`/console/purges/${encodeURIComponent(id)}`);
}

export function registerTenantSettingsPages(app: Hono<ConsoleEnv>): void {
  app.get("/t/:tenant", (c) => overviewPage(c));
  app.get("/t/:tenant/status/disable", disablePage);
  app.post("/t/:tenant/status", setStatus);
  app.post("/t/:tenant/language", setLanguage);
  app.get("/t/:tenant/branding", (c) => brandingPage(c));
  app.post("/t/:tenant/branding", postBranding);
  app.get("/t/:tenant/keys", (c) => keysPage(c));
  app.get("/t/:tenant/keys/rotate", rotatePage);
  app.post("/t/:tenant/keys/rotate", rotate);
  app.post("/t/:tenant/admin-keys", mintAdminKey);
  app.get("/t/:tenant/admin-keys/:key/revoke", revokePage);
  app.post("/t/:tenant/admin-keys/:key/revoke", revokeAdminKey);
  app.get("/t/:tenant/delete", (c) => deletePage(c));
  app.post("/t/:tenant/delete", deleteTenant);
  app.get("/purges/:tenant", purgePage);
  app.post("/purges/:tenant", continuePurge);
}
