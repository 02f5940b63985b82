import { randomToken } from "../../../durable-objects/contract/crypto";
import { escapeHtml } from "../../shared/branding/html";
import { pageSecurityHeaders } from "../../shared/platform/http";

/** How the authorization response reaches the client (OAuth 2.0 Multiple Response Types, Form Post Response Mode). */
export type ResponseMode = "query" | "form_post";

/** RFC 6749 §4.1.2 and RFC 9207: the response goes to the redirect URI's query, with `iss`. */
export function authorizationResponseUrl(
  redirectUri: string,
  issuer: string,
  params: Record<string, string | undefined>,
): string {
  const url = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.append(k, v);
  url.searchParams.append("iss", issuer);
  return url.toString();
}

/**
 * The authorization response, success or error, in the request's response mode: a 302 to the query
 * (the default for `code`), or with `response_mode=form_post` (OAuth 2.0 Form Post Response Mode §2)
 * a page whose form posts the parameters to the redirect URI. The page needs no script: its button
 * submits it; a nonce'd one-line script presses it at once. Nothing of it is cached.
 */
export function authorizationResponse(
  redirectUri: string,
  issuer: string,
  params: Record<string, string | undefined>,
  mode: ResponseMode = "query",
  headers: Record<string, string> = {},
): Response {
  if (mode !== "form_post")
    return new Response(null, {
      status: 302,
      headers: {
        Location: authorizationResponseUrl(redirectUri, issuer, params),
        "Cache-Control": "no-store",
        ...headers,
      },
    });
  const nonce = randomToken(16);
  const fields = [...Object.entries(params), ["iss", issuer] as const]
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`)
    .join("");
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Continue</title></head>
<body><main><form method="post" action="${escapeHtml(redirectUri)}">${fields}
<p>Signed in. If nothing happens, continue to the application.</p><button type="submit">Continue</button></form></main>
<script nonce="${nonce}">document.forms[0].submit();</script></body></html>`;
  return new Response(html, { status: 200, headers: { ...pageSecurityHeaders(nonce), ...headers } });
}
