import type { Context } from "hono";
import { z } from "zod";
import { randomToken } from "../../../durable-objects/contract/crypto";
import { displayName } from "../../shared/branding/display-name";
import { hashInitialAccessToken, INITIAL_TOKEN_PREFIX } from "../../shared/oauth/registration-tokens";
import { OAuthError } from "../../shared/platform/errors";
import { json } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { body, queryLimit } from "./validation";

/**
 * Initial access tokens (issue 40, RFC 7591 §3, CONTRACT §9): what a tenant admin hands a developer so
 * a client may register itself at `<issuer>/register` while open registration is off (the default).
 * Shown once, stored as a SHA-256. Single-use unless `multi_use`: a token handed to one developer
 * registers one client, so a leaked one is worth one client at most and its use shows; a multi-use
 * token (a conformance suite, a CI pipeline registering many) is bounded by its expiry and revocable.
 */

const DAY = 86_400;
/** The default lifetime: a week, so a token handed out and forgotten does not live for ever. */
export const DEFAULT_TOKEN_SECONDS = 7 * DAY;

export const registrationTokenInput = z
  .object({
    /** What the token is for, shown in the list. */
    description: displayName(200).optional(),
    /** Seconds until it expires (60 s to a year; a week by default); null for a token that never expires. */
    expires_in: z
      .number()
      .int()
      .min(60)
      .max(365 * DAY)
      .nullable()
      .optional(),
    /** false (the default): spent by the first client it registers; true: registers any number until it expires. */
    multi_use: z.boolean().optional(),
  })
  .strict();

interface TokenRow {
  id: string;
  tenant: string;
  description: string | null;
  multi_use: number;
  uses: number;
  expires_at: number | null;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

function view(r: TokenRow, now = Date.now()) {
  const status = r.revoked_at
    ? "revoked"
    : r.expires_at !== null && r.expires_at <= now
      ? "expired"
      : !r.multi_use && r.uses > 0
        ? "spent"
        : "active";
  return {
    id: r.id,
    tenant: r.tenant,
    description: r.description,
    multi_use: r.multi_use === 1,
    uses: r.uses,
    status,
    expires_at: r.expires_at,
    created_at: r.created_at,
    last_used_at: r.last_used_at,
    revoked_at: r.revoked_at,
  };
}

/** `POST /admin/v1[/tenants/{id}]/registration-tokens` → 201 with the token, shown once. */
export async function createRegistrationToken(c: Context<AppEnv>): Promise<Response> {
  const input = await body(c, registrationTokenInput);
  const tenant = c.get("config").TENANT;
  const token = `${INITIAL_TOKEN_PREFIX}${randomToken(32)}`;
  const now = Date.now();
  const lifetime = input.expires_in === undefined ? DEFAULT_TOKEN_SECONDS : input.expires_in;
  const row: TokenRow = {
    id: `krt_${randomToken(12)}`,
    tenant,
    description: input.description ?? null,
    multi_use: input.multi_use ? 1 : 0,
    uses: 0,
    expires_at: lifetime === null ? null : now + lifetime * 1000,
    created_at: now,
    last_used_at: null,
    revoked_at: null,
  };
  await c.env.DB.prepare(
    `INSERT INTO registration_tokens (id, tenant, token_hash, description, multi_use, expires_at, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?)`,
  )
    .bind(row.id, tenant, await hashInitialAccessToken(token), row.description, row.multi_use, row.expires_at, now)
    .run();
  return json({ ...view(row, now), token }, 201, { "Cache-Control": "no-store" });
}

/** `GET .../registration-tokens`: newest first, without the tokens. */
export async function listRegistrationTokens(c: Context<AppEnv>): Promise<Response> {
  const limit = queryLimit(c, 100, 1000);
  const { results } = await c.env.DB.prepare(
    `SELECT id, tenant, description, multi_use, uses, expires_at, created_at, last_used_at, revoked_at
     FROM registration_tokens WHERE tenant = ? ORDER BY created_at DESC, id LIMIT ?`,
  )
    .bind(c.get("config").TENANT, limit)
    .all<TokenRow>();
  const now = Date.now();
  return json({ registration_tokens: results.map((r) => view(r, now)) });
}

/** `DELETE .../registration-tokens/{id}`: revoked at once (tokens are checked in D1 on every use). */
export async function revokeRegistrationToken(c: Context<AppEnv>): Promise<Response> {
  const { meta } = await c.env.DB.prepare(
    "UPDATE registration_tokens SET revoked_at = ? WHERE id = ? AND tenant = ? AND revoked_at IS NULL",
  )
    .bind(Date.now(), c.req.param("id") ?? "", c.get("config").TENANT)
    .run();
  if (!meta.changes) throw new OAuthError("not_found", "no such registration token");
  return new Response(null, { status: 204 });
}
