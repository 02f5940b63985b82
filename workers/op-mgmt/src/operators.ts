import type { Context } from "hono";
import { z } from "zod";
import { normalizeEmail } from "../../shared/people/email";
import { OAuthError } from "../../shared/platform/errors";
import { json } from "../../shared/platform/http";
import type { AppEnv } from "../../shared/request/context";
import { DEFAULT_TENANT, TENANT_ID } from "../../shared/routing/tenant-route";
import { body } from "./validation";

/**
 * The operators of the web console (issue 43, CONTRACT §11): addresses that may sign in at `/console`,
 * for the whole deployment (`tenant` absent) or for one tenant. Granted and removed with the platform
 * admin token only: a tenant's admin key cannot hand out console access.
 */

export const operatorInput = z
  .object({
    email: z.string().transform((value, ctx) => {
      const email = normalizeEmail(value);
      if (!email) {
        ctx.addIssue({ code: "custom", message: "not an email address" });
        return z.NEVER;
      }
      return email;
    }),
    tenant: z.string().regex(TENANT_ID, "2 to 40 lower-case letters, digits and hyphens").optional(),
  })
  .strict();

export interface OperatorRow {
  email: string;
  tenant: string | null;
  created_at: number;
}

const view = (r: OperatorRow) => ({ email: r.email, tenant: r.tenant, created_at: r.created_at });

function requirePlatform(c: Context<AppEnv>): void {
  if (c.get("adminCaller") !== "platform")
    throw new OAuthError("forbidden", "console operators are managed with the platform admin token");
}

/** `POST /admin/v1/operators`: grants console access; granting a grant held again answers it as it is. */
export async function grantOperator(c: Context<AppEnv>): Promise<Response> {
  requirePlatform(c);
  const input = await body(c, operatorInput);
  const tenant = input.tenant ?? null;
  if (tenant !== null && tenant !== DEFAULT_TENANT) {
    const row = await c.env.DB.prepare("SELECT id FROM tenants WHERE id = ? AND status != 'deleted'")
      .bind(tenant)
      .first();
    if (!row) throw new OAuthError("not_found", "no such tenant");
  }
  await c.env.DB.prepare("INSERT OR IGNORE INTO operators (email, tenant, created_at) VALUES (?, ?, ?)")
    .bind(input.email, tenant, Date.now())
    .run();
  const row = await c.env.DB.prepare(
    "SELECT email, tenant, created_at FROM operators WHERE email = ? AND COALESCE(tenant, '') = ?",
  )
    .bind(input.email, tenant ?? "")
    .first<OperatorRow>();
  return json(view(row as OperatorRow), 201);
}

/** `GET /admin/v1/operators`: every grant, by address. */
export async function listOperators(c: Context<AppEnv>): Promise<Response> {
  requirePlatform(c);
  const { results } = await c.env.DB.prepare(
    "SELECT email, tenant, created_at FROM operators ORDER BY email, COALESCE(tenant, '') LIMIT 1000",
  ).all<OperatorRow>();
  return json({ operators: results.map(view) });
}

/** `DELETE /admin/v1/operators/{email}`: every grant of the address; its console session ends at its next page. */
export async function revokeOperator(c: Context<AppEnv>): Promise<Response> {
  requirePlatform(c);
  const email = normalizeEmail(c.req.param("email") ?? "");
  if (!email) throw new OAuthError("not_found", "no such operator");
  const { meta } = await c.env.DB.prepare("DELETE FROM operators WHERE email = ?").bind(email).run();
  if (!meta.changes) throw new OAuthError("not_found", "no such operator");
  return new Response(null, { status: 204 });
}

/** The grants of an address: null when it has none, "all" for a deployment operator, else tenant ids. */
export async function operatorScope(db: D1Database, email: string): Promise<"all" | string[] | null> {
  const { results } = await db
    .prepare("SELECT tenant FROM operators WHERE email = ?")
    .bind(email)
    .all<{ tenant: string | null }>();
  if (results.length === 0) return null;
  if (results.some((r) => r.tenant === null)) return "all";
  return results.map((r) => r.tenant as string);
}
