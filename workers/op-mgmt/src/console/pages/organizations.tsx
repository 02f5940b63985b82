import type { Context, Hono } from "hono";
import type { ConsoleEnv } from "../env";
import { catalogue, formatTime, translate } from "../i18n";
import { CsrfField, renderPage, tenantBase } from "../layout";
import { adminCall, seeOther, tenantApiPath } from "../operator";
import { type ApiUser, confirmPage, field, isAddress, noticeOf, seg, USER_ID, values, words } from "./people-common";

/**
 * Organizations (issue 43, CONTRACT §8, docs/organizations.md): list and create them; an
 * organization's page with its members and their roles (add by address or id, change roles,
 * remove); and the role template. "Role templates" are the API's own concept: the role template of
 * the built-in `organization` entity type (`GET|PATCH /admin/v1/entity-types/organization`), which
 * names the roles a member may hold and the permissions each gives.
 */

const strings = catalogue({
  en: {
    title: "Organizations",
    list: "Organizations of this tenant",
    none: "No organization yet.",
    name: "Name",
    id: "Id",
    externalId: "External id (optional)",
    externalIdShort: "External id",
    nextPage: "Next page",
    firstPage: "First page",
    create: "Create an organization",
    createButton: "Create",
    created: "Created",
    rolesLink: "Role template",
    members: "Members",
    noMembers: "No member yet.",
    member: "Member",
    rolesOf: "Roles of {who}",
    roles: "Roles",
    rolesHint: "Separated by commas or spaces.",
    rolesAny: "The role template is empty: any role name is taken, and gives no permission.",
    noRole: "No role",
    saveRoles: "Save roles",
    removeMember: "Remove from the organization…",
    addMember: "Add a member",
    who: "Address or user id",
    addButton: "Add",
    noSuchPerson: "No one in this tenant has this address or id.",
    removeMemberTitle: "Remove {who} from {org}?",
    removeMemberExplain:
      "Their next sign-in for this organization is refused, and so is the refresh of a sign-in made for it. The person stays.",
    removeMemberConfirm: "Remove the member",
    cancel: "Cancel",
    deleteTitle: "Delete this organization",
    deleteExplain:
      "Deletes the organization and every membership in it; sign-ins for it are refused from then on. This cannot be undone.",
    deleteLabel: "To confirm, type the organization’s name {name}",
    deleteButton: "Delete this organization",
    deleteMismatch: "The name typed does not match; nothing was deleted.",
    notFound: "There is no such organization in this tenant.",
    templateTitle: "Role template of organizations",
    templateExplain:
      "The roles a member of any organization may hold, and the permissions each gives. Members’ tokens carry their roles (org_roles). A change applies to memberships written from then on; existing ones keep the permissions they were given until their roles are saved again.",
    templateEmpty: "No role yet: any role name is taken, and gives no permission.",
    role: "Role",
    permissions: "Permissions",
    noPermission: "no permission",
    addRole: "Add or change a role",
    roleName: "Role name",
    roleNameHint: "1 to 64 letters, digits, _ . : -",
    rolePermissions: "Permissions (optional)",
    saveRole: "Save the role",
    removeRole: "Remove",
    removeRoleTitle: "Remove the role {role}?",
    removeRoleExplain:
      "Members who hold it keep it and its permissions until their roles are saved again; a new membership can no longer be given it.",
    removeRoleConfirm: "Remove the role",
    noSuchRole: "There is no such role in the template.",
    back: "All organizations",
    createdNotice: "The organization was created.",
    memberAdded: "The member was added.",
    memberUpdated: "The roles were saved.",
    memberRemoved: "The member was removed.",
    deleted: "The organization was deleted.",
    roleSaved: "The role was saved.",
    roleRemoved: "The role was removed.",
  },
  fr: {
    title: "Organisations",
    list: "Organisations de ce locataire",
    none: "Aucune organisation pour l’instant.",
    name: "Nom",
    id: "Identifiant",
    externalId: "Identifiant externe (facultatif)",
    externalIdShort: "Identifiant externe",
    nextPage: "Page suivante",
    firstPage: "Première page",
    create: "Créer une organisation",
    createButton: "Créer",
    created: "Créée",
    rolesLink: "Modèle de rôles",
    members: "Membres",
    noMembers: "Aucun membre pour l’instant.",
    member: "Membre",
    rolesOf: "Rôles de {who}",
    roles: "Rôles",
    rolesHint: "Séparés par des virgules ou des espaces.",
    rolesAny: "Le modèle de rôles est vide : tout nom de rôle est accepté et ne donne aucune permission.",
    noRole: "Aucun rôle",
    saveRoles: "Enregistrer les rôles",
    removeMember: "Retirer de l’organisation…",
    addMember: "Ajouter un membre",
    who: "Adresse ou identifiant",
    addButton: "Ajouter",
    noSuchPerson: "Personne dans ce locataire n’a cette adresse ou cet identifiant.",
    removeMemberTitle: "Retirer {who} de {org} ?",
    removeMemberExplain:
      "Sa prochaine connexion pour cette organisation est refusée, comme le rafraîchissement d’une connexion faite pour elle. La personne reste.",
    removeMemberConfirm: "Retirer le membre",
    cancel: "Annuler",
    deleteTitle: "Supprimer cette organisation",
    deleteExplain:
      "Supprime l’organisation et toutes ses adhésions ; les connexions pour elle sont ensuite refusées. C’est irréversible.",
    deleteLabel: "Pour confirmer, saisissez le nom de l’organisation {name}",
    deleteButton: "Supprimer cette organisation",
    deleteMismatch: "Le nom saisi ne correspond pas ; rien n’a été supprimé.",
    notFound: "Cette organisation n’existe pas dans ce locataire.",
    templateTitle: "Modèle de rôles des organisations",
    templateExplain:
      "Les rôles qu’un membre de toute organisation peut avoir, et les permissions que chacun donne. Les jetons des membres portent leurs rôles (org_roles). Un changement s’applique aux adhésions écrites ensuite ; les existantes gardent leurs permissions jusqu’à ce que leurs rôles soient enregistrés à nouveau.",
    templateEmpty: "Aucun rôle pour l’instant : tout nom de rôle est accepté et ne donne aucune permission.",
    role: "Rôle",
    permissions: "Permissions",
    noPermission: "aucune permission",
    addRole: "Ajouter ou modifier un rôle",
    roleName: "Nom du rôle",
    roleNameHint: "1 à 64 lettres, chiffres, _ . : -",
    rolePermissions: "Permissions (facultatif)",
    saveRole: "Enregistrer le rôle",
    removeRole: "Retirer",
    removeRoleTitle: "Retirer le rôle {role} ?",
    removeRoleExplain:
      "Les membres qui l’ont le gardent, avec ses permissions, jusqu’à ce que leurs rôles soient enregistrés à nouveau ; une nouvelle adhésion ne peut plus le recevoir.",
    removeRoleConfirm: "Retirer le rôle",
    noSuchRole: "Ce rôle n’existe pas dans le modèle.",
    back: "Toutes les organisations",
    createdNotice: "L’organisation a été créée.",
    memberAdded: "Le membre a été ajouté.",
    memberUpdated: "Les rôles ont été enregistrés.",
    memberRemoved: "Le membre a été retiré.",
    deleted: "L’organisation a été supprimée.",
    roleSaved: "Le rôle a été enregistré.",
    roleRemoved: "Le rôle a été retiré.",
  },
  ar: {
    title: "المؤسسات",
    list: "مؤسسات هذا المستأجر",
    none: "لا توجد مؤسسة بعد.",
    name: "الاسم",
    id: "المعرّف",
    externalId: "المعرّف الخارجي (اختياري)",
    externalIdShort: "المعرّف الخارجي",
    nextPage: "الصفحة التالية",
    firstPage: "الصفحة الأولى",
    create: "إنشاء مؤسسة",
    createButton: "أنشئ",
    created: "أُنشئت",
    rolesLink: "قالب الأدوار",
    members: "الأعضاء",
    noMembers: "لا يوجد عضو بعد.",
    member: "العضو",
    rolesOf: "أدوار {who}",
    roles: "الأدوار",
    rolesHint: "مفصولة بفواصل أو مسافات.",
    rolesAny: "قالب الأدوار فارغ: يُقبل أي اسم دور، ولا يمنح أي صلاحية.",
    noRole: "بلا دور",
    saveRoles: "احفظ الأدوار",
    removeMember: "إزالة من المؤسسة…",
    addMember: "إضافة عضو",
    who: "العنوان أو معرّف المستخدم",
    addButton: "أضف",
    noSuchPerson: "لا أحد في هذا المستأجر يملك هذا العنوان أو المعرّف.",
    removeMemberTitle: "إزالة {who} من {org}؟",
    removeMemberExplain: "يُرفض تسجيل دخوله التالي لهذه المؤسسة، وكذلك تحديث أي تسجيل دخول أُجري لها. يبقى الشخص موجودًا.",
    removeMemberConfirm: "إزالة العضو",
    cancel: "إلغاء",
    deleteTitle: "حذف هذه المؤسسة",
    deleteExplain: "يحذف المؤسسة وكل العضويات فيها؛ وتُرفض بعدها تسجيلات الدخول لها. لا يمكن التراجع عن ذلك.",
    deleteLabel: "للتأكيد، اكتب اسم المؤسسة {name}",
    deleteButton: "حذف هذه المؤسسة",
    deleteMismatch: "الاسم المكتوب غير مطابق؛ لم يُحذف شيء.",
    notFound: "لا توجد هذه المؤسسة في هذا المستأجر.",
    templateTitle: "قالب أدوار المؤسسات",
    templateExplain:
      "الأدوار التي يمكن لعضو أي مؤسسة أن يحملها، والصلاحيات التي يمنحها كل دور. تحمل رموز الأعضاء أدوارهم (org_roles). يسري التغيير على العضويات المكتوبة بعده؛ وتحتفظ العضويات الحالية بصلاحياتها حتى تُحفظ أدوارها من جديد.",
    templateEmpty: "لا يوجد دور بعد: يُقبل أي اسم دور، ولا يمنح أي صلاحية.",
    role: "الدور",
    permissions: "الصلاحيات",
    noPermission: "بلا صلاحية",
    addRole: "إضافة دور أو تغييره",
    roleName: "اسم الدور",
    roleNameHint: "من 1 إلى 64 من الحروف والأرقام و _ . : -",
    rolePermissions: "الصلاحيات (اختياري)",
    saveRole: "احفظ الدور",
    removeRole: "إزالة",
    removeRoleTitle: "إزالة الدور {role}؟",
    removeRoleExplain:
      "يحتفظ به الأعضاء الذين يحملونه، مع صلاحياته، حتى تُحفظ أدوارهم من جديد؛ ولا يمكن منحه لعضوية جديدة بعد الآن.",
    removeRoleConfirm: "إزالة الدور",
    noSuchRole: "لا يوجد هذا الدور في القالب.",
    back: "كل المؤسسات",
    createdNotice: "أُنشئت المؤسسة.",
    memberAdded: "أُضيف العضو.",
    memberUpdated: "حُفظت الأدوار.",
    memberRemoved: "أُزيل العضو.",
    deleted: "حُذفت المؤسسة.",
    roleSaved: "حُفظ الدور.",
    roleRemoved: "أُزيل الدور.",
  },
});

const NOTICES = [
  "createdNotice",
  "memberAdded",
  "memberUpdated",
  "memberRemoved",
  "deleted",
  "roleSaved",
  "roleRemoved",
] as const;
const PAGE = 50;

interface Organization {
  id: string;
  name: string;
  external_id: string | null;
  attributes: Record<string, unknown>;
  created_at: number;
}

interface Member {
  user_id: string;
  roles: string[];
  permissions: string[];
}

type Template = Record<string, { permissions: string[] }>;

const tr = (c: Context<ConsoleEnv>) => translate(strings, c.get("locale"));
const orgsBase = (c: Context<ConsoleEnv>) => `${tenantBase(c.get("tenant").id)}/orgs`;
const api = (c: Context<ConsoleEnv>, rest: string) => tenantApiPath(c.get("tenant").id, rest);

/** The organization type's role template (`{}`: any role name, no permission). */
async function template(c: Context<ConsoleEnv>): Promise<{ roles: Template; error?: string }> {
  const res = await adminCall<{ roles: Template }>(c, "GET", api(c, "/entity-types/organization"));
  return res.ok ? { roles: res.data.roles } : { roles: {}, ...(res.error ? { error: res.error } : {}) };
}

/** The roles field of a form: checkboxes of the template's roles, or one text field when it has none. */
function RolesField(props: {
  c: Context<ConsoleEnv>;
  id: string;
  legend: string;
  template: Template;
  roles: string[];
}) {
  const t = tr(props.c);
  const names = Object.keys(props.template);
  if (names.length === 0)
    return (
      <p>
        <label for={props.id}>{props.legend}</label>
        <input
          id={props.id}
          name="roles"
          type="text"
          value={props.roles.join(", ")}
          autocomplete="off"
          aria-describedby={`${props.id}-hint`}
          size={40}
        />
        <span id={`${props.id}-hint`} class="muted">
          {" "}
          {t("rolesHint")}
        </span>
      </p>
    );
  return (
    <fieldset>
      <legend>{props.legend}</legend>
      {names.map((role, i) => (
        <label for={`${props.id}-${i}`} class="check">
          <input
            id={`${props.id}-${i}`}
            type="checkbox"
            name="roles"
            value={role}
            checked={props.roles.includes(role)}
          />{" "}
          <code>{role}</code>
        </label>
      ))}
      {/* Roles a member holds that the template no longer lists: kept unless unticked. */}
      {props.roles
        .filter((r) => !names.includes(r))
        .map((role, i) => (
          <label for={`${props.id}-x${i}`} class="check">
            <input id={`${props.id}-x${i}`} type="checkbox" name="roles" value={role} checked /> <code>{role}</code>
          </label>
        ))}
    </fieldset>
  );
}

/** The roles posted: ticked boxes, or the words of the text field. */
const postedRoles = (form: Record<string, unknown>) => [...new Set(values(form, "roles").flatMap(words))];

const STYLE =
  "fieldset{border:1px solid #d1d5db;border-radius:8px;margin:8px 0}label.check{display:inline-block;font-weight:400;margin:4px 16px 4px 0}";

async function listPage(c: Context<ConsoleEnv>, o: { error?: string; status?: number; name?: string } = {}) {
  const t = tr(c);
  const cursor = c.req.query("cursor") ?? "";
  const res = await adminCall<{ entities: Organization[]; next: string | null }>(
    c,
    "GET",
    `${api(c, "/organizations")}?limit=${PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
  );
  const notice = noticeOf(c, NOTICES);
  const base = orgsBase(c);
  return renderPage(c, {
    title: t("title"),
    section: "organizations",
    status: o.status ?? (res.ok ? 200 : res.status),
    notice: notice ? t(notice) : undefined,
    error: o.error ?? (res.ok ? undefined : res.error),
    children: (
      <>
        <p>
          <a href={`${base}/roles`}>{t("rolesLink")}</a>
        </p>
        {res.ok ? (
          <section aria-labelledby="list">
            <h2 id="list">{t("list")}</h2>
            {res.data.entities.length ? (
              <ul class="plain">
                {res.data.entities.map((org) => (
                  <li>
                    <a href={`${base}/${seg(org.id)}`}>
                      <bdi>{org.name}</bdi>
                    </a>{" "}
                    <span class="id">{org.id}</span>
                    {org.external_id ? (
                      <>
                        {" "}
                        <span class="muted">
                          ({t("externalIdShort")}: <bdi>{org.external_id}</bdi>)
                        </span>
                      </>
                    ) : null}
                  </li>
                ))}
              </ul>
            ) : (
              <p>{t("none")}</p>
            )}
            <p>
              {cursor ? <a href={base}>{t("firstPage")}</a> : null}{" "}
              {res.data.next ? (
                <a href={`${base}?cursor=${encodeURIComponent(res.data.next)}`} rel="next">
                  {t("nextPage")}
                </a>
              ) : null}
            </p>
          </section>
        ) : null}
        <section aria-labelledby="create">
          <h2 id="create">{t("create")}</h2>
          <form method="post" action={base}>
            <CsrfField c={c} />
            <label for="org-name">{t("name")}</label>
            <input id="org-name" name="name" type="text" required maxlength={200} value={o.name ?? ""} size={40} />
            <label for="org-external">{t("externalId")}</label>
            <input id="org-external" name="external_id" type="text" maxlength={200} size={40} />
            <p>
              <button type="submit" class="primary">
                {t("createButton")}
              </button>
            </p>
          </form>
        </section>
      </>
    ),
  });
}

async function createOrganization(c: Context<ConsoleEnv>): Promise<Response> {
  const form = await c.req.parseBody({ all: true });
  const name = field(form, "name");
  const external = field(form, "external_id");
  const res = await adminCall<Organization>(c, "POST", api(c, "/organizations"), {
    name,
    ...(external ? { external_id: external } : {}),
  });
  if (!res.ok) return listPage(c, { error: res.error, status: res.status, name });
  return seeOther(`${orgsBase(c)}/${seg(res.data.id)}`, "createdNotice");
}

async function orgOr404(c: Context<ConsoleEnv>): Promise<Organization | Response> {
  const res = await adminCall<Organization>(c, "GET", api(c, `/organizations/${seg(c.req.param("org") ?? "")}`));
  if (res.ok) return res.data;
  const t = tr(c);
  return renderPage(c, {
    title: res.status === 404 ? t("notFound") : t("title"),
    section: "organizations",
    status: res.status,
    error: res.status === 404 ? undefined : res.error,
    children: (
      <p>
        <a href={orgsBase(c)}>{t("back")}</a>
      </p>
    ),
  });
}

/** An organization's page: its members with their roles, adding one, and deleting it. */
async function orgPage(c: Context<ConsoleEnv>, o: { error?: string; status?: number; who?: string } = {}) {
  const t = tr(c);
  const org = await orgOr404(c);
  if (org instanceof Response) return org;
  const after = c.req.query("after") ?? "";
  const [membersRes, tpl] = await Promise.all([
    adminCall<{ members: Member[]; next: string | null }>(
      c,
      "GET",
      `${api(c, `/organizations/${seg(org.id)}/members`)}?limit=${PAGE}${after ? `&after=${encodeURIComponent(after)}` : ""}`,
    ),
    template(c),
  ]);
  const members = membersRes.ok ? membersRes.data.members : [];
  // Their addresses, in one call (`GET /users?ids=`).
  const emails = new Map<string, string>();
  if (members.length) {
    const res = await adminCall<{ users: ApiUser[] }>(
      c,
      "GET",
      `${api(c, "/users")}?ids=${members.map((m) => encodeURIComponent(m.user_id)).join(",")}`,
    );
    if (res.ok) for (const u of res.data.users) emails.set(u.id, u.email);
  }
  const base = `${orgsBase(c)}/${seg(org.id)}`;
  const peopleBase = `${tenantBase(c.get("tenant").id)}/people`;
  const notice = noticeOf(c, NOTICES);
  const nonce = c.get("nonce");
  return renderPage(c, {
    title: org.name,
    section: "organizations",
    status: o.status ?? 200,
    notice: notice ? t(notice) : undefined,
    error: o.error ?? (membersRes.ok ? tpl.error : membersRes.error),
    children: (
      <>
        <style nonce={nonce}>{STYLE}</style>
        <dl>
          <dt>{t("id")}</dt>
          <dd class="id">{org.id}</dd>
          {org.external_id ? (
            <>
              <dt>{t("externalIdShort")}</dt>
              <dd>
                <bdi>{org.external_id}</bdi>
              </dd>
            </>
          ) : null}
          <dt>{t("created")}</dt>
          <dd>{formatTime(c.get("locale"), org.created_at)}</dd>
        </dl>
        <section aria-labelledby="members">
          <h2 id="members">{t("members")}</h2>
          {Object.keys(tpl.roles).length === 0 ? <p class="muted">{t("rolesAny")}</p> : null}
          {members.length ? (
            <ul class="plain">
              {members.map((m, i) => {
                const who = emails.get(m.user_id) ?? m.user_id;
                return (
                  <li>
                    <a href={`${peopleBase}/${seg(m.user_id)}`} id={`member-${i}`}>
                      <bdi>{who}</bdi>
                    </a>{" "}
                    <span class="id">{m.user_id}</span>
                    <form method="post" action={`${base}/members/${seg(m.user_id)}`}>
                      <CsrfField c={c} />
                      <RolesField
                        c={c}
                        id={`roles-${i}`}
                        legend={t("rolesOf", { who })}
                        template={tpl.roles}
                        roles={m.roles}
                      />
                      <button type="submit">{t("saveRoles")}</button>{" "}
                      <a href={`${base}/members/${seg(m.user_id)}/remove`} aria-describedby={`member-${i}`}>
                        {t("removeMember")}
                      </a>
                    </form>
                  </li>
                );
              })}
            </ul>
          ) : (
            <p>{t("noMembers")}</p>
          )}
          <p>
            {after ? <a href={base}>{t("firstPage")}</a> : null}{" "}
            {membersRes.ok && membersRes.data.next ? (
              <a href={`${base}?after=${encodeURIComponent(membersRes.data.next)}`} rel="next">
                {t("nextPage")}
              </a>
            ) : null}
          </p>
        </section>
        <section aria-labelledby="add">
          <h2 id="add">{t("addMember")}</h2>
          <form method="post" action={`${base}/members`}>
            <CsrfField c={c} />
            <label for="member-who">{t("who")}</label>
            <input id="member-who" name="who" type="text" required autocomplete="off" value={o.who ?? ""} size={40} />
            <RolesField c={c} id="member-roles" legend={t("roles")} template={tpl.roles} roles={[]} />
            <button type="submit" class="primary">
              {t("addButton")}
            </button>
          </form>
        </section>
        <section aria-labelledby="delete">
          <h2 id="delete">{t("deleteTitle")}</h2>
          <p>{t("deleteExplain")}</p>
          <form method="post" action={`${base}/delete`}>
            <CsrfField c={c} />
            <label for="confirm-delete">{t("deleteLabel", { name: org.name })}</label>
            <input id="confirm-delete" name="confirm" type="text" autocomplete="off" required size={40} />{" "}
            <button type="submit" class="danger">
              {t("deleteButton")}
            </button>
          </form>
        </section>
        <p>
          <a href={orgsBase(c)}>{t("back")}</a>
        </p>
      </>
    ),
  });
}

/** Adds a member by address (looked up through the API) or user id, with the roles ticked or typed. */
async function addMember(c: Context<ConsoleEnv>): Promise<Response> {
  const t = tr(c);
  const org = c.req.param("org") ?? "";
  const form = await c.req.parseBody({ all: true });
  const who = field(form, "who");
  let userId: string | undefined;
  if (isAddress(who)) {
    const res = await adminCall<{ users: ApiUser[] }>(c, "GET", `${api(c, "/users")}?email=${encodeURIComponent(who)}`);
    if (!res.ok) return orgPage(c, { error: res.error, status: res.status, who });
    userId = res.data.users[0]?.id;
  } else if (USER_ID.test(who)) userId = who;
  if (!userId) return orgPage(c, { error: t("noSuchPerson"), status: 404, who });
  const res = await adminCall(c, "POST", api(c, `/organizations/${seg(org)}/members`), {
    user_id: userId,
    roles: postedRoles(form),
  });
  if (!res.ok)
    return orgPage(c, { error: res.status === 404 ? t("noSuchPerson") : res.error, status: res.status, who });
  return seeOther(`${orgsBase(c)}/${seg(org)}`, "memberAdded");
}

/** Sets a member's roles (the API's add-member call on an existing member replaces them). */
async function setRoles(c: Context<ConsoleEnv>): Promise<Response> {
  const org = c.req.param("org") ?? "";
  const form = await c.req.parseBody({ all: true });
  const res = await adminCall(c, "POST", api(c, `/organizations/${seg(org)}/members`), {
    user_id: c.req.param("user") ?? "",
    roles: postedRoles(form),
  });
  if (!res.ok) return orgPage(c, { error: res.error, status: res.status });
  return seeOther(`${orgsBase(c)}/${seg(org)}`, "memberUpdated");
}

async function removeMemberConfirm(c: Context<ConsoleEnv>): Promise<Response> {
  const t = tr(c);
  const org = await orgOr404(c);
  if (org instanceof Response) return org;
  const user = c.req.param("user") ?? "";
  const res = await adminCall<ApiUser>(c, "GET", api(c, `/users/${seg(user)}`));
  const base = `${orgsBase(c)}/${seg(org.id)}`;
  return confirmPage(c, {
    title: t("removeMemberTitle", { who: res.ok ? res.data.email : user, org: org.name }),
    section: "organizations",
    explain: t("removeMemberExplain"),
    action: `${base}/members/${seg(user)}/remove`,
    confirm: t("removeMemberConfirm"),
    cancel: t("cancel"),
    back: base,
  });
}

async function removeMember(c: Context<ConsoleEnv>): Promise<Response> {
  const org = c.req.param("org") ?? "";
  const res = await adminCall(
    c,
    "DELETE",
    api(c, `/organizations/${seg(org)}/members/${seg(c.req.param("user") ?? "")}`),
  );
  if (!res.ok) return orgPage(c, { error: res.error, status: res.status });
  return seeOther(`${orgsBase(c)}/${seg(org)}`, "memberRemoved");
}

/** Deleting takes the organization's name typed again. */
async function deleteOrganization(c: Context<ConsoleEnv>): Promise<Response> {
  const t = tr(c);
  const org = await orgOr404(c);
  if (org instanceof Response) return org;
  const form = await c.req.parseBody({ all: true });
  if (field(form, "confirm") !== org.name.trim()) return orgPage(c, { error: t("deleteMismatch"), status: 400 });
  const res = await adminCall(c, "DELETE", api(c, `/organizations/${seg(org.id)}`));
  if (!res.ok) return orgPage(c, { error: res.error, status: res.status });
  return seeOther(orgsBase(c), "deleted");
}

// ---- The role template.

async function rolesPage(c: Context<ConsoleEnv>, o: { error?: string; status?: number } = {}): Promise<Response> {
  const t = tr(c);
  const tpl = await template(c);
  const notice = noticeOf(c, NOTICES);
  const base = `${orgsBase(c)}/roles`;
  const roles = Object.entries(tpl.roles);
  return renderPage(c, {
    title: t("templateTitle"),
    section: "organizations",
    status: o.status ?? 200,
    notice: notice ? t(notice) : undefined,
    error: o.error ?? tpl.error,
    children: (
      <>
        <p>{t("templateExplain")}</p>
        {roles.length ? (
          <table>
            <thead>
              <tr>
                <th scope="col">{t("role")}</th>
                <th scope="col">{t("permissions")}</th>
                <th scope="col">
                  <span class="muted">{t("removeRole")}</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {roles.map(([role, { permissions }], i) => (
                <tr>
                  <td>
                    <code id={`role-${i}`}>{role}</code>
                  </td>
                  <td>{permissions.length ? <code>{permissions.join(" ")}</code> : t("noPermission")}</td>
                  <td>
                    <a href={`${base}/${seg(role)}/remove`} aria-describedby={`role-${i}`}>
                      {t("removeRole")}
                    </a>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <p>{t("templateEmpty")}</p>
        )}
        <section aria-labelledby="add-role">
          <h2 id="add-role">{t("addRole")}</h2>
          <form method="post" action={base}>
            <CsrfField c={c} />
            <label for="role-name">{t("roleName")}</label>
            <input
              id="role-name"
              name="role"
              type="text"
              required
              pattern="[A-Za-z0-9_.:\-]{1,64}"
              aria-describedby="role-name-hint"
              autocomplete="off"
            />
            <span id="role-name-hint" class="muted">
              {" "}
              {t("roleNameHint")}
            </span>
            <label for="role-permissions">{t("rolePermissions")}</label>
            <input
              id="role-permissions"
              name="permissions"
              type="text"
              autocomplete="off"
              aria-describedby="role-permissions-hint"
              size={60}
            />
            <span id="role-permissions-hint" class="muted">
              {" "}
              {t("rolesHint")}
            </span>
            <p>
              <button type="submit" class="primary">
                {t("saveRole")}
              </button>
            </p>
          </form>
        </section>
        <p>
          <a href={orgsBase(c)}>{t("back")}</a>
        </p>
      </>
    ),
  });
}

/** Adds or replaces one role: the whole template written back through `PATCH /entity-types/organization`. */
async function saveRole(c: Context<ConsoleEnv>): Promise<Response> {
  const form = await c.req.parseBody({ all: true });
  const role = field(form, "role");
  const tpl = await template(c);
  if (tpl.error) return rolesPage(c, { error: tpl.error, status: 503 });
  const res = await adminCall(c, "PATCH", api(c, "/entity-types/organization"), {
    roles: { ...tpl.roles, [role]: { permissions: words(field(form, "permissions")) } },
  });
  if (!res.ok) return rolesPage(c, { error: res.error, status: res.status });
  return seeOther(`${orgsBase(c)}/roles`, "roleSaved");
}

async function removeRoleConfirm(c: Context<ConsoleEnv>): Promise<Response> {
  const t = tr(c);
  const role = c.req.param("role") ?? "";
  const tpl = await template(c);
  if (!Object.hasOwn(tpl.roles, role)) return rolesPage(c, { error: t("noSuchRole"), status: 404 });
  const base = `${orgsBase(c)}/roles`;
  return confirmPage(c, {
    title: t("removeRoleTitle", { role }),
    section: "organizations",
    explain: t("removeRoleExplain"),
    action: `${base}/${seg(role)}/remove`,
    confirm: t("removeRoleConfirm"),
    cancel: t("cancel"),
    back: base,
  });
}

async function removeRole(c: Context<ConsoleEnv>): Promise<Response> {
  const t = tr(c);
  const role = c.req.param("role") ?? "";
  const tpl = await template(c);
  if (!Object.hasOwn(tpl.roles, role)) return rolesPage(c, { error: t("noSuchRole"), status: 404 });
  const { [role]: _, ...rest } = tpl.roles;
  const res = await adminCall(c, "PATCH", api(c, "/entity-types/organization"), { roles: rest });
  if (!res.ok) return rolesPage(c, { error: res.error, status: res.status });
  return seeOther(`${orgsBase(c)}/roles`, "roleRemoved");
}

export function registerOrganizationPages(app: Hono<ConsoleEnv>): void {
  const at = "/t/:tenant/orgs";
  app.get(at, (c) => listPage(c));
  app.post(at, createOrganization);
  app.get(`${at}/roles`, (c) => rolesPage(c));
  app.post(`${at}/roles`, saveRole);
  app.get(`${at}/roles/:role/remove`, removeRoleConfirm);
  app.post(`${at}/roles/:role/remove`, removeRole);
  app.get(`${at}/:org`, (c) => orgPage(c));
  app.post(`${at}/:org/members`, addMember);
  app.post(`${at}/:org/members/:user`, setRoles);
  app.get(`${at}/:org/members/:user/remove`, removeMemberConfirm);
  app.post(`${at}/:org/members/:user/remove`, removeMember);
  app.post(`${at}/:org/delete`, deleteOrganization);
}
