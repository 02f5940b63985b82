import { webhookUrlProblem } from "../events/webhooks/endpoints";

/**
 * The one way Keyway fetches a document a client named: its sector identifier document (OIDC
 * Registration §5), its JWKS (`jwks_uri`, client-keys.ts) and its request objects (`request_uri`,
 * op-auth's request-uri.ts). By the webhook sender's address rules (webhookUrlProblem: https only in
 * production; no credentials; no private, link-local or reserved address literal; http to a loopback
 * address only outside production), one GET, no redirect followed, a 5 s deadline, 64 KB at most,
 * and only a `200` is a document. docs/security.md.
 */

/** How long a client's document may take to arrive, and how large it may be. */
export const OUTBOUND_TIMEOUT_MS = 5_000;
export const OUTBOUND_MAX_BYTES = 64 * 1024;

/** Why a document could not be had, in words a client's developer can act on (never a 500). */
export class OutboundFetchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OutboundFetchError";
  }
}

/**
 * The body of the document at `url`, as text. A fragment in `url` is dropped (it is never sent,
 * RFC 3986 §3.5). Throws OutboundFetchError for a refused address, a failed or slow fetch, an answer
 * other than 200 (a redirect included) and a body over the size cap.
 */
export async function fetchClientDocument(url: string, production: boolean, accept: string): Promise<string> {
  const target = url.split("#")[0] as string;
  const problem = webhookUrlProblem(target, production);
  if (problem) throw new OutboundFetchError(problem.replace(/^url /, ""));
  try {
    const res = await fetch(target, {
      headers: { Accept: accept },
      redirect: "manual",
      signal: AbortSignal.timeout(OUTBOUND_TIMEOUT_MS),
    });
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new OutboundFetchError(
        `answered ${res.status}${res.status >= 300 && res.status < 400 ? " (redirects are not followed)" : ""}`,
      );
    }
    return await readCapped(res);
  } catch (err) {
    if (err instanceof OutboundFetchError) throw err;
    const timedOut = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");
    throw new OutboundFetchError(timedOut ? `no answer within ${OUTBOUND_TIMEOUT_MS} ms` : "could not be fetched");
  }
}

async function readCapped(res: Response): Promise<string> {
  const tooLarge = () => new OutboundFetchError(`the document is larger than ${OUTBOUND_MAX_BYTES} bytes`);
  const declared = Number(res.headers.get("content-length") ?? 0);
  if (declared > OUTBOUND_MAX_BYTES) {
    await res.body?.cancel();
    throw tooLarge();
  }
  const reader = res.body?.getReader();
  if (!reader) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > OUTBOUND_MAX_BYTES) {
      await reader.cancel();
      throw tooLarge();
    }
    chunks.push(value);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.byteLength;
  }
  return new TextDecoder().decode(all);
}
