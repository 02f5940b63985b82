// Node side of the Workers tests (vitest globalSetup): real mail peers for the transports.
//  - an SMTP server (npm smtp-server) offering STARTTLS with the test CA's certificate and
//    requiring AUTH, which records each message it accepts;
//  - a fake of Resend's HTTP API (`POST /emails`) that checks each request as Resend documents it;
//  - `GET /received?to=<address>` on the HTTP server: what either peer accepted for an address, so
//    tests inside workerd can read it over HTTP.
// Faults are chosen by the recipient's local part, so parallel tests never share state:
//   fail<N>.<...>@  the first N attempts fail (HTTP 503 / SMTP 451 at RCPT), then delivery works;
//   failall.<...>@  every attempt fails the same way;
//   reject.<...>@   a permanent refusal (HTTP 422 / SMTP 550);
//   slow<MS>.<...>@ the answer comes after MS milliseconds.
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { SMTPServer, type SMTPServerOptions } from "smtp-server";
import type { TestProject } from "vitest/node";
import { testTlsFromEnv } from "./global-setup-tls.js";
import type { MailPeers } from "./global-setup-types.js";

export interface ReceivedHttp {
  transport: "http";
  to: string[];
  at: number;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}
export interface ReceivedSmtp {
  transport: "smtp";
  to: string[];
  at: number;
  from: string;
  secure: boolean;
  user: string | null;
  raw: string;
}

const received: (ReceivedHttp | ReceivedSmtp)[] = [];
const attempts = new Map<string, number>();

type Behaviour = { kind: "ok" } | { kind: "fail" } | { kind: "reject" } | { kind: "slow"; ms: number };

function behaviour(address: string): Behaviour {
  const local = address.toLowerCase().split("@")[0] ?? "";
  const n = (attempts.get(address) ?? 0) + 1;
  attempts.set(address, n);
  let m = /^fail(\d+)\./.exec(local);
  if (m) return n <= Number(m[1]) ? { kind: "fail" } : { kind: "ok" };
  if (local.startsWith("failall.")) return { kind: "fail" };
  if (local.startsWith("reject.")) return { kind: "reject" };
  m = /^slow(\d+)\./.exec(local);
  if (m) return { kind: "slow", ms: Number(m[1]) };
  return { kind: "ok" };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function listen(server: { listen(port: number, host: string, cb: () => void): unknown }): Promise<void> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const tls = testTlsFromEnv();
  const peers = {
    smtpUser: "keyway-test",
    smtpPassword: randomUUID(),
    apiKey: `re_${randomUUID().replaceAll("-", "")}`,
  };

  const smtpOptions: SMTPServerOptions = {
    secure: false,
    key: readFileSync(tls.keyFile),
    cert: readFileSync(tls.certFile),
    name: "localhost",
    banner: "Keyway test SMTP",
    authMethods: ["PLAIN", "LOGIN"],
    allowInsecureAuth: false,
    size: 1024 * 1024,
    logger: false,
    onAuth(auth, _session, cb) {
      if (auth.username === peers.smtpUser && auth.password === peers.smtpPassword) cb(null, { user: auth.username });
      else cb(Object.assign(new Error("Invalid username or password"), { responseCode: 535 }));
    },
    onRcptTo(address, _session, cb) {
      const b = behaviour(address.address);
      const respond = () => {
        if (b.kind === "fail") cb(Object.assign(new Error("Try again later"), { responseCode: 451 }));
        else if (b.kind === "reject") cb(Object.assign(new Error("No such user"), { responseCode: 550 }));
        else cb();
      };
      if (b.kind === "slow") setTimeout(respond, b.ms);
      else respond();
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        received.push({
          transport: "smtp",
          to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          at: Date.now(),
          secure: session.secure,
          user: typeof session.user === "string" ? session.user : null,
          raw: Buffer.concat(chunks).toString("utf8"),
        });
        cb();
      });
    },
  };
  const smtp = new SMTPServer(smtpOptions);
  const untrusted = new SMTPServer({
    ...smtpOptions,
    key: readFileSync(tls.untrustedKeyFile),
    cert: readFileSync(tls.untrustedCertFile),
  });
  const plain = new SMTPServer({ ...smtpOptions, hideSTARTTLS: true });
  for (const server of [smtp, untrusted, plain]) {
    server.on("error", () => undefined);
    await listen(server.server);
  }

  const http = createServer((req, res) => {
    handleHttp(req, res, peers.apiKey).catch((err) => {
      res.writeHead(500).end(String(err));
    });
  });
  await listen(http);

  const provided: MailPeers = {
    ...peers,
    smtpPort: (smtp.server.address() as AddressInfo).port,
    smtpUntrustedPort: (untrusted.server.address() as AddressInfo).port,
    smtpPlainPort: (plain.server.address() as AddressInfo).port,
    httpPort: (http.address() as AddressInfo).port,
  };
  project.provide("mailPeers", provided);
  return async () => {
    for (const server of [smtp, untrusted, plain]) await new Promise<void>((r) => server.close(() => r()));
    await new Promise<void>((r) => http.close(() => r()));
  };
}

const idempotent = new Map<string, { body: string; id: string }>();

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(body));
}

const resendError = (res: ServerResponse, status: number, name: string, message: string) =>
  reply(res, status, { statusCode: status, name, message });

/**
 * A webhook receiver (issue 25): `POST /hooks/<name>` records each delivery (headers, raw body, the
 * status it answered); `GET /hooks/<name>` lists them. By name: `fail<N>-...` answers 500 to the first
 * N; `down-...` answers 503 until `POST /hooks-control/<name>?state=up` (and again after `state=down`);
 * `redirect-...` answers 302 to a path that would accept it.
 */
interface ReceivedHook {
  at: number;
  headers: Record<string, string>;
  body: string;
  answered: number;
}
const hooks = new Map<string, ReceivedHook[]>();
const hooksUp = new Map<string, boolean>();

async function handleHook(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> {
  const control = /^\/hooks-control\/([\w.-]+)$/.exec(url.pathname);
  if (control && req.method === "POST") {
    hooksUp.set(control[1] as string, url.searchParams.get("state") === "up");
    reply(res, 200, { ok: true });
    return true;
  }
  const m = /^\/hooks\/([\w.-]+)$/.exec(url.pathname);
  if (!m) return false;
  const name = m[1] as string;
  const list = hooks.get(name) ?? [];
  hooks.set(name, list);
  if (req.method === "GET") {
    reply(res, 200, { received: list });
    return true;
  }
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const n = list.length + 1;
  const fail = /^fail(\d+)-/.exec(name);
  let answered = 200;
  if (fail && n <= Number(fail[1])) answered = 500;
  else if (name.startsWith("down-") && !hooksUp.get(name)) answered = 503;
  else if (name.startsWith("redirect-")) answered = 302;
  const headers = Object.fromEntries(
    Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : String(v ?? "")]),
  );
  list.push({ at: Date.now(), headers, body: Buffer.concat(chunks).toString("utf8"), answered });
  if (answered === 302) res.writeHead(302, { Location: `/hooks/ok-${name}` }).end();
  else reply(res, answered, { ok: answered === 200 });
  return true;
}

/**
 * Documents a test publishes for a Worker to fetch (issue 40: a sector identifier document, a
 * client's JWK Set at its jwks_uri, a request object at a request_uri): `PUT /documents/<name>`
 * stores the body and its Content-Type (a later PUT replaces it: a client rotating its keys),
 * `GET /documents/<name>` serves it (404 before). A name starting `redirect-` answers 302 to its
 * plain counterpart. `GET /document-fetches/<name>` answers `{"fetches": n}`: how many GETs the
 * document had, so a test can tell a cached copy from a fetch.
 */
const documents = new Map<string, { type: string; body: Buffer }>();
const documentFetches = new Map<string, number>();

async function handleDocument(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> {
  const counted = /^\/document-fetches\/([\w.-]+)$/.exec(url.pathname);
  if (counted) {
    reply(res, 200, { fetches: documentFetches.get(counted[1] as string) ?? 0 });
    return true;
  }
  const m = /^\/documents\/([\w.-]+)$/.exec(url.pathname);
  if (!m) return false;
  const name = m[1] as string;
  if (req.method === "PUT") {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    documents.set(name, {
      type: String(req.headers["content-type"] ?? "application/json"),
      body: Buffer.concat(chunks),
    });
    reply(res, 200, { ok: true });
    return true;
  }
  if (name.startsWith("redirect-")) {
    res.writeHead(302, { Location: `/documents/${name.slice("redirect-".length)}` }).end();
    return true;
  }
  documentFetches.set(name, (documentFetches.get(name) ?? 0) + 1);
  const doc = documents.get(name);
  if (!doc) reply(res, 404, { error: "not_found" });
  else res.writeHead(200, { "Content-Type": doc.type }).end(doc.body);
  return true;
}

async function handleHttp(req: IncomingMessage, res: ServerResponse, apiKey: string): Promise<void> {
  const url = new URL(req.url ?? "/", "http://127.0.0.1");
  if (await handleHook(req, res, url)) return;
  if (await handleDocument(req, res, url)) return;
  if (req.method === "GET" && url.pathname === "/received") {
    const to = (url.searchParams.get("to") ?? "").toLowerCase();
    reply(res, 200, { messages: received.filter((m) => m.to.includes(to)) });
    return;
  }
  if (url.pathname !== "/emails") return resendError(res, 404, "not_found", "The requested endpoint does not exist.");
  if (req.method !== "POST")
    return resendError(res, 405, "method_not_allowed", "Method is not allowed for the requested path.");

  // Resend's API reference, "Send Email": POST /emails, Authorization: Bearer <API key>,
  // a JSON body with from, to (a string or up to 50), subject, and html and/or text.
  const auth = req.headers.authorization;
  if (!auth) return resendError(res, 401, "missing_api_key", "Missing API key in the authorization header.");
  if (auth !== `Bearer ${apiKey}`) return resendError(res, 403, "invalid_api_key", "API key is invalid.");
  if (!(req.headers["content-type"] ?? "").startsWith("application/json"))
    return resendError(res, 422, "validation_error", "Content-Type must be application/json.");
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return resendError(res, 422, "validation_error", "Invalid JSON body.");
  }
  const to = typeof body.to === "string" ? [body.to] : body.to;
  const fromOk =
    typeof body.from === "string" && /^(?:[^<>]+@[^<>]+|"(?:[^"\\]|\\.)*" <[^<>\s]+@[^<>\s]+>)$/.test(body.from);
  if (!fromOk) return resendError(res, 422, "validation_error", "Invalid `from` field.");
  if (
    !Array.isArray(to) ||
    to.length < 1 ||
    to.length > 50 ||
    !to.every((t) => typeof t === "string" && /^[^\s<>]+@[^\s<>]+$/.test(t))
  )
    return resendError(res, 422, "validation_error", "Invalid `to` field.");
  if (typeof body.subject !== "string" || body.subject.length === 0 || /[\r\n]/.test(body.subject))
    return resendError(res, 422, "validation_error", "Invalid `subject` field.");
  if (typeof body.html !== "string" && typeof body.text !== "string")
    return resendError(res, 422, "validation_error", "Either `html` or `text` must be provided.");

  const key = req.headers["idempotency-key"];
  if (typeof key === "string") {
    if (key.length > 256) return resendError(res, 422, "invalid_idempotency_key", "The key must be 1-256 characters.");
    const seen = idempotent.get(key);
    if (seen && seen.body !== text)
      return resendError(res, 409, "invalid_idempotent_request", "Same idempotency key used with a different payload.");
    if (seen) return reply(res, 200, { id: seen.id });
  }

  const b = behaviour(String(to[0]));
  if (b.kind === "slow") await sleep(b.ms);
  if (b.kind === "fail") return resendError(res, 503, "service_unavailable", "Temporarily unavailable.");
  if (b.kind === "reject") return resendError(res, 422, "validation_error", "The recipient is not allowed.");

  const id = randomUUID();
  if (typeof key === "string") idempotent.set(key, { body: text, id });
  const headers = Object.fromEntries(
    Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : String(v ?? "")]),
  );
  received.push({ transport: "http", to: to.map((t) => String(t).toLowerCase()), at: Date.now(), headers, body });
  reply(res, 200, { id });
}
