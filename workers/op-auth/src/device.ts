import type { Context } from "hono";
import type { DeviceView } from "../../../durable-objects/contract";
import type { AppEnv } from "../../shared/app";
import { audit, loginRegion } from "../../shared/audit";
import { findClient } from "../../shared/clients";
import { deviceShardsToTry, formatUserCode, normalizeUserCode } from "../../shared/device";
import { OAuthError } from "../../shared/errors";
import { cookieName, isForm, parseForm, readBodyText, setCookie } from "../../shared/http";
import { sourceKeyOf, takeIpQuota } from "../../shared/ip-quota";
import type { ShardRef } from "../../shared/router";
import { tenantScoped } from "../../shared/router";
import { shard } from "../../shared/stores";
import { pageError } from "./errors";
import { deviceCodePage, deviceConsentPage, emailStep, messagePage } from "./login-page";
import { beginLoginTx } from "./login-tx";
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
    if (!isForm(c.req.raw)) throw pageError("Invalid request", "The form must be form encoded.");
    typed = parseForm(await readBodyText(c.req.raw)).user_code;
  } else typed = c.req.query("user_code");
  if (typed === undefined || typed === "") return deviceCodePage({ issuerName: config.ISSUER_NAME });
  const userCode = normalizeUserCode(typed);
  if (!userCode)
    return deviceCodePage({
      issuerName: config.ISSUER_NAME,
      userCode: typed,
      error: "That is not a device code.",
      status: 400,
    });
  await deviceQuota(c);
  const found = await findPending(c, userCode);
  if (found.view.status === "throttled")
    throw pageError("Too many attempts", "Too many wrong codes were tried. Wait a minute and try again.", {
      status: 429,
      code: "too_many_requests",
      retryAfter: found.view.retry_after,
    });
  if (found.view.status !== "pending")
    return deviceCodePage({
      issuerName: config.ISSUER_NAME,
      userCode: formatUserCode(userCode),
      error: "That code is not valid, or has expired. Check your device.",
      status: 400,
    });
  const client = await findClient(c.env, config, found.view.client_id);
  if (!client) throw pageError("Unknown application", "The application that asked is no longer registered.");
  const session = await liveSession(c, config);
  if (session)
    return deviceConsentPage({
      issuerName: config.ISSUER_NAME,
      clientName: client.client_name,
      scope: found.view.scope,
      email: session.email,
      userCode: formatUserCode(userCode),
    });
  // Sign in first; the verified login comes back to this page with the code (authorize.ts).
  const now = Date.now();
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
  );
  const cookie = setCookie(cookieName(TX_COOKIE, config), id, {
    secure: config.secureCookies,
    path: config.cookiePath,
    maxAge: config.POLICY.login_tx_ttl_seconds,
  });
  return emailStep({ issuerName: config.ISSUER_NAME, tx, headers: { "Set-Cookie": cookie } });
}

/** `POST /device/decision`: the person allows or denies, from the consent page, signed in. */
export async function deviceDecision(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  // A cross-site form cannot carry the SameSite=Lax session cookie; a foreign Origin is refused as well.
  const origin = c.req.header("origin");
  if (origin !== undefined && origin !== new URL(config.ISSUER).origin)
    throw pageError("Invalid request", "This decision must come from Keyway's own page.", {
      status: 403,
      code: "forbidden",
    });
  if (!isForm(c.req.raw)) throw pageError("Invalid request", "The form must be form encoded.");
  const form = parseForm(await readBodyText(c.req.raw));
  const userCode = normalizeUserCode(form.user_code);
  if (!userCode || (form.decision !== "approve" && form.decision !== "deny"))
    throw pageError("Invalid request", "The decision is incomplete.");
  const session = await liveSession(c, config);
  if (!session) throw pageError("Signed out", "Your sign-in has ended. Enter the device code again.");
  await deviceQuota(c);
  const found = await findPending(c, userCode);
  if (found.view.status !== "pending" || !found.ref)
    throw pageError("Code expired", "That code is not valid any more. Start again on your device.");
  const approve = form.decision === "approve";
  const decided = await shard(c.env, "code", found.ref).decideDevice({
    userCode: tenantScoped(config, userCode),
    approvedBy: approve
      ? { sub: session.sub, email: session.email, sid: session.sid, auth_time: session.auth_time }
      : null,
    now: Date.now(),
  });
  if (!decided) throw pageError("Code expired", "That code is not valid any more. Start again on your device.");
  audit(
    c,
    { kind: "device_decision", user: session.sub, client: found.view.client_id, detail: { approved: approve } },
    loginRegion(c.get("config"), session.sid),
  );
  return approve
    ? messagePage("Device connected", "You can return to your device now.")
    : messagePage("Request denied", "The device was not signed in. You can close this page.");
}

/** The per-address quota of device lookups, refused on a page (a person is reading), not as JSON. */
async function deviceQuota(c: Context<AppEnv>): Promise<void> {
  try {
    await takeIpQuota(c, "device");
  } catch (err) {
    if (!(err instanceof OAuthError) || err.options.page) throw err;
    throw pageError("Too many attempts", "Too many codes were tried from this network. Wait a minute and try again.", {
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
