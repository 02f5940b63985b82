import encoding from "k6/encoding";

export function jsonBody(res) {
  try {
    const v = res.json();
    return v && typeof v === "object" ? v : null;
  } catch (_) {
    return null;
  }
}

export function qs(params) {
  return Object.keys(params)
    .filter((k) => params[k] !== undefined && params[k] !== null)
    .map((k) => `${encodeURIComponent(k)}=${encodeURIComponent(params[k])}`)
    .join("&");
}

/** The query of a URL as an object (k6 has no WHATWG URL). */
export function queryOf(url) {
  const out = {};
  const q = String(url).split("#")[0];
  const i = q.indexOf("?");
  if (i < 0) return out;
  for (const pair of q.slice(i + 1).split("&")) {
    if (!pair) continue;
    const eq = pair.indexOf("=");
    const k = decodeURIComponent((eq < 0 ? pair : pair.slice(0, eq)).replace(/\+/g, " "));
    const v = eq < 0 ? "" : decodeURIComponent(pair.slice(eq + 1).replace(/\+/g, " "));
    out[k] = v;
  }
  return out;
}

/** The URL without its query and fragment. */
export function withoutQuery(url) {
  return String(url).split("#")[0].split("?")[0];
}

/** RFC 6749 §2.3.1: client_id and secret are form-encoded before Basic encoding. */
export function basicAuth(id, secret) {
  const enc = (s) => encodeURIComponent(s).replace(/%20/g, "+");
  return `Basic ${encoding.b64encode(`${enc(id)}:${enc(secret)}`)}`;
}

export function header(res, name) {
  const want = name.toLowerCase();
  for (const k of Object.keys(res.headers)) if (k.toLowerCase() === want) return res.headers[k];
  return undefined;
}

/** A short description of a response for logs: status, error code and a bit of the body. */
export function describe(res) {
  if (!res) return "no response";
  if (res.status === 0) return `no response (${res.error_code}: ${res.error})`;
  const body = typeof res.body === "string" ? res.body.slice(0, 300).replace(/\s+/g, " ") : "";
  return `${res.request.method} ${res.url.split("?")[0]} -> ${res.status} ${body}`;
}
