import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { loadMailConfig } from "../../workers/shared/config/mail-settings";
import { SmtpTransport } from "../../workers/shared/events/mail/smtp";
import { Browser, pkce, registerClient, withVars } from "../support/harness";
import { address, codeIn, failure, parseMime, peers, type ReceivedSmtp, received, smtpVars } from "./support";

const transport = (vars: Record<string, string> = {}, port?: number) =>
  new SmtpTransport(loadMailConfig({ ...env, ...smtpVars(port), ...vars }));

const message = (to: string, extra: Partial<{ issuerName: string; code: string }> = {}) => ({
  to,
  code: extra.code ?? "042917",
  expiresInSeconds: 300,
  issuerName: extra.issuerName ?? "Keyway",
  issuer: env.ISSUER,
});

describe("SMTP transport (STARTTLS over cloudflare:sockets, against a real SMTP server)", () => {
  it("delivers a login's code over STARTTLS with AUTH: headers, plain text and HTML, and the code works", async () => {
    const client = await registerClient();
    const testEnv = withVars({ ...smtpVars(), MAIL_FROM: "login@keyway.test", ISSUER_NAME: "Acme ID" });
    const browser = new Browser({ env: testEnv });
    const email = address();
    const tx = await browser.startLogin(client, (await pkce()).challenge);
    const gen = await browser.postJson("/email-code/generate", { tx, email });
    expect(gen.status).toBe(200);
    expect(await gen.json()).toEqual({ sent: true, expires_in: 300, resend_after: 60 });

    const got = (await received(email)) as ReceivedSmtp[];
    expect(got).toHaveLength(1);
    const msg = got[0] as ReceivedSmtp;
    expect(msg.transport).toBe("smtp");
    expect(msg.secure).toBe(true); // the session was upgraded before MAIL FROM
    expect(msg.user).toBe(peers().smtpUser); // and authenticated
    expect(msg.from).toBe("login@keyway.test");
    expect(msg.to).toEqual([email]);

    const mail = parseMime(msg.raw);
    const code = codeIn(mail.text);
    expect(mail.header("From")).toEqual(['"Acme ID" <login@keyway.test>']);
    expect(mail.header("To")).toEqual([`<${email}>`]);
    expect(mail.header("Subject")).toEqual([`${code} is your Acme ID sign-in code`]);
    expect(mail.header("MIME-Version")).toEqual(["1.0"]);
    expect(mail.header("Date")[0]).toMatch(/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} \+0000$/);
    expect(mail.header("Message-ID")[0]).toMatch(/^<[A-Za-z0-9_-]+@keyway\.test>$/);
    expect(mail.header("Auto-Submitted")).toEqual(["auto-generated"]);
    expect(mail.text).toContain(`    ${code}\n`);
    expect(mail.text).toContain("Acme ID");
    expect(mail.text).toMatch(/expires 5 minutes after it was requested, at \d\d:\d\d UTC/);
    expect(mail.text).toMatch(/did not request this code/);
    expect(mail.html).toMatch(new RegExp(`font-size:36px[^>]*>${code}</p>`));
    expect(mail.html).toContain("expires 5 minutes after it was requested");
    expect(mail.html).toMatch(/did not request this code/);

    const ver = await browser.postJson("/email-code/verify", { tx, email, code });
    expect(ver.status, await ver.clone().text()).toBe(200);
  });

  it("lets no user or operator input add a header or a recipient", async () => {
    // Through the endpoint: an address with CR/LF is refused before any mail (checklist A11).
    const client = await registerClient();
    const browser = new Browser({ env: withVars(smtpVars()) });
    const tx = await browser.startLogin(client, (await pkce()).challenge);
    const victim = address();
    const evil = address();
    for (const email of [`${victim}\r\nBcc: ${evil}`, `${victim}\nRCPT TO:<${evil}>`, `${victim}>\r\nDATA`]) {
      const res = await browser.postJson("/email-code/generate", { tx, email });
      expect(res.status).toBe(400);
    }
    expect(await received(victim)).toEqual([]);
    expect(await received(evil)).toEqual([]);

    // Values that reach headers are made single-line: an issuer name or sender name with CR/LF.
    const to = address();
    await transport({ MAIL_FROM_NAME: `Keyway\r\nBcc: ${evil}` }).send(
      message(to, { issuerName: `Acme\r\nX-Injected: yes\r\n\r\nbody` }),
    );
    const [msg] = (await received(to)) as ReceivedSmtp[];
    expect(msg?.to).toEqual([to]);
    const mail = parseMime((msg as ReceivedSmtp).raw);
    expect(mail.headerLines.filter((l) => /^(bcc|x-injected|rcpt)/i.test(l))).toEqual([]);
    expect(mail.header("Subject")).toEqual(["042917 is your Acme X-Injected: yes body sign-in code"]);
    expect(mail.header("From")[0]).toBe(`"Keyway Bcc: ${evil}" <login@keyway.invalid>`);
    expect(await received(evil)).toEqual([]);

    // And the transport itself refuses an address that could end a command line.
    const err = await failure(transport().send(message(`${to}>\r\nRCPT TO:<${evil}`)));
    expect(err.permanent).toBe(true);
    expect(await received(evil)).toEqual([]);
  });

  it("writes a non-ASCII issuer name as RFC 2047 encoded words", async () => {
    const to = address();
    await transport().send(message(to, { issuerName: "Kéyway Zürich" }));
    const [msg] = (await received(to)) as ReceivedSmtp[];
    const mail = parseMime((msg as ReceivedSmtp).raw);
    const subject = mail.header("Subject")[0] as string;
    expect(subject).toMatch(/^=\?UTF-8\?B\?/);
    const decoded = subject
      .split(" ")
      .map((w) => /^=\?UTF-8\?B\?(.*)\?=$/.exec(w)?.[1] ?? "")
      .map((b) => atob(b))
      .join("");
    expect(new TextDecoder().decode(Uint8Array.from(decoded, (c) => c.charCodeAt(0)))).toBe(
      "042917 is your Kéyway Zürich sign-in code",
    );
    expect(mail.text).toContain("Kéyway Zürich");
  });

  it("refuses a server whose certificate does not verify, before sending anything", async () => {
    const to = address();
    const err = await failure(transport({}, peers().smtpUntrustedPort).send(message(to)));
    expect(err.message).toMatch(/SMTP/);
    expect(await received(to)).toEqual([]);
  });

  it("refuses a server that does not offer STARTTLS (no code in the clear)", async () => {
    const to = address();
    const err = await failure(transport({}, peers().smtpPlainPort).send(message(to)));
    expect(err.message).toMatch(/STARTTLS/);
    expect(err.permanent).toBe(true);
    expect(await received(to)).toEqual([]);
  });

  it("treats a 4xx reply as temporary and a 5xx reply as permanent", async () => {
    const later = address("fail1");
    expect((await failure(transport().send(message(later)))).permanent).toBe(false);
    await transport().send(message(later)); // the second attempt goes through
    expect(await received(later)).toHaveLength(1);
    const refused = address("reject");
    const err = await failure(transport().send(message(refused)));
    expect(err.permanent).toBe(true);
    expect(err.message).toMatch(/RCPT: 550/);
  });

  it("fails on wrong credentials without sending", async () => {
    const to = address();
    const err = await failure(transport({ SMTP_PASSWORD: "not-the-password" }).send(message(to)));
    expect(err.message).toMatch(/AUTH: 535/);
    expect(await received(to)).toEqual([]);
  });
});
