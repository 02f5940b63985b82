import type { Config } from "../../shared/config/config";
import { type Client, redirectUriAllowed } from "../../shared/oauth/clients";
import { fetchClientDocument, OutboundFetchError } from "../../shared/oauth/outbound-fetch";
import { OAuthError, type OAuthErrorCode } from "../../shared/platform/errors";
import { invalidRequestPage } from "./errors";
import { withRequestObject } from "./request-object";

/** RFC 9101 §5.2: a request_uri is short (512 ASCII characters SHOULD do); far longer is no request_uri. */
const MAX_REQUEST_URI = 2000;

/** RFC 9101 §5.2.3's media type first; the OpenID Foundation's suite serves `application/jose`. */
const ACCEPT = "application/oauth-authz-req+jwt, application/jwt;q=0.9, */*;q=0.5";

/** A URI without its fragment: how a presented request_uri is matched with a registered one. */
const withoutFragment = (uri: string) => uri.split("#")[0] as string;

/**
 * The authorization request a `request_uri` parameter makes (OIDC Core §6.2, RFC 9101 §5.2): the
 * request object fetched from it, then processed exactly as a `request` parameter
 * (request-object.ts). Without a `request_uri`, or before the client is known, this is
 * withRequestObject alone: nothing is fetched and nothing stored is read, so the plain login pays
 * nothing for it.
 *
 * - The request_uri must be one the client registered (`request_uris`, OIDC Registration §2),
 *   compared without the fragment (the fragment may carry the content's hash, which changes with
 *   it): RFC 9101 §10.4.1's pre-registration, so Keyway fetches only what a client registered.
 * - It is fetched by outbound-fetch.ts's rules (the webhook sender's address rules, one GET, no
 *   redirect followed, 5 s, 64 KB at most; only a 200 is a request object).
 * - Fetched from the client's registered URI, an unsigned object is accepted from a client that
 *   registered no request_object_signing_alg (request-object.ts, RFC 9101 §10.2 (c)).
 *
 * A request_uri not registered, or that could not be fetched, is `invalid_request_uri`; an object
 * that fails a check is `invalid_request_object`. Both are redirected to the client when the query's
 * redirect URI is registered for it, else shown on Keyway's page (as request-object.ts does).
 */
export async function withRequestObjectOrUri(
  config: Config,
  params: Record<string, string>,
  client: Client | null,
): Promise<Record<string, string>> {
  const requestUri = params.request_uri;
  if (requestUri === undefined || !client || params.client_id !== client.client_id)
    return withRequestObject(config, params, client);

  const fail = (code: OAuthErrorCode, description: string): never => {
    const uri = params.redirect_uri;
    if (!uri || !redirectUriAllowed(client, uri)) throw invalidRequestPage(description);
    const mode = params.response_mode === "form_post" ? "form_post" : "query";
    throw new OAuthError(code, description, { redirect: { uri, state: params.state, mode } });
  };

  if (params.request !== undefined) fail("invalid_request", "request and request_uri cannot both be sent");
  if (requestUri.length > MAX_REQUEST_URI) fail("invalid_request_uri", "the request_uri is too long");
  const presented = withoutFragment(requestUri);
  if (!client.request_uris.some((registered) => withoutFragment(registered) === presented))
    fail("invalid_request_uri", "the request_uri is not one the client registered (request_uris)");

  let jwt = "";
  try {
    jwt = (await fetchClientDocument(presented, config.ENVIRONMENT === "production", ACCEPT)).trim();
  } catch (err) {
    if (!(err instanceof OutboundFetchError)) throw err;
    fail("invalid_request_uri", `the request object could not be fetched from the request_uri: ${err.message}`);
  }
  if (!jwt) fail("invalid_request_uri", "the request_uri answered no request object");

  const { request_uri: _, ...query } = params;
  return withRequestObject(config, { ...query, request: jwt }, client, "reference");
}
