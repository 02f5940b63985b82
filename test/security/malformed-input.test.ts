import { env } from "cloudflare:test";
import { SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import {
  admin,
  Browser,
  call,
  form,
  fullLogin,
  mailbox,
  pkce,
  registerClient,
  sealedIdPart,
  sha256,
  shardStub,
  sql,
  stubForId,
  type TestClient,
  uniqueEmail,
  userinfo,
  verifyJwt,
} from "../support/harness";

// Checklist G1-G4: malformed input never reaches a handler's logic, and never answers 500.

const LIMIT = 64 * 1024;

/**
 * A body streamed in 8 KB chunks without a Content-Length (chunked transfer). `pulled` counts the
 * chunks the server read: a reader that stops at the limit reads a little over 64 KB, not all of it.
 */
function streamed(total: number, byte = 0x61) {
  const chunk = new Uint8Array(8 * 1024).fill(byte);
  const state = { pulled: 0 };
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (state.pulled * chunk.byteLength >= total) return controller.close();
      state.pulled++;
      controller.enqueue(chunk);
    },
  });
  return { body, state };
}

async function expectError(res: Response, status: number, error?: string) {
  expect(res.status, await res.clone().text()).toBe(status);
  if (error && (res.headers.get("content-type") ?? "").startsWith("application/json"))
    expect(((await res.json()) as { error: string }).error).toBe(error);
}

/** A login transaction (API client) with its browser. */
async function started(client: TestClient) {
  const browser = new Browser();
  const { challenge } = await pkce();
  const tx = await browser.startLogin(client, challenge);
  return { browser, tx };
}

/** What a login transaction has stored: codes in any ChallengeStore shard, and a session. */
async function txRow(tx: string) {
  const txHash = await sha256(sealedIdPart(tx));
  let challenges = 0;
  for (let s = 0; s < 3; s++)
    challenges += (await sql(shardStub("challenge", 0, s), "SELECT email_key FROM otp_codes WHERE tx_hash = ?", txHash))
      .length;
  const sessions = (await sql(stubForId("session", tx), "SELECT sid FROM sessions WHERE tx_hash = ?", txHash)).length;
  return { challenges, sessions };
}
const NOTHING = { challenges: 0, sessions: 0 };

const clientCount = async () =>
  (await env.DB.prepare("SELECT COUNT(*) AS n FROM clients").first<{ n: number }>())?.n as number;

describe("G1: a body over 64 KB is refused with 413 before it is parsed", () => {
  it("answers 413 on every body-reading endpoint, with a Content-Length and streamed without one", async () => {
    const client = await registerClient();
    const { browser, tx } = await started(client);
    const targets: { path: string; type: string; headers?: Record<string, string>; viaBrowser?: boolean }[] = [
      { path: "/token", type: "application/x-www-form-urlencoded" },
      { path: "/revoke", type: "application/x-www-form-urlencoded" },
      { path: "/introspect", type: "application/x-www-form-urlencoded" },
      { path: "/authorize", type: "application/x-www-form-urlencoded" },
      { path: "/email-code/generate", type: "application/json", viaBrowser: true },
      { path: "/email-code/verify", type: "application/x-www-form-urlencoded", viaBrowser: true },
      { path: "/admin/v1/clients", type: "application/json", headers: { Authorization: `Bearer ${env.ADMIN_TOKEN}` } },
      {
        path: "/admin/v1/users/import",
        type: "application/json",
        headers: { Authorization: `Bearer ${env.ADMIN_TOKEN}` },
      },
    ];
    const clientsBefore = await clientCount();
    for (const t of targets) {
      const send = (init: RequestInit) => (t.viaBrowser ? browser.fetch(t.path, init) : call(t.path, init));
      const headers = { "Content-Type": t.type, ...t.headers };
      // A declared length over the limit: refused on the header alone.
      const big = `tx=${tx}&x=${"a".repeat(LIMIT)}`;
      const declared = await send({ method: "POST", headers, body: big });
      await expectError(declared, 413, "payload_too_large");
      expect(declared.headers.get("cache-control")).toBe("no-store");

      // Streamed with no Content-Length: the reader stops once it is past the limit.
      const s = streamed(1024 * 1024);
      const chunked = await send({ method: "POST", headers, body: s.body, duplex: "half" } as RequestInit);
      await expectError(chunked, 413, "payload_too_large");
      expect(s.state.pulled * 8 * 1024, t.path).toBeLessThan(LIMIT + 4 * 8 * 1024);

      // Exactly at the limit is not "over": whatever it answers, it is not 413 (and never 500).
      const atLimit = await send({ method: "POST", headers, body: "a".repeat(LIMIT) });
      expect(atLimit.status, t.path).not.toBe(413);
      expect(atLimit.status, t.path).toBeLessThan(500);
    }
    // Nothing was stored, and the login transaction was not touched.
    expect(await clientCount()).toBe(clientsBefore);
    expect(await txRow(tx)).toEqual(NOTHING);
  });

  it("checks the admin token before reading a body: an unauthenticated upload is 401, nothing read", async () => {
    const s = streamed(1024 * 1024);
    const res = await call("/admin/v1/clients", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: s.body,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(401);
    expect(s.state.pulled).toBeLessThanOrEqual(1);
  });
});

describe("G2: broken JSON or wrong types answer 400 and change nothing", () => {
  it("refuses broken JSON and non-object JSON on the login endpoints without binding, mailing or counting", async () => {
    const client = await registerClient();
    const { browser, tx } = await started(client);
    const email = uniqueEmail("g2");
    const bodies = [
      `{"tx": "${tx}", "email": "${email}"`,
      `{"tx": "${tx}", "email": "${email}",}`,
      "{'tx': 1}",
      "",
      "null",
      "[]",
      `["${tx}", "${email}"]`,
      '"a string"',
      "42",
      `{"tx": "${tx}", "email": {"$ne": null}}`,
      `{"tx": ["${tx}"], "email": "${email}"}`,
      `{"tx": "${tx}", "email": ["${email}"]}`,
    ];
    for (const body of bodies) {
      for (const path of ["/email-code/generate", "/email-code/verify"]) {
        const res = await browser.fetch(path, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body,
        });
        await expectError(res, 400, "invalid_request");
        expect(res.headers.get("cache-control")).toBe("no-store");
      }
    }
    // A JSON body sent as text/plain (a CSRF-style simple request) is not parsed either.
    const plain = await browser.fetch("/email-code/generate", {
      method: "POST",
      headers: { "Content-Type": "text/plain" },
      body: JSON.stringify({ tx, email }),
    });
    await expectError(plain, 400, "invalid_request");
    expect(await txRow(tx)).toEqual(NOTHING);
    expect(await mailbox(email)).toHaveLength(0);

    // The transaction is intact: the login still works from here.
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
  });

  it("refuses a verify with wrong types without spending an attempt", async () => {
    const client = await registerClient();
    const { browser, tx } = await started(client);
    const email = uniqueEmail("g2v");
    expect((await browser.postJson("/email-code/generate", { tx, email })).status).toBe(200);
    const code = (await mailbox(email))[0]?.code as string;
    for (const bad of [123456, [code], { code }, true, null, `${code}\u0000`])
      expect((await browser.postJson("/email-code/verify", { tx, email, code: bad })).status).toBe(400);
    const txHash = await sha256(sealedIdPart(tx));
    const attempts = [];
    for (let s = 0; s < 3; s++)
      attempts.push(
        ...(await sql<{ attempts: number }>(
          shardStub("challenge", 0, s),
          "SELECT attempts FROM otp_codes WHERE tx_hash = ?",
          txHash,
        )),
      );
    expect(attempts).toEqual([{ attempts: 0 }]);
    expect((await browser.postJson("/email-code/verify", { tx, email, code })).status).toBe(200);
  });

  it("refuses broken JSON and wrong types in the admin API with nothing stored", async () => {
    const before = await clientCount();
    const email = uniqueEmail("g2admin");
    for (const body of ['{"users": [', '{"users": "x"}', '{"users": [{"email": 1}]}', `{"email": ["${email}"]}`]) {
      for (const path of ["/users", "/users/import"]) {
        const res = await admin(path, { method: "POST", headers: { "Content-Type": "application/json" }, body });
        await expectError(res, 400, "invalid_request");
      }
    }
    const patched = await registerClient();
    const patch = await admin(`/clients/${patched.client_id}`, {
      method: "PATCH",
      headers: { "Content-Type": "application/json" },
      body: '{"client_name": "x", ',
    });
    await expectError(patch, 400, "invalid_request");
    const after = (await (await admin(`/clients/${patched.client_id}`)).json()) as { client_name: string };
    expect(after.client_name).toBe(patched.client_name);
    expect(await clientCount()).toBe(before + 1);
    expect(await env.DB.prepare("SELECT id FROM users WHERE email = ?").bind(email).first()).toBeNull();
  });
});

/** Raw bytes as a request body (no re-encoding). */
const bytes = (...parts: (string | number[])[]) => {
  const chunks = parts.map((p) => (typeof p === "string" ? new TextEncoder().encode(p) : new Uint8Array(p)));
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.byteLength;
  }
  return out;
};

describe("G3: invalid UTF-8 and NUL bytes answer 400, never 500", () => {
  it("refuses them in bodies: raw bytes, percent-encoded bytes and escaped NULs", async () => {
    const client = await registerClient();
    const { browser, tx } = await started(client);
    const email = uniqueEmail("g3");
    const json = "application/json";
    const formType = "application/x-www-form-urlencoded";
    const cases: { path: string; type: string; body: Uint8Array | string; viaBrowser?: boolean }[] = [];
    for (const path of ["/email-code/generate", "/email-code/verify"]) {
      cases.push(
        { path, type: json, body: bytes(`{"tx":"${tx}","email":"`, [0xff, 0xfe], `${email}"}`), viaBrowser: true },
        { path, type: json, body: bytes(`{"tx":"${tx}","email":"`, [0xc3], `${email}"}`), viaBrowser: true },
        { path, type: json, body: bytes(`{"tx":"${tx}","email":"`, [0xed, 0xa0, 0x80], `"}`), viaBrowser: true },
        { path, type: json, body: bytes(`{"tx":"${tx}","email":"${email}"}`, [0]), viaBrowser: true },
        { path, type: json, body: `{"tx":"${tx}","email":"${email}\\u0000"}`, viaBrowser: true },
        { path, type: json, body: `{"tx":"${tx}","email":"\\ud800${email}"}`, viaBrowser: true },
        { path, type: formType, body: `tx=${tx}&email=${encodeURIComponent(email)}%00`, viaBrowser: true },
        { path, type: formType, body: `tx=${tx}&email=%FF${encodeURIComponent(email)}`, viaBrowser: true },
        { path, type: formType, body: bytes(`tx=${tx}&email=`, [0xff], encodeURIComponent(email)), viaBrowser: true },
      );
    }
    for (const path of ["/token", "/revoke", "/introspect", "/authorize"])
      cases.push(
        { path, type: formType, body: bytes(`client_id=${client.client_id}&token=`, [0xff, 0xc0]) },
        { path, type: formType, body: `client_id=${client.client_id}&token=abc%00def` },
        { path, type: formType, body: `client_id=%FF${client.client_id}&token=abc` },
        { path, type: formType, body: `client_id=${client.client_id}&token=%C3%28&grant_type=refresh_token` },
        { path, type: formType, body: `client_id=${client.client_id}&state=%ED%A0%80` },
      );
    const adminAuth = { Authorization: `Bearer ${env.ADMIN_TOKEN}` };
    for (const path of ["/admin/v1/users", "/admin/v1/clients"])
      cases.push(
        { path, type: json, body: bytes('{"email":"', [0xff], '@example.com"}') },
        { path, type: json, body: '{"email":"a\\u0000@example.com"}' },
        { path, type: json, body: bytes('{"email":"a@example.com"}', [0]) },
      );
    for (const c of cases) {
      const init = {
        method: "POST",
        headers: { "Content-Type": c.type, ...(c.path.startsWith("/admin") ? adminAuth : {}) },
        body: c.body,
      };
      const res = c.viaBrowser ? await browser.fetch(c.path, init) : await call(c.path, init);
      expect(res.status, `${c.path} ${typeof c.body === "string" ? c.body : "bytes"}`).toBe(400);
    }
    // None of it reached the mailer or bound the transaction.
    expect(await txRow(tx)).toEqual(NOTHING);
    expect(await mailbox(email)).toHaveLength(0);
  });

  it("refuses them in query strings and paths", async () => {
    const client = await registerClient();
    const { challenge } = await pkce();
    const good = new URLSearchParams({
      response_type: "code",
      client_id: client.client_id,
      redirect_uri: client.redirect_uris[0] as string,
      scope: "openid",
      state: "s",
      code_challenge: challenge,
      code_challenge_method: "S256",
    }).toString();
    const queries = [
      `${good}&nonce=%FF`,
      `${good}&nonce=%C3%28`,
      `${good}&nonce=%ED%A0%80`,
      `${good}&nonce=a%00b`,
      `${good.replace("state=s", "state=%F0%9F%98")}`,
      `${good}&%FF=1`,
      `${good}&x%00=1`,
    ];
    for (const q of queries) {
      const res = await call(`/authorize?${q}`, { headers: { Accept: "application/json" } });
      expect(res.status, q).toBe(400);
      expect(res.headers.get("location"), q).toBeNull();
      expect(res.headers.getSetCookie(), q).toEqual([]);
    }
    // The same request, well formed, starts a login.
    expect((await call(`/authorize?${good}`, { headers: { Accept: "application/json" } })).status).toBe(200);

    for (const path of [
      "/logout?state=%FF",
      "/logout?state=a%00",
      "/logout?client_id=%C0%AF",
      "/userinfo?x=%FF",
      "/jwks.json?x=%00",
      "/.well-known/openid-configuration?x=%FF",
      "/admin/v1/users?email=%FF%40example.com",
      "/admin/v1/users?email=a%00%40example.com",
      "/admin/v1/users/%FF",
      "/admin/v1/users/usr_%00",
      "/__dev/mailbox/%FF",
      "/__dev/mailbox/%25",
      "/__dev/mailbox/a%00%40example.com",
      "/admin/v1/test-mailbox/%25",
      "/admin/v1/test-mailbox/%FF",
    ]) {
      const res = await call(path, { headers: { Authorization: `Bearer ${env.ADMIN_TOKEN}` } });
      expect(res.status, path).toBeGreaterThanOrEqual(400);
      expect(res.status, path).toBeLessThan(500);
      if (path.includes("?")) expect(res.status, path).toBe(400);
    }
  });
});

describe("G4: access tokens with alg none, an unknown kid, a bad signature or HS256 over the public key", () => {
  it("answers 401 invalid_token at userinfo and inactive at introspection", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    const { payload, header } = await verifyJwt(tokens.access_token);
    const b64 = (v: unknown) => btoa(JSON.stringify(v)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    const [, body, sig] = tokens.access_token.split(".") as [string, string, string];
    const jwks = JSON.stringify(await (await call("/jwks.json")).json());
    const forged = [
      `${b64({ alg: "none", typ: "at+jwt" })}.${body}.`,
      `${b64({ alg: "none", typ: "at+jwt", kid: header.kid })}.${body}.`,
      // An unknown kid (with the real signature, and with an RS256 key of the attacker's own).
      `${b64({ ...header, kid: "kid-that-was-never-published" })}.${body}.${sig}`,
      await (async () => {
        const { privateKey } = (await crypto.subtle.generateKey(
          {
            name: "RSASSA-PKCS1-v1_5",
            modulusLength: 2048,
            publicExponent: new Uint8Array([1, 0, 1]),
            hash: "SHA-256",
          },
          true,
          ["sign", "verify"],
        )) as CryptoKeyPair;
        return new SignJWT(payload)
          .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid: "attacker" })
          .sign(privateKey);
      })(),
      // HS256 keyed with the published JWKS, and with one public key's JSON.
      await new SignJWT(payload)
        .setProtectedHeader({ alg: "HS256", typ: "at+jwt", kid: header.kid as string })
        .sign(new TextEncoder().encode(jwks)),
      await new SignJWT(payload)
        .setProtectedHeader({ alg: "HS256", typ: "at+jwt", kid: header.kid as string })
        .sign(
          new TextEncoder().encode(
            JSON.stringify((JSON.parse(jwks) as { keys: { kid: string }[] }).keys.find((k) => k.kid === header.kid)),
          ),
        ),
      // A changed claim under the original signature.
      `${tokens.access_token.split(".")[0]}.${b64({ ...payload, sub: "usr_someone_else" })}.${sig}`,
    ];
    for (const token of forged) {
      const res = await userinfo(token);
      expect(res.status, token.slice(0, 60)).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/error="invalid_token"/);
      const intro = await form(client, { token }, "/introspect");
      expect(intro.status).toBe(200);
      expect(await intro.json()).toEqual({ active: false });
    }
    expect((await userinfo(tokens.access_token)).status).toBe(200);
  });
});

describe("made-up ids are refused before any storage call (issue 17 item 7)", () => {
  const served = async (store: "refresh" | "session" | "revocation") => {
    let total = 0;
    for (let s = 0; s < 3; s++)
      total += (
        (await (shardStub(store, 0, s) as unknown as { stats(): Promise<{ served: number }> }).stats()) as {
          served: number;
        }
      ).served;
    return total;
  };
  const random = (n: number) => {
    const bytes = crypto.getRandomValues(new Uint8Array(n));
    return btoa(String.fromCharCode(...bytes))
      .replace(/\+/g, "-")
      .replace(/\//g, "_")
      .replace(/=+$/, "");
  };

  it("answers forged refresh tokens, session cookies and tokens naming a shard without touching it", async () => {
    const client = await registerClient();
    const { tokens } = await fullLogin(client);
    // A real refresh token, and forgeries aimed at shard 0 in its shape: the old format and the new.
    const real = tokens.refresh_token as string;
    const before = { refresh: await served("refresh"), session: await served("session") };
    for (let i = 0; i < 50; i++) {
      const forged = `gr_0_0_${random(i % 2 ? 32 : 33).slice(0, i % 2 ? 43 : 44)}.${random(32)}`;
      const res = await form(client, { grant_type: "refresh_token", refresh_token: forged });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe("invalid_grant");
      const intro = await form(client, { token: forged }, "/introspect");
      expect(await intro.json()).toEqual({ active: false });
      expect((await form(client, { token: forged }, "/revoke")).status).toBe(200);
      const browser = new Browser();
      browser.cookies.set("kw_session", `ses_0_0_${random(33).slice(0, 44)}`);
      const { challenge } = await pkce();
      const silent = await browser.fetch(
        `/authorize?${new URLSearchParams({ response_type: "code", client_id: client.client_id, redirect_uri: client.redirect_uris[0] as string, scope: "openid", code_challenge: challenge, code_challenge_method: "S256", prompt: "none" })}`,
      );
      expect(new URL(silent.headers.get("location") as string).searchParams.get("error")).toBe("login_required");
    }
    expect(await served("refresh")).toBe(before.refresh);
    expect(await served("session")).toBe(before.session);
    // The real one still works, and is the only one that reached a shard.
    expect((await form(client, { grant_type: "refresh_token", refresh_token: real })).status).toBe(200);
    expect(await served("refresh")).toBe(before.refresh + 1);
  });
});
