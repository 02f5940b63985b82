import { escapeHtml } from "../../../shared/branding/html";
import { hidden, isolated, messageRegion, type PageMessage, page } from "./layout";
import type { PageUi } from "./ui";

/**
 * The offer to create a passkey after an email-code sign-in (issue 42): "Create a passkey" runs
 * WebAuthn's create() with the options the page carries and posts the result; "Not now" goes on
 * (and is remembered in this browser). Both continue the login where the code left it.
 */
export interface OfferOptions {
  /** The login transaction (`tx`) and the verified login (`done`, what `redirect_to` carries). */
  tx: string;
  done: string;
  /** PublicKeyCredentialCreationOptions as JSON, byte strings in base64url. */
  options: unknown;
  message?: PageMessage;
  status?: number;
  headers?: Record<string, string>;
}

export function passkeyOffer(ui: PageUi, o: OfferOptions) {
  const { t, look } = ui;
  return page(ui, {
    title: "passkey.title",
    status: o.status,
    headers: o.headers,
    body: `<h1>${t.html("passkey.heading")}</h1>
<p class="lead">${t.html("passkey.lead", { app: isolated(look.app) })}</p>${messageRegion(o.message)}
<form id="passkey-create" method="post" action="/passkey/register" data-options="${escapeHtml(JSON.stringify(o.options))}">
${hidden("tx", o.tx)}${hidden("done", o.done)}${hidden("credential", "")}
<button id="passkey" class="primary" type="button" data-failed="${escapeHtml(t.text("passkey.failed"))}">${t.html("passkey.create")}</button></form>
<noscript><p class="muted">${t.html("passkey.needs_script")}</p></noscript>
<form method="post" action="/passkey/later">${hidden("tx", o.tx)}${hidden("done", o.done)}
<button class="secondary" type="submit">${t.html("passkey.later")}</button></form>`,
    script: PASSKEY_CREATE,
  });
}

/** create() with the page's options; a browser without WebAuthn keeps only "Not now". */
const PASSKEY_CREATE = `(()=>{const f=document.getElementById("passkey-create"),b=document.getElementById("passkey"),
m=document.getElementById("msg");if(!f||!b)return;if(!window.PublicKeyCredential){b.hidden=true;return}
const o=JSON.parse(f.dataset.options),d=s=>Uint8Array.from(atob(s.replace(/-/g,"+").replace(/_/g,"/")),ch=>ch.charCodeAt(0)),
e=u=>btoa(String.fromCharCode(...new Uint8Array(u))).replace(/\\+/g,"-").replace(/\\//g,"_").replace(/=+$/,"");
b.addEventListener("click",async()=>{b.disabled=true;try{const c=await navigator.credentials.create({publicKey:{...o,
challenge:d(o.challenge),user:{...o.user,id:d(o.user.id)}}});const r=c.response;
f.elements.credential.value=JSON.stringify({id:c.id,rawId:e(c.rawId),type:c.type,clientExtensionResults:{},
response:{clientDataJSON:e(r.clientDataJSON),attestationObject:e(r.attestationObject),transports:r.getTransports?r.getTransports():[]}});
f.submit()}catch(x){b.disabled=false;const p=document.createElement("p");p.className="error";p.setAttribute("role","alert");
p.textContent=b.dataset.failed;m.replaceChildren(p)}})})();`;
