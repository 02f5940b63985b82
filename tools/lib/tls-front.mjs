// A TLS front for a local Keyway: https on a loopback port, proxied to `npm start`'s http port, as a
// production edge terminates TLS before a Worker. The conformance suite requires the issuer and every
// endpoint on https (issue 40). The certificate is self-signed for 127.0.0.1 and localhost, made once
// with the openssl command line into `dir` and reused.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { createServer } from "node:https";
import { join } from "node:path";

/** The certificate and key in `dir`, made there if missing. @param {string} dir */
export function selfSignedCertificate(dir) {
  const cert = join(dir, "cert.pem");
  const key = join(dir, "key.pem");
  if (!existsSync(cert) || !existsSync(key)) {
    mkdirSync(dir, { recursive: true });
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "825",
        "-subj",
        "/CN=127.0.0.1",
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
        "-keyout",
        key,
        "-out",
        cert,
      ],
      { stdio: "ignore" },
    );
  }
  return { cert: readFileSync(cert), key: readFileSync(key), certFile: cert };
}

const BCP195_TLS12 = [
  "TLS_AES_128_GCM_SHA256",
  "TLS_AES_256_GCM_SHA384",
  "TLS_CHACHA20_POLY1305_SHA256",
  "ECDHE-ECDSA-AES128-GCM-SHA256",
  "ECDHE-RSA-AES128-GCM-SHA256",
  "ECDHE-ECDSA-AES256-GCM-SHA384",
  "ECDHE-RSA-AES256-GCM-SHA384",
].join(":");

/**
 * Listens on https://127.0.0.1:`port` and forwards every request to http://127.0.0.1:`upstream`,
 * keeping the Host header (Keyway's gateway serves the issuer's host) and streaming both bodies.
 * @param {{ port: number, upstream: number, dir: string }} options
 * @returns {Promise<{ url: string, close: () => Promise<void> }>}
 */
export async function startTlsFront({ port, upstream, dir }) {
  const { cert, key } = selfSignedCertificate(dir);
  // As a production edge is configured (Cloudflare's minimum TLS version and cipher suites): TLS 1.2
  // and 1.3 only, and in 1.2 only the AEAD ECDHE suites of BCP 195 (RFC 9325 §4.2), which FAPI 2.0
  // Security Profile §5.2.1 requires and its conformance plan checks.
  const server = createServer(
    { cert, key, minVersion: "TLSv1.2", ciphers: BCP195_TLS12, honorCipherOrder: true },
    (req, res) => {
      const forwarded = httpRequest(
        {
          host: "127.0.0.1",
          port: upstream,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, "x-forwarded-proto": "https" },
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.rawHeaders);
          answer.pipe(res);
        },
      );
      forwarded.on("error", (err) => {
        if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
        res.end(`TLS front: ${err.message}`);
      });
      req.pipe(forwarded);
    },
  );
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(undefined));
  });
  return {
    url: `https://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve(undefined))),
  };
}
