import type { Context } from "hono";
import { sha256 } from "../../../durable-objects/contract/crypto";
import { admitNewWork } from "../../shared/app/app";
import type { Config } from "../../shared/config/config";
import { authenticateClient, type Client, redirectUriAllowed } from "../../shared/oauth/clients";
import { dpopProof } from "../../shared/oauth/dpop";
import type { Env } from "../../shared/platform/env";
import { OAuthError } from "../../shared/platform/errors";
import { json, NO_STORE, readForm } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { issueSealedId, openSealedId } from "../../shared/routing/sealed-id";
import { shard } from "../../shared/routing/stores";
import { validateAuthorizeRequest } from "./authorize-request";
import { pageError } from "./errors";
import { withRequestObject } from "./request-object";

/** RFC 9126 §2.2: the URN prefix of a request_uri this server made for a pushed request. */
export const PUSHED_REQUEST_URI = "urn:ietf:params:oauth:request_uri:";

/** The client authentication parameters of the pushed body (RFC 6749 §2.3, RFC 7523): not the request's. */
const CLIENT_AUTH = new Set(["client_secret", "client_assertion", "client_assertion_type"]);

/** What a pushed request_uri carries sealed: the request's parameters, checked when pushed. */
interface PushedState {
  params: Record<string, string>;
  exp: number;
}

/**
 * POST /par: the pushed authorization request endpoint (RFC 9126 §2). The client authenticates as at
 * the token endpoint, and its request is checked as /authorize would check it (a `request` object
 * included, RFC 9126 §3); every error is JSON here, since no redirect URI is trusted yet (§2.3).
 *
 * The request is sealed into the `request_uri` itself (`urn:ietf:params:oauth:request_uri:<sealed
 * id>`), so pushing writes nothing; the id names a RevocationStore shard, where /authorize spends it
 * once (openPushedRequest). A PAR login thus costs one call and one row more than a plain one.
 */
export async function pushAuthorizationRequest(c: Context<AppEnv>): Promise<Response> {
  const config = c.get("config");
  // A pushed request begins a login: new work, shed under overload like /authorize.
  admitNewWork(c);
  const form = await readForm(c.req.raw);
  const client = await authenticateClient(c.env, config, c.req.raw, form, "par");
  if (form.request_uri !== undefined)
    throw new OAuthError("invalid_request", "request_uri cannot be pushed (RFC 9126 §2.1)");
  // The authenticated client is the request's: a client_id in the body must name it (§2.1).
  if (form.client_id !== undefined && form.client_id !== client.client_id)
    throw new OAuthError("invalid_request", "client_id is not the authenticated client's");
  const pushed: Record<string, string> = { client_id: client.client_id };
  for (const [name, value] of Object.entries(form)) if (!CLIENT_AUTH.has(name)) pushed[name] = value;
  // RFC 9449 §10.1: a DPoP proof here binds the code to its key, as `dpop_jkt` would; both must agree.
  const proof = await dpopProof(c.env, config, c.req.raw, { path: "/par" });
  if (proof) {
    if (pushed.dpop_jkt !== undefined && pushed.dpop_jkt !== proof.jkt)
      throw new OAuthError("invalid_dpop_proof", "dpop_jkt is not the thumbprint of the DPoP proof's key");
    pushed.dpop_jkt = proof.jkt;
  }

  // Checked now, and again at /authorize against the client's registration as it is then; an
  // id_token_hint is checked there, where the session is.
  const params = await asJsonErrors(async () => {
    const merged = await withRequestObject(config, pushed, client, "pushed");
    validateAuthorizeRequest(merged, client);
    return merged;
  });

  const ttl = config.POLICY.pushed_request_ttl_seconds;
  const state: PushedState = { params, exp: Date.now() + ttl * 1000 };
  const { value } = await issueSealedId(config, "par", "pushed-request", state, { region: c.get("region") });
  // §2.2: 201 with the request_uri and its lifetime.
  return json({ request_uri: `${PUSHED_REQUEST_URI}${value}`, expires_in: ttl }, 201, NO_STORE);
}

/**
 * The parameters of the pushed request an authorization request names by its `request_uri`, spent
 * once (RFC 9126 §4: single use, short lived). Only the pushed parameters count: the query's are
 * ignored but `client_id`, which must be the pushing client's.
 *
 * A request_uri Keyway did not make, or made for another client, is `invalid_request_uri` on Keyway's
 * page: no redirect URI is trusted for it. One that is Keyway's and the client's but expired or used
 * already goes back to the client as `invalid_request_uri` (RFC 9101 §7), at the redirect URI and with
 * the state it pushed, once that URI is checked against the client's registration again.
 */
export async function openPushedRequest(
  env: Env,
  config: Config,
  query: Record<string, string>,
  client: Client | null,
): Promise<Record<string, string>> {
  const requestUri = query.request_uri as string;
  const onPage = (detail: string): never => {
    throw pageError("err.invalid_request.title", "err.invalid_request.message", {
      code: "invalid_request_uri",
      detail,
    });
  };
  if (!client || query.client_id !== client.client_id)
    onPage("client_id is required with a request_uri and must be the client that pushed it");
  const opened = await openSealedId<PushedState>(
    config,
    "par",
    "pushed-request",
    requestUri.slice(PUSHED_REQUEST_URI.length),
  );
  if (!opened) return onPage("the request_uri is not one this server issued");
  const { params, exp } = opened.state;
  if (params.client_id !== query.client_id) onPage("the request_uri was pushed by another client");
  const toClient = (description: string): never => {
    const uri = params.redirect_uri;
    if (!uri || !redirectUriAllowed(client as Client, uri)) return onPage(description);
    const mode = params.response_mode === "form_post" ? "form_post" : "query";
    throw new OAuthError("invalid_request_uri", description, { redirect: { uri, state: params.state, mode } });
  };
  if (exp <= Date.now()) toClient("the request_uri has expired: push the request again");
  const first = await shard(env, "revocation", opened.id.ref).spendOnce(`par:${await sha256(opened.id.id)}`, exp);
  if (!first) toClient("the request_uri was used already: push the request again");
  return params;
}

/** The request's errors as JSON (RFC 9126 §2.3): nothing is redirected from the PAR endpoint. */
async function asJsonErrors<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (!(err instanceof OAuthError)) throw err;
    throw new OAuthError(err.code, err.description, { status: 400 });
  }
}
