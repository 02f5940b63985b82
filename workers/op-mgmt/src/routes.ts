import type { Handler } from "hono";
import type { z } from "zod";
import type { AppEnv } from "../../shared/app";
import { AUDIT_PARAMS, listAudit } from "./audit";
import { createClient, createSchema, deleteClient, getClient, listClients, patchClient, patchSchema } from "./clients";
import { listKeys, rotateKeys } from "./keys";
import { openApiDocument } from "./openapi";
import { appendGeneration, appendInput, listShards, planInput, planShardCounts } from "./shards";
import { shardStats } from "./stats";
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
}

export const ADMIN_ROUTES: readonly AdminRoute[] = [
  {
    method: "post",
    path: "/admin/v1/clients",
    summary: "Register a client; its secret is shown once",
    handler: createClient,
    body: createSchema,
    status: 201,
  },
  { method: "get", path: "/admin/v1/clients", summary: "List clients", handler: listClients },
  { method: "get", path: "/admin/v1/clients/:id", summary: "Read a client", handler: getClient },
  {
    method: "patch",
    path: "/admin/v1/clients/:id",
    summary: "Change a client's fields",
    handler: patchClient,
    body: patchSchema,
  },
  { method: "delete", path: "/admin/v1/clients/:id", summary: "Delete a client", handler: deleteClient, status: 204 },
  {
    method: "post",
    path: "/admin/v1/users",
    summary: "Create a user",
    handler: createUser,
    body: userInput,
    status: 201,
  },
  {
    method: "post",
    path: "/admin/v1/users/import",
    summary: "Import up to 1,000 users in one transaction",
    handler: importUsers,
    body: importInput,
  },
  {
    method: "get",
    path: "/admin/v1/users",
    summary: "Find a user by email, or list users by id",
    handler: listUsers,
    query: ["email", "limit", "after"],
  },
  { method: "get", path: "/admin/v1/users/:id", summary: "Read a user", handler: getUser },
  {
    method: "patch",
    path: "/admin/v1/users/:id",
    summary: "Change or clear a user's name",
    handler: patchUser,
    body: userPatch,
  },
  {
    method: "delete",
    path: "/admin/v1/users/:id",
    summary: "Delete a user; every session, code and token ends",
    handler: deleteUser,
    status: 204,
  },
  {
    method: "post",
    path: "/admin/v1/users/:id/revoke",
    summary: "End every session, code and token of a user",
    handler: revokeUser,
  },
  {
    method: "get",
    path: "/admin/v1/audit",
    summary: "The audit trail, newest first",
    handler: listAudit,
    query: [...AUDIT_PARAMS],
  },
  { method: "get", path: "/admin/v1/keys", summary: "The signing keys and which one signs", handler: listKeys },
  { method: "post", path: "/admin/v1/keys/rotate", summary: "Publish the next signing keys now", handler: rotateKeys },
  {
    method: "get",
    path: "/admin/v1/shards",
    summary: "Each store's generations and shard counts",
    handler: listShards,
  },
  {
    method: "post",
    path: "/admin/v1/shards",
    summary: "Append a generation to a store's shards, live",
    handler: appendGeneration,
    body: appendInput,
    status: 201,
  },
  {
    method: "post",
    path: "/admin/v1/shards/plan",
    summary: "Shard counts for the traffic given, with their reasoning",
    handler: planShardCounts,
    body: planInput,
  },
  {
    method: "get",
    path: "/admin/v1/stats",
    summary: "Calls and rows written per shard, D1 queries per isolate",
    handler: shardStats,
  },
  {
    method: "get",
    path: "/admin/v1/test-mailbox/:email",
    summary: "Codes mailed to a load-test address",
    handler: testMailbox,
  },
  {
    method: "get",
    path: "/admin/v1/openapi.json",
    summary: "This document (OpenAPI 3.1)",
    handler: (c) => c.json(openApiDocument(ADMIN_ROUTES, c.get("config").ISSUER)),
  },
];
