import type { Handler } from "hono";
import type { z } from "zod";
import type { AppEnv } from "../../shared/app";
import { AUDIT_PARAMS, listAudit } from "./audit";
import { createClient, createSchema, deleteClient, getClient, listClients, patchClient, patchSchema } from "./clients";
import { listKeys, rotateKeys } from "./keys";
import { openApiDocument } from "./openapi";
import { appendGeneration, appendInput, listShards, planInput, planShardCounts } from "./shards";
import { stats } from "./stats";
import {
  adminKeyInput,
  createAdminKey,
  createTenant,
  deleteTenant,
  getTenant,
  listAdminKeys,
  listTenants,
  patchTenant,
  revokeAdminKey,
  tenantInput,
  tenantPatch,
} from "./tenants";
import { testMailbox } from "./test-mailbox";
import {
  createUser,
  deleteUser,
  getUser,
  importInput,
  importUsers,
  listUsers,
  patchUser,
  revokeUser,
  userInput,
  userPatch,
} from "./users";
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listWebhooks,
  patchWebhook,
  replayInput,
  replayWebhook,
  rotateInput,
  rotateWebhookSecret,
  testWebhook,
  webhookAttempts,
  webhookInput,
  webhookMessages,
  webhookPatch,
} from "./webhooks";

/**
 * The admin API, one row per endpoint: op-mgmt registers its handlers from this table, and the
 * OpenAPI document (`GET /admin/v1/openapi.json`) is generated from it, request bodies from the very
 * zod schemas the handlers validate with. A route cannot exist without being documented.
 */
export interface AdminRoute {
  method: "get" | "post" | "patch" | "delete";
  /** Hono's path syntax (`:id`). */
  path: string;
  summary: string;
  handler: Handler<AppEnv>;
  /** The JSON body's schema, as `body()` parses it. */
  body?: z.ZodType;
  /** Query parameters the handler reads (it refuses others where it says so). */
  query?: readonly string[];
  /** The success status, when it is not 200. */
  status?: 201 | 204;
  /**
   * Who the route is for (issue 23): `tenant` routes are served at their path (the default tenant's)
   * and under `/admin/v1/tenants/{tenant}` for each tenant, where a tenant's admin key opens them;
   * `platform` routes only at their path, to the platform token; `scoped` routes only under a tenant.
   */
  scope: "tenant" | "platform" | "scoped";
}

export const ADMIN_ROUTES: readonly AdminRoute[] = [
  {
    method: "post",
    path: "/admin/v1/webhooks",
    summary: "Add a webhook endpoint: its URL and the events it wants; its signing secret is shown once",
    handler: createWebhook,
    body: webhookInput,
    status: 201,
    scope: "tenant",
  },
  {
    method: "get",
    path: "/admin/v1/webhooks",
    summary: "List webhook endpoints",
    handler: listWebhooks,
    scope: "tenant",
  },
  {
    method: "get",
    path: "/admin/v1/webhooks/:id",
    summary: "Read a webhook endpoint",
    handler: getWebhook,
    scope: "tenant",
  },
  {
    method: "patch",
    path: "/admin/v1/webhooks/:id",
    summary: "Change a webhook endpoint's URL, events or description, or disable or enable it",
    handler: patchWebhook,
    body: webhookPatch,
    scope: "tenant",
  },
  {
    method: "delete",
    path: "/admin/v1/webhooks/:id",
    summary: "Delete a webhook endpoint",
    handler: deleteWebhook,
    status: 204,
    scope: "tenant",
  },
  {
    method: "post",
    path: "/admin/v1/webhooks/:id/rotate-secret",
    summary: "A new signing secret, shown once; the old one also signs for overlap_seconds",
    handler: rotateWebhookSecret,
    body: rotateInput,
    scope: "tenant",
  },
  {
    method: "post",
    path: "/admin/v1/webhooks/:id/test",
    summary: "Send a webhook.test event to this endpoint",
    handler: testWebhook,
    scope: "tenant",
  },
  {
    method: "get",
    path: "/admin/v1/webhooks/:id/attempts",
    summary: "The endpoint's latest delivery attempts: status, latency, error, next retry",
    handler: webhookAttempts,
    query: ["limit"],
    scope: "tenant",
  },
  {
    method: "get",
    path: "/admin/v1/webhooks/:id/messages",
    summary: "The endpoint's messages, newest first, by status (pending, delivered, failed)",
    handler: webhookMessages,
    query: ["status", "limit"],
    scope: "tenant",
  },
  {
    method: "post",
    path: "/admin/v1/webhooks/:id/replay",
    summary: "Send one message again (message_id), or every message since a time (since)",
    handler: replayWebhook,
    body: replayInput,
    scope: "tenant",
  },
  {
    method: "post",
    path: "/admin/v1/tenants",
    summary: "Create a tenant: its own issuer, keys, clients, users and policy",
    handler: createTenant,
    body: tenantInput,
    status: 201,
    scope: "platform",
  },
  {
    method: "get",
    path: "/admin/v1/tenants",
    summary: "List tenants by id, `default` first",
    handler: listTenants,
    query: ["limit", "after"],
    scope: "platform",
  },
  { method: "get", path: "/admin/v1/tenants/:tenant", summary: "Read a tenant", handler: getTenant, scope: "platform" },
  {
    method: "patch",
    path: "/admin/v1/tenants/:tenant",
    summary: "Rename, disable or enable a tenant, or change its policy, sign-up or mail",
    handler: patchTenant,
    body: tenantPatch,
    scope: "platform",
  },
  {
    method: "delete",
    path: "/admin/v1/tenants/:tenant",
    summary: "Delete a tenant: its users, clients and keys, and every grant it issued",
    handler: deleteTenant,
    status: 204,
    scope: "platform",
  },
  {
    method: "post",
    path: "/admin/v1/admin-keys",
    summary: "Create an admin key for this tenant's routes only; shown once",
    handler: createAdminKey,
    body: adminKeyInput,
    status: 201,
    scope: "scoped",
  },
  {
    method: "get",
    path: "/admin/v1/admin-keys",
    summary: "List this tenant's admin keys",
    handler: listAdminKeys,
    scope: "scoped",
  },
  {
    method: "delete",
    path: "/admin/v1/admin-keys/:id",
    summary: "Revoke an admin key",
    handler: revokeAdminKey,
    status: 204,
    scope: "scoped",
  },
  {
    method: "post",
    path: "/admin/v1/clients",
    summary: "Register a client; its secret is shown once",
    handler: createClient,
    body: createSchema,
    status: 201,
    scope: "tenant",
  },
  { method: "get", path: "/admin/v1/clients", summary: "List clients", handler: listClients, scope: "tenant" },
  { method: "get", path: "/admin/v1/clients/:id", summary: "Read a client", handler: getClient, scope: "tenant" },
  {
    method: "patch",
    path: "/admin/v1/clients/:id",
    summary: "Change a client's fields",
    handler: patchClient,
    body: patchSchema,
    scope: "tenant",
  },
  {
    method: "delete",
    path: "/admin/v1/clients/:id",
    summary: "Delete a client",
    handler: deleteClient,
    status: 204,
    scope: "tenant",
  },
  {
    method: "post",
    path: "/admin/v1/users",
    summary: "Create a user",
    handler: createUser,
    body: userInput,
    status: 201,
    scope: "tenant",
  },
  {
    method: "post",
    path: "/admin/v1/users/import",
    summary: "Import up to 1,000 users in one transaction",
    handler: importUsers,
    body: importInput,
    scope: "tenant",
  },
  {
    method: "get",
    path: "/admin/v1/users",
    summary: "Find a user by email, or list users by id",
    handler: listUsers,
    query: ["email", "limit", "after"],
    scope: "tenant",
  },
  { method: "get", path: "/admin/v1/users/:id", summary: "Read a user", handler: getUser, scope: "tenant" },
  {
    method: "patch",
    path: "/admin/v1/users/:id",
    summary: "Change or clear a user's name",
    handler: patchUser,
    body: userPatch,
    scope: "tenant",
  },
  {
    method: "delete",
    path: "/admin/v1/users/:id",
    summary: "Delete a user; every session, code and token ends",
    handler: deleteUser,
    status: 204,
    scope: "tenant",
  },
  {
    method: "post",
    path: "/admin/v1/users/:id/revoke",
    summary: "End every session, code and token of a user",
    handler: revokeUser,
    scope: "tenant",
  },
  {
    method: "get",
    path: "/admin/v1/audit",
    summary: "The audit trail, newest first",
    handler: listAudit,
    query: [...AUDIT_PARAMS],
    scope: "tenant",
  },
  {
    method: "get",
    path: "/admin/v1/keys",
    summary: "The signing keys and which one signs",
    handler: listKeys,
    scope: "tenant",
  },
  {
    method: "post",
    path: "/admin/v1/keys/rotate",
    summary: "Publish the next signing keys now",
    handler: rotateKeys,
    scope: "tenant",
  },
  {
    method: "get",
    path: "/admin/v1/shards",
    summary: "Each store's generations and shard counts",
    handler: listShards,
    // CONTRACT §8: every §5 route is also under a tenant; the shards are the deployment's, shared by all.
    scope: "tenant",
  },
  {
    method: "post",
    path: "/admin/v1/shards",
    summary: "Append a generation to a store's shards, live",
    handler: appendGeneration,
    body: appendInput,
    status: 201,
    scope: "platform",
  },
  {
    method: "post",
    path: "/admin/v1/shards/plan",
    summary: "Shard counts for the traffic given, with their reasoning",
    handler: planShardCounts,
    body: planInput,
    scope: "platform",
  },
  {
    method: "get",
    path: "/admin/v1/stats",
    summary:
      "Calls and rows written per shard, D1 queries per isolate; under a tenant, its users, clients, keys and sign-ins",
    handler: stats,
    scope: "tenant",
  },
  {
    method: "get",
    path: "/admin/v1/test-mailbox/:email",
    summary: "Codes mailed to a load-test address",
    handler: testMailbox,
    scope: "tenant",
  },
  {
    method: "get",
    path: "/admin/v1/openapi.json",
    summary: "This document (OpenAPI 3.1)",
    handler: (c) => c.json(openApiDocument(ADMIN_ROUTES, c.get("config").ISSUER)),
    scope: "platform",
  },
];
