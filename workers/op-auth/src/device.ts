import type { Context } from "hono";
import type { DeviceView } from "../../../durable-objects/contract/verbs";
import { audit, loginRegion } from "../../shared/events/audit";
import { findClient } from "../../shared/oauth/clients";
import { deviceShardsToTry, formatUserCode, normalizeUserCode } from "../../shared/oauth/device";
import { OAuthError } from "../../shared/platform/errors";
import { cookieName, isForm, parseForm, readBodyText, setCookie } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { sourceKeyOf, takeIpQuota } from "../../shared/request/ip-quota";
import type { ShardRef } from "../../shared/routing/shard-refs";
import { shard } from "../../shared/routing/stores";
import { tenantScoped } from "../../shared/routing/tenant-route";
import { invalidRequestPage, pageError } from "./errors";
import { beginLoginTx } from "./login-tx";
import { deviceCodePage, deviceConsentPage } from "./pages/device";
import { emailStep } from "./pages/login";
import { messagePage } from "./pages/notices";
import { requestUi, txPageUi, txUiFor } from "./pages/ui";
import { type BrowserSession, currentSession, sessionStillStands, TX_COOKIE } from "./sessions";

/**
 * The verification page of the device authorization grant (RFC 8628 §3.3): `GET /device` (with
 * `?user_code=` from `verification_uri_complete`) and `POST /device`. A code that names a pending
 * request leads to the consent page, after a sign-in with an emailed code when the browser has no
 * live session (the login's `redirect_to` comes back here). Lookups are limited per address (the
 * Rate Limiting binding) and per shard and minute (the store), so user codes cannot be guessed.
 */
export async function devicePage(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  let typed: string | undefined;
  if (c.req.method === "POST") {
    if (!isForm(c.req.raw)) throw invalidRequestPage("the form must be form encoded");
    typed = parseForm(await readBodyText(c.req.raw)).user_code;
  } else typed = c.req.query("user_code");
  const ui = requestUi(c);
  if (typed === undefined || typed === "") return deviceCodePage(ui, {});
  const userCode = normalizeUserCode(typed);
  if (!userCode)
    return deviceCodePage(ui, {
      userCode: typed,
      message: { kind: "error", html: ui.t.html("device.not_a_code") },
      status: 400,
    });
  await deviceQuota(c);
  const found = await findPending(c, userCode);
  if (found.view.status === "throttled")
    throw pageError("err.too_many.title", "error.locked", {
      status: 429,
      code: "too_many_requests",
      retryAfter: found.view.retry_after,
    });
  if (found.view.status !== "pending")
    return deviceCodePage(ui, {
      userCode: formatUserCode(userCode),
      message: { kind: "error", html: ui.t.html("device.invalid") },
      status: 400,
    });
  const client = await findClient(c.env, config, found.view.client_id);
  if (!client) throw pageError("err.unknown_app.title", "err.unknown_app.message");
  const session = await liveSession(c, config);
  if (session)
    return deviceConsentPage(requestUi(c, { client }), {
      scope: found.view.scope,
      email: session.email,
      userCode: formatUserCode(userCode),
    });
  // Sign in first; the verified login comes back to this page with the code (authorize.ts).
  const now = Date.now();
  const txUi = txUiFor(c, client);
  const { tx, id } = await beginLoginTx(
    config,
    {
      client_id: client.client_id,
      redirect_uri: "",
      scope: found.view.scope,
      code_challenge: "",
      device_user_code: userCode,
    },
    now,
    c.get("region"),
    txUi,
    // A device login carries no organization claims: RFC 8628 has no parameter to choose one.
    null,
  );
  const cookie = setCookie(cookieName(TX_COOKIE, config), id, {
    secure: config.secureCookies,
    path: config.cookiePath,
    maxAge: config.POLICY.login_tx_ttl_seconds,
  });
  return emailStep(txPageUi(c, txUi), { tx, headers: { "Set-Cookie": cookie } });
}

/** `POST /device/decision`: the person allows or denies, from the consent page, signed in. */
export async function deviceDecision(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  // A cross-site form cannot carry the SameSite=Lax session cookie; a foreign Origin is refused as well.
  const origin = c.req.header("origin");
  if (origin !== undefined && origin !== new URL(config.ISSUER).origin)
    throw pageError("err.refused.title", "err.refused.cross_site", { status: 403, code: "forbidden" });
  if (!isForm(c.req.raw)) throw invalidRequestPage("the form must be form encoded");
  const form = parseForm(await readBodyText(c.req.raw));
  const userCode = normalizeUserCode(form.user_code);
  if (!userCode || (form.decision !== "approve" && form.decision !== "deny"))
    throw invalidRequestPage("the decision is incomplete");
  const session = await liveSession(c, config);
  if (!session) throw pageError("err.signed_out.title", "err.signed_out.device");
  await deviceQuota(c);
  const found = await findPending(c, userCode);
  if (found.view.status !== "pending" || !found.ref)
    throw pageError("err.code_expired.title", "err.code_expired.device");
  const approve = form.decision === "approve";
  const decided = await shard(c.env, "code", found.ref).decideDevice({
    userCode: tenantScoped(config, userCode),
    approvedBy: approve
      ? { sub: session.sub, email: session.email, sid: session.sid, auth_time: session.auth_time }
      : null,
    now: Date.now(),
  });
  if (!decided) throw pageError("err.code_expired.title", "err.code_expired.device");
  audit(
    c,
    { kind: "device_decision", user: session.sub, client: found.view.client_id, detail: { approved: approve } },
    loginRegion(c.get("config"), session.sid),
  );
  const ui = requestUi(c);
  return approve
    ? messagePage(ui, { title: "device.connected.title", message: "device.connected.message" })
    : messagePage(ui, { title: "device.denied.title", message: "device.denied.message" });
}

/** The per-address quota of device lookups, refused on a page (a person is reading), not as JSON. */
async function deviceQuota(c: Context<AppEnv>): Promise<void> {
  try {
    await takeIpQuota(c, "device");
  } catch (err) {
    if (!(err instanceof OAuthError) || err.options.page) throw err;
    throw pageError("err.too_many.title", "error.too_many_tries", {
      status: err.status,
      code: err.code,
      ...(err.options.retryAfter !== undefined ? { retryAfter: err.options.retryAfter } : {}),
    });
  }
}

async function findPending(c: Context<AppEnv>, userCode: string): Promise<{ view: DeviceView; ref?: ShardRef }> {
  const now = Date.now();
  const source = await sourceKeyOf(c);
  let view: DeviceView = { status: "unknown" };
  for (const ref of deviceShardsToTry(c.get("config"), userCode, now)) {
    // The store knows a code by its tenant too: another tenant's code is not found here (issue 23).
    view = await shard(c.env, "code", ref).findDevice(tenantScoped(c.get("config"), userCode), source, now);
    if (view.status !== "unknown") return { view, ref };
  }
  return { view };
}

/** The browser's session, if live and still standing (sessions.ts). */
async function liveSession(c: Context<AppEnv>, config: AppEnv["Variables"]["config"]): Promise<BrowserSession | null> {
  const session = await currentSession(c.env, config, c.req.raw);
  return session && (await sessionStillStands(c.env, config, session)) ? session : null;
}
