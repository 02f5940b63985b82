// Node side of the tests: a throwaway certificate authority and a server certificate for 127.0.0.1
// and localhost, made with the openssl CLI for each run, so the SMTP test server can offer STARTTLS
// with a certificate that workerd verifies like any other (no "skip verification" switch exists, or
// should). workerd trusts extra roots only through NODE_EXTRA_CA_CERTS, which Miniflare reads once,
// when it is first imported: vitest.config.ts calls this before it imports the Workers pool.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TestTls {
  dir: string;
  /** The CA (plus any roots NODE_EXTRA_CA_CERTS named before), for NODE_EXTRA_CA_CERTS. */
  caFile: string;
  keyFile: string;
  certFile: string;
  /** A self-signed certificate for the same names, trusted by nobody. */
  untrustedKeyFile: string;
  untrustedCertFile: string;
}

export const TEST_TLS_DIR_VAR = "KEYWAY_TEST_TLS_DIR";

export function createTestTls(): TestTls {
  const dir = mkdtempSync(join(tmpdir(), "keyway-test-tls-"));
  const run = (args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  try {
    run([
      "req",
      "-x509",
      ...ec,
      "-keyout",
      "ca.key",
      "-out",
      "ca.pem",
      "-days",
      "2",
      "-subj",
      "/CN=Keyway test CA",
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    run(["req", ...ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"]);
    writeFileSync(
      join(dir, "server.ext"),
      "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    );
    run([
      "x509",
      "-req",
      "-in",
      "server.csr",
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      "server.pem",
      "-days",
      "2",
      "-extfile",
      "server.ext",
    ]);
    // A certificate for the same names that no trusted CA signed (a server workerd must refuse).
    run([
      "req",
      "-x509",
      ...ec,
      "-keyout",
      "untrusted.key",
      "-out",
      "untrusted.pem",
      "-days",
      "2",
      "-subj",
      "/CN=Keyway untrusted test server",
      "-addext",
      "subjectAltName=IP:127.0.0.1,DNS:localhost",
      "-addext",
      "basicConstraints=critical,CA:FALSE",
      "-addext",
      "extendedKeyUsage=serverAuth",
    ]);
  } catch (err) {
    const detail = (err as { stderr?: Buffer }).stderr?.toString() ?? String(err);
    throw new Error(`the mail tests need the openssl CLI to make a test certificate: ${detail}`);
  }
  const previous = process.env.NODE_EXTRA_CA_CERTS;
  const bundle = [
    previous && existsSync(previous) ? readFileSync(previous, "utf8") : "",
    readFileSync(join(dir, "ca.pem"), "utf8"),
  ].join("\n");
  writeFileSync(join(dir, "trust.pem"), bundle);
  return {
    dir,
    caFile: join(dir, "trust.pem"),
    keyFile: join(dir, "server.key"),
    certFile: join(dir, "server.pem"),
    untrustedKeyFile: join(dir, "untrusted.key"),
    untrustedCertFile: join(dir, "untrusted.pem"),
  };
}

export function testTlsFromEnv(): TestTls {
  const dir = process.env[TEST_TLS_DIR_VAR];
  if (!dir) throw new Error(`${TEST_TLS_DIR_VAR} is not set: vitest.config.ts creates the test TLS material`);
  return {
    dir,
    caFile: join(dir, "trust.pem"),
    keyFile: join(dir, "server.key"),
    certFile: join(dir, "server.pem"),
    untrustedKeyFile: join(dir, "untrusted.key"),
    untrustedCertFile: join(dir, "untrusted.pem"),
  };
}
