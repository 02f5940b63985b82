import { sleep } from "k6";
import http from "k6/http";
import {
  ADMIN_TOKEN,
  BASE_URL,
  DIRECT_HOST,
  MAILBOX,
  MAILBOX_EXTRA_READS,
  MAILBOX_INTERVAL_MS,
  MAILBOX_POLLS,
  MAILBOX_SKEW_MS,
  REQUEST_TIMEOUT,
  routed,
} from "./config.js";
import { jsonBody } from "./http-util.js";

/** A tenant client's admin routes are its tenant's (lib/admin.js). */
const tenantPath = (client) => (client?.tenant ? `/tenants/${client.tenant}` : "");

/** The codes this VU already used, per address, so a stale message is never taken for the new one. */
const usedCodes = {};

function mailboxRequest(email, client, step = "Mailbox") {
  if (MAILBOX === "test")
    return http.get(`${BASE_URL}/admin/v1${tenantPath(client)}/test-mailbox/${encodeURIComponent(email)}`, {
      headers: { Authorization: `Bearer ${ADMIN_TOKEN}` },
      timeout: REQUEST_TIMEOUT,
      tags: { step, name: "GET /admin/v1/test-mailbox/{email}" },
    });
  return http.get(routed(`${client?.base || BASE_URL}/__dev/mailbox/${encodeURIComponent(email)}`), {
    ...(DIRECT_HOST ? { headers: { Host: DIRECT_HOST } } : {}),
    timeout: REQUEST_TIMEOUT,
    tags: { step, name: "GET /__dev/mailbox/{email}" },
  });
}

/**
 * Polls the mailbox (MAILBOX=dev: /__dev/mailbox, MAILBOX=test: /admin/v1/test-mailbox) until a
 * code sent after `sinceMs` appears. Mail goes out after EmailCodeGenerate answers, so the first
 * look may come too early. Returns { code, waitedMs, last } with code null when none came.
 */
export function readCode(email, sinceMs, client) {
  const started = Date.now();
  let last = null;
  for (let attempt = 0; attempt < MAILBOX_POLLS; attempt++) {
    if (attempt > 0) sleep(MAILBOX_INTERVAL_MS / 1000);
    last = mailboxRequest(email, client);
    if (last.status !== 200) continue;
    const body = jsonBody(last);
    const messages = body && Array.isArray(body.messages) ? body.messages : [];
    const newest = messages[0];
    if (!newest || typeof newest.code !== "string") continue;
    const sent = Date.parse(newest.sent_at);
    if (Number.isFinite(sent) && sent < sinceMs - MAILBOX_SKEW_MS) continue;
    if (usedCodes[email] === newest.code) continue;
    usedCodes[email] = newest.code;
    for (let i = 0; i < MAILBOX_EXTRA_READS; i++) mailboxRequest(email, client, "MailboxExtra");
    return { code: newest.code, waitedMs: Date.now() - started, last };
  }
  return { code: null, waitedMs: Date.now() - started, last };
}
