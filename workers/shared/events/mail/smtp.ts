import { connect } from "cloudflare:sockets";
import { randomToken } from "../../../../durable-objects/contract/crypto";
import { MailError, type Mailer, type MailSettings, type OtpMessage, renderOtpMail, type SendOptions } from "./message";
import { base64, buildMime, dotStuff } from "./mime";

export interface SmtpSettings extends MailSettings {
  SMTP_HOST?: string | undefined;
  SMTP_PORT: number;
  SMTP_USER?: string | undefined;
  SMTP_PASSWORD?: string | undefined;
  SMTP_STARTTLS: "on" | "off";
  SMTP_HELO_NAME?: string | undefined;
}

interface Reply {
  code: number;
  lines: string[];
}

const MAX_REPLY_BYTES = 64 * 1024;

/** Reads SMTP replies (RFC 5321 §4.2) off a socket's readable side. */
class ReplyReader {
  private buffer = "";
  private readonly decoder = new TextDecoder();
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;

  constructor(readable: ReadableStream<Uint8Array>) {
    this.reader = readable.getReader();
  }

  async read(): Promise<Reply> {
    const lines: string[] = [];
    for (;;) {
      const eol = this.buffer.indexOf("\r\n");
      if (eol >= 0) {
        const line = this.buffer.slice(0, eol);
        this.buffer = this.buffer.slice(eol + 2);
        const m = /^([2-5][0-9]{2})([ -])(.*)$/.exec(line);
        if (!m) throw new MailError(`SMTP: malformed reply line`);
        lines.push(m[3] as string);
        if (m[2] === " ") return { code: Number(m[1]), lines };
        continue;
      }
      if (this.buffer.length > MAX_REPLY_BYTES) throw new MailError("SMTP: reply too long");
      const { value, done } = await this.reader.read();
      if (done) throw new MailError("SMTP: connection closed by the server");
      this.buffer += this.decoder.decode(value, { stream: true });
    }
  }

  release(): void {
    this.reader.releaseLock();
  }
}

/**
 * SMTP submission over `cloudflare:sockets` (RFC 5321, RFC 3207 STARTTLS, RFC 4954 AUTH PLAIN/LOGIN).
 * With SMTP_STARTTLS=on (the default) the session upgrades to TLS before AUTH and before any
 * address or content is sent, and fails if the server does not offer STARTTLS. One connection per
 * message: codes are few and each must go out at once.
 */
export class SmtpTransport implements Mailer {
  constructor(private readonly settings: SmtpSettings) {}

  async send(message: OtpMessage, opts: SendOptions = {}): Promise<void> {
    const s = this.settings;
    if (!s.SMTP_HOST) throw new MailError("SMTP_HOST is not set", true);
    const mail = renderOtpMail(s, message);
    // Addresses go into commands and headers: nothing that could end a line or an angle-addr.
    for (const address of [mail.to, mail.from])
      if (!/^[^\s<>\u0000-\u001f\u007f]+@[^\s<>\u0000-\u001f\u007f]+$/.test(address))
        throw new MailError("SMTP: refusing an address that is not one plain address", true);
    const smtputf8Needed = /[^\x00-\x7f]/.test(mail.to + mail.from);
    const helo = s.SMTP_HELO_NAME ?? "keyway.invalid";
    const startTls = s.SMTP_STARTTLS === "on";

    let socket = connect(
      { hostname: s.SMTP_HOST, port: s.SMTP_PORT },
      { secureTransport: startTls ? "starttls" : "off", allowHalfOpen: false },
    );
    const abort = () => void socket.close().catch(() => undefined);
    opts.signal?.addEventListener("abort", abort, { once: true });
    try {
      let reader = new ReplyReader(socket.readable);
      let writer = socket.writable.getWriter();
      const encoder = new TextEncoder();
      const command = async (line: string, expect: number[], what = line.split(" ")[0] as string) => {
        if (opts.signal?.aborted) throw new MailError("SMTP: timed out");
        await writer.write(encoder.encode(`${line}\r\n`));
        return expectReply(await reader.read(), expect, what);
      };

      expectReply(await reader.read(), [220], "greeting");
      let ehlo = await command(`EHLO ${helo}`, [250], "EHLO");
      if (startTls) {
        if (!hasExtension(ehlo, "STARTTLS")) throw new MailError("SMTP: the server does not offer STARTTLS", true);
        await command("STARTTLS", [220]);
        reader.release();
        writer.releaseLock();
        // The certificate is checked against SMTP_HOST, the name the socket connected to.
        socket = socket.startTls();
        reader = new ReplyReader(socket.readable);
        writer = socket.writable.getWriter();
        // RFC 3207 §4.2: forget what was learned before TLS and ask again.
        ehlo = await command(`EHLO ${helo}`, [250], "EHLO");
      }
      if (s.SMTP_USER !== undefined && s.SMTP_PASSWORD !== undefined) {
        const methods = authMethods(ehlo);
        if (methods.includes("PLAIN"))
          await command(`AUTH PLAIN ${base64(`\u0000${s.SMTP_USER}\u0000${s.SMTP_PASSWORD}`)}`, [235], "AUTH");
        else if (methods.includes("LOGIN")) {
          await command("AUTH LOGIN", [334], "AUTH");
          await command(base64(s.SMTP_USER), [334], "AUTH");
          await command(base64(s.SMTP_PASSWORD), [235], "AUTH");
        } else throw new MailError("SMTP: the server offers neither AUTH PLAIN nor AUTH LOGIN", true);
      }
      const utf8 = smtputf8Needed && hasExtension(ehlo, "SMTPUTF8");
      if (smtputf8Needed && !utf8)
        throw new MailError("SMTP: the address needs SMTPUTF8, which the server lacks", true);
      await command(
        `MAIL FROM:<${mail.from}>${utf8 ? " SMTPUTF8" : ""}${hasExtension(ehlo, "8BITMIME") ? " BODY=8BITMIME" : ""}`,
        [250],
        "MAIL",
      );
      await command(`RCPT TO:<${mail.to}>`, [250, 251], "RCPT");
      await command("DATA", [354]);
      const id = opts.idempotencyKey ?? randomToken(16);
      const body = dotStuff(buildMime(mail, { messageId: id, date: new Date(), boundary: `kw-${randomToken(12)}` }));
      await writer.write(encoder.encode(`${body.endsWith("\r\n") ? body : `${body}\r\n`}.\r\n`));
      expectReply(await reader.read(), [250], "message");
      await command("QUIT", [221]).catch(() => undefined);
    } catch (err) {
      if (opts.signal?.aborted) throw new MailError("SMTP: timed out");
      if (err instanceof MailError) throw err;
      throw new MailError(`SMTP: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      opts.signal?.removeEventListener("abort", abort);
      await socket.close().catch(() => undefined);
    }
  }
}

/** A 4xx reply is worth a retry; a 5xx reply is not (RFC 5321 §4.2.1). */
function expectReply(reply: Reply, expect: number[], what: string): Reply {
  if (expect.includes(reply.code)) return reply;
  const text = (reply.lines[0] ?? "").replace(/[^\x20-\x7e]/g, "?").slice(0, 200);
  throw new MailError(`SMTP ${what}: ${reply.code} ${text}`, reply.code >= 500);
}

function hasExtension(ehlo: Reply, name: string): boolean {
  return ehlo.lines.slice(1).some((l) => l.toUpperCase().split(" ")[0] === name);
}

function authMethods(ehlo: Reply): string[] {
  const line = ehlo.lines.slice(1).find((l) => /^AUTH[ =]/i.test(l));
  return line ? line.slice(5).toUpperCase().split(/\s+/) : [];
}
