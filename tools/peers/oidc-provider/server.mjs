#!/usr/bin/env node
// node-oidc-provider 9 as a benchmark peer (tools/bench.mjs, PEER=oidc-provider): the same five-step
// mail-code login as Keyway's k6/full-login.js, on one Node process with oidc-provider's in-memory
// adapter. Not a product: a yardstick, built to do the same work per login as Keyway does.
//
//   PORT=9090 node tools/peers/oidc-provider/server.mjs
//
// - Authorization request: `GET /auth` (PKCE S256 required) → 303 to `/interaction/<uid>`; the uid
//   plays Keyway's `tx`.
// - `POST /interaction/<uid>/generate {email}`: a 6-digit code from a CSPRNG, kept as an HMAC for 5
//   minutes with 5 attempts (Keyway's policy), "mailed" to an in-memory mailbox.
// - `GET /__dev/mailbox/<email>`: `{messages: [{to, code, sent_at}]}`, newest first (Keyway's shape).
// - `POST /interaction/<uid>/verify {email, code}`: the login and a grant of the requested scopes
//   (consent skipped, as Keyway has none) → `{redirect_to}`, the resume URL.
// - `GET redirect_to` → 303 to the client with `code`, `state`, `iss`; `POST /token` with the verifier.
// Access tokens are JWTs signed RS256 (resource indicators with a default resource), like Keyway's
// RFC 9068 tokens, so each login signs twice on both sides. One public client, registered at start:
// `POST /__peer/client` returns it (k6 setup).
import { createHmac, randomBytes, randomInt } from "node:crypto";
import { createServer } from "node:http";
import { exportJWK, generateKeyPair } from "jose";
import Provider from "oidc-provider";
import { redisAdapter } from "./redis-adapter.mjs";

const PORT = Number(process.env.PORT || 9090);
const ISSUER = `http://127.0.0.1:${PORT}`;
const REDIRECT_URI = process.env.REDIRECT_URI || "https://loadtest.keyway.invalid/callback";
const RESOURCE = "https://api.loadtest.keyway.invalid";
const CLIENT = { client_id: "peer-loadtest", redirect_uri: REDIRECT_URI };
/** The machine client of k6/client-credentials.js (PEER=oidc-provider): `POST /__peer/machine-client`. */
const MACHINE = { client_id: "peer-machine", client_secret: randomBytes(32).toString("base64url") };
const API_SCOPES = "reports:read reports:write";
const OTP_TTL_MS = 300_000;
const OTP_MAX_ATTEMPTS = 5;
const HMAC_KEY = randomBytes(32);

const { privateKey } = await generateKeyPair("RS256", { modulusLength: 2048, extractable: true });
const signingKey = { ...(await exportJWK(privateKey)), kid: "peer-rs256", use: "sig", alg: "RS256" };

/** @type {Map<string, { mac: string, uid: string, expires: number, attempts: number }>} pending codes by email */
const codes = new Map();
/** @type {Map<string, { to: string, code: string, sent_at: string }[]>} the dev mailbox */
const mailbox = new Map();
const macOf = (/** @type {string} */ email, /** @type {string} */ code) =>
  createHmac("sha256", HMAC_KEY).update(`${email}\n${code}`).digest("base64url");
const accountIdOf = (/** @type {string} */ email) =>
  `usr_${createHmac("sha256", HMAC_KEY).update(email).digest("base64url").slice(0, 22)}`;
/** @type {Map<string, string>} account id → email (the "users" a login creates) */
const accounts = new Map();

// REDIS_URL: node-oidc-provider's models in Redis (PEER=oidc-provider-redis), as its users deploy it;
// without it, its in-memory adapter. The peer's own mail codes stay in memory either way.
const provider = new Provider(ISSUER, {
  ...(process.env.REDIS_URL ? { adapter: redisAdapter(process.env.REDIS_URL) } : {}),
  clients: [
    {
      client_id: CLIENT.client_id,
      token_endpoint_auth_method: "none",
      redirect_uris: [REDIRECT_URI],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
    },
    {
      client_id: MACHINE.client_id,
      client_secret: MACHINE.client_secret,
      token_endpoint_auth_method: "client_secret_basic",
      grant_types: ["client_credentials"],
      response_types: [],
      redirect_uris: [],
      scope: API_SCOPES,
    },
  ],
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString("base64url")] },
  scopes: ["openid", "email", "offline_access", ...API_SCOPES.split(" ")],
  claims: { openid: ["sub"], email: ["email", "email_verified"] },
  // Keyway puts email in the ID token; so does the peer.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => RESOURCE,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: `openid email offline_access ${API_SCOPES}`,
        audience: RESOURCE,
        accessTokenFormat: "jwt",
        jwt: { sign: { alg: "RS256" } },
      }),
    },
  },
  findAccount: async (_ctx, sub) => {
    const email = accounts.get(sub);
    if (!email) return undefined;
    return { accountId: sub, claims: async () => ({ sub, email, email_verified: true }) };
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  ttl: { AccessToken: 600, IdToken: 600, AuthorizationCode: 60, RefreshToken: 30 * 86400, Interaction: 900 },
});
provider.on("server_error", (_ctx, err) => console.error("server_error", err));

/** @param {import("node:http").IncomingMessage} req */
async function readJson(req) {
  let text = "";
  for await (const chunk of req) {
    text += chunk;
    if (text.length > 65_536) throw new Error("body too large");
  }
  return JSON.parse(text || "{}");
}

/** @param {import("node:http").ServerResponse} res @param {number} status @param {unknown} body */
function sendJson(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Cache-Control": "no-store" });
  res.end(text);
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/;

/** @type {(req: import("node:http").IncomingMessage, res: import("node:http").ServerResponse) => Promise<void>} */
async function interaction(req, res) {
  const url = new URL(req.url ?? "/", ISSUER);
  const [, , uid, action] = url.pathname.split("/");
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) return sendJson(res, 400, { error: "invalid_request" });
  if (req.method === "GET") {
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" });
    res.end(
      `<form method="post" action="/interaction/${uid}/generate"><input name="email"><button>Send</button></form>`,
    );
    return;
  }
  const body = await readJson(req);
  const email = String(body.email ?? "")
    .trim()
    .toLowerCase();
  if (!EMAIL.test(email)) return sendJson(res, 400, { error: "invalid_request" });
  if (action === "generate") {
    const code = String(randomInt(0, 1_000_000)).padStart(6, "0");
    codes.set(email, { mac: macOf(email, code), uid, expires: Date.now() + OTP_TTL_MS, attempts: 0 });
    const box = mailbox.get(email) ?? [];
    box.unshift({ to: email, code, sent_at: new Date().toISOString() });
    mailbox.set(email, box.slice(0, 10));
    return sendJson(res, 200, { sent: true, expires_in: OTP_TTL_MS / 1000, resend_after: 60 });
  }
  if (action === "verify") {
    const pending = codes.get(email);
    const live = pending && pending.uid === uid && pending.expires > Date.now() && pending.attempts < OTP_MAX_ATTEMPTS;
    if (!live || pending.mac !== macOf(email, String(body.code ?? ""))) {
      if (live) pending.attempts += 1;
      return sendJson(res, 400, { error: "invalid_code" });
    }
    codes.delete(email);
    const accountId = accountIdOf(email);
    accounts.set(accountId, email);
    const grant = new provider.Grant({ accountId, clientId: String(details.params.client_id) });
    grant.addOIDCScope(String(details.params.scope));
    grant.addResourceScope(RESOURCE, String(details.params.scope));
    const grantId = await grant.save();
    const redirectTo = await provider.interactionResult(req, res, {
      login: { accountId, amr: ["otp"] },
      consent: { grantId },
    });
    return sendJson(res, 200, { redirect_to: redirectTo });
  }
  sendJson(res, 404, { error: "not_found" });
}

const oidc = provider.callback();
const server = createServer((req, res) => {
  const path = (req.url ?? "/").split("?")[0] ?? "/";
  if (path.startsWith("/interaction/")) {
    interaction(req, res).catch((err) => {
      if (!res.headersSent) sendJson(res, 400, { error: "invalid_request", error_description: String(err.message) });
    });
    return;
  }
  if (path.startsWith("/__dev/mailbox/")) {
    const email = decodeURIComponent(path.slice("/__dev/mailbox/".length)).toLowerCase();
    return sendJson(res, 200, { messages: mailbox.get(email) ?? [] });
  }
  if (path === "/__peer/client" && req.method === "POST") return sendJson(res, 200, CLIENT);
  if (path === "/__peer/machine-client" && req.method === "POST") return sendJson(res, 200, MACHINE);
  oidc(req, res);
});
server.keepAliveTimeout = 65_000;
server.listen(PORT, "127.0.0.1", () => console.log(`oidc-provider peer at ${ISSUER}`));
