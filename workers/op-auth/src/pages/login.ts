import { escapeHtml } from "../../../shared/branding/html";
import { Html } from "../../../shared/branding/i18n/index";
import { clientLinks, clientLogo, hidden, isolated, messageRegion, type PageMessage, page, strongLtr } from "./layout";
import type { PageUi } from "./ui";

/**
 * The login's two pages: the address, then the code. Each posts a plain form (CONTRACT §2: the email
 * page has `name="email"` and a hidden `name="tx"`); the code page's script only runs the countdown.
 */

interface StepOptions {
  tx: string;
  message?: PageMessage;
  status?: number;
  headers?: Record<string, string>;
}

export function emailStep(ui: PageUi, o: StepOptions & { email?: string | undefined }) {
  const { t, look } = ui;
  const invalid = o.message?.kind === "error";
  return page(ui, {
    title: "login.title",
    status: o.status,
    headers: o.headers,
    body: `${clientLogo(ui)}<h1>${t.html("login.heading", { app: isolated(look.app) })}</h1>${clientLinks(ui)}
<p class="lead">${t.html("login.lead")}</p>${messageRegion(o.message)}
<form method="post" action="/email-code/generate">
<input type="hidden" name="tx" value="${escapeHtml(o.tx)}">
<label for="email">${t.html("login.email_label")}</label>
<input id="email" name="email" type="email" dir="ltr" autocomplete="username webauthn" autocapitalize="none" spellcheck="false" required autofocus maxlength="254"${
      o.email ? ` value="${escapeHtml(o.email)}"` : ""
    }${invalid ? ' aria-invalid="true" aria-describedby="msg"' : ""}>
<button class="primary" type="submit">${t.html("login.submit")}</button></form>${passkeyForm(ui, o.tx)}${cancelForm(ui, o.tx)}`,
    script: PASSKEY_SIGN_IN,
  });
}

/**
 * "Sign in with a passkey" (issue 42): shown by the script where the browser has WebAuthn (without
 * script the page is the email code's, as before). The assertion is posted as the form's `credential`.
 */
const passkeyForm = (ui: PageUi, tx: string) =>
  `<form id="passkey-form" method="post" action="/passkey/verify">${hidden("tx", tx)}${hidden("credential", "")}
<button id="passkey" class="secondary" type="button" hidden data-failed="${escapeHtml(ui.t.text("login.passkey_failed"))}">${ui.t.html("login.passkey")}</button></form>`;

/**
 * The email page's passkeys: autofill on the address field (conditional mediation) and the button.
 * The challenge is the transaction's (passkey-ceremony.ts signInChallenge: SHA-256 of
 * `webauthn.get:<tx id>`), the RP id the page's host; no request is made before the person chooses.
 * After a refusal (the page shows an error) autofill is not asked for again: the person chooses.
 */
const PASSKEY_SIGN_IN = `(()=>{const f=document.getElementById("passkey-form"),b=document.getElementById("passkey"),
m=document.getElementById("msg");if(!f||!b||!window.PublicKeyCredential||!window.crypto||!crypto.subtle)return;
const id=f.elements.tx.value.split(".")[0],e=u=>btoa(String.fromCharCode(...new Uint8Array(u))).replace(/\\+/g,"-").replace(/\\//g,"_").replace(/=+$/,"");
let ctl=null;const send=c=>{const r=c.response;f.elements.credential.value=JSON.stringify({id:c.id,rawId:e(c.rawId),type:c.type,
clientExtensionResults:{},response:{clientDataJSON:e(r.clientDataJSON),authenticatorData:e(r.authenticatorData),signature:e(r.signature),
userHandle:r.userHandle?e(r.userHandle):undefined}});f.submit()};
const fail=x=>{if(x&&x.name==="AbortError")return;const p=document.createElement("p");p.className="error";p.setAttribute("role","alert");
p.textContent=b.dataset.failed;m.replaceChildren(p)};
const get=async mediation=>{if(ctl)ctl.abort();ctl=new AbortController();
const challenge=new Uint8Array(await crypto.subtle.digest("SHA-256",new TextEncoder().encode("webauthn.get:"+id)));
const c=await navigator.credentials.get({mediation,signal:ctl.signal,publicKey:{challenge,rpId:location.hostname,userVerification:"required",timeout:300000}});
if(c)send(c)};b.hidden=false;b.addEventListener("click",()=>get("optional").catch(fail));
const cm=PublicKeyCredential.isConditionalMediationAvailable;if(cm&&!m.querySelector("[role=alert]"))cm.call(PublicKeyCredential).then(ok=>{if(ok)get("conditional").catch(()=>{})})})();`;

/** Declines the sign-in: the client hears `access_denied` (email-code.ts, cancelLogin). */
const cancelForm = (ui: PageUi, tx: string) =>
  `<form method="post" action="/email-code/cancel">${hidden("tx", tx)}<button class="link" type="submit">${ui.t.html("login.cancel")}</button></form>`;

export interface CodeStepOptions extends StepOptions {
  email: string;
  /** The code's lifetime, in seconds (the policy's). */
  codeTtlSeconds: number;
  /** When a new code may be asked for (ms since the epoch); the page counts down to it. */
  resendAt: number;
  now: number;
}

/** `m:ss`, the countdown's form in every language. */
const clock = (seconds: number) => `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;

export function codeStep(ui: PageUi, o: CodeStepOptions) {
  const { t, look } = ui;
  const invalid = o.message?.kind === "error";
  const wait = Math.max(0, Math.ceil((o.resendAt - o.now) / 1000));
  const minutes = Math.max(1, Math.round(o.codeTtlSeconds / 60));
  // Without script the button works at once (the store refuses an early resend, and says how long to
  // wait); with it, the button waits for the countdown.
  const waitNote = wait
    ? t.html("code.resend_wait", {
        time: new Html(`<time id="resend-time" datetime="PT${wait}S">${clock(wait)}</time>`),
      })
    : t.html("code.resend_ready");
  return page(ui, {
    title: "code.title",
    status: o.status,
    headers: o.headers,
    body: `${clientLogo(ui)}<h1>${t.html("code.heading")}</h1>
<p class="lead">${t.html("code.lead", { email: strongLtr(o.email), app: isolated(look.app) })}</p>${clientLinks(ui)}
<p class="muted">${t.html("code.lifetime", { n: minutes })}</p>${messageRegion(o.message)}
<form method="post" action="/email-code/verify">
${hidden("tx", o.tx)}${hidden("email", o.email)}${hidden("resend_at", String(o.resendAt))}
<label for="code">${t.html("code.label")}</label>
<input id="code" class="code" name="code" dir="ltr" inputmode="numeric" autocomplete="one-time-code" maxlength="20" required autofocus${
      invalid ? ' aria-invalid="true" aria-describedby="msg"' : ""
    }>
<button class="primary" type="submit">${t.html("code.submit")}</button></form>
<form method="post" action="/email-code/generate">
${hidden("tx", o.tx)}${hidden("email", o.email)}${hidden("resend", "1")}
<button id="resend" class="secondary" type="submit" aria-describedby="resend-note">${t.html("code.resend")}</button>
<p id="resend-note" class="muted" data-wait="${wait}" data-ready="${escapeHtml(t.text("code.resend_ready"))}">${waitNote}</p></form>
<form method="post" action="/email-code/restart">${hidden("tx", o.tx)}${hidden("email", o.email)}
<button class="link" type="submit">${t.html("code.another_address")}</button></form>${cancelForm(ui, o.tx)}`,
    script: wait ? COUNTDOWN : undefined,
  });
}

/**
 * The resend countdown, without a request: the button waits, the time counts down each second, and
 * when a new code may be asked for the message region says so (once, for screen readers).
 */
const COUNTDOWN = `(()=>{const n=document.getElementById("resend-note"),b=document.getElementById("resend"),
m=document.getElementById("msg"),tm=document.getElementById("resend-time");if(!n||!b||!tm)return;
const end=Date.now()+Number(n.dataset.wait)*1000;b.disabled=true;
const tick=()=>{const s=Math.ceil((end-Date.now())/1000);if(s>0){tm.textContent=Math.floor(s/60)+":"+String(s%60).padStart(2,"0");
tm.setAttribute("datetime","PT"+s+"S");setTimeout(tick,Math.min(1000,end-Date.now()-(s-1)*1000));return}
b.disabled=false;n.textContent=n.dataset.ready;const p=document.createElement("p");p.className="info";p.textContent=n.dataset.ready;m.appendChild(p)};
tick()})();`;
