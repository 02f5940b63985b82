import { AUDIT_PARAMS, listAudit } from "../audit";
import { listKeys, rotateKeys } from "../keys";
import { grantOperator, listOperators, operatorInput, revokeOperator } from "../operators";
import { appendGeneration, appendInput, listShards, planInput, planShardCounts } from "../shards";
import { billInput, measureBill, stats } from "../stats";
import { testMailbox } from "../test-mailbox";
import type { AdminRoute } from "./admin-route";

/**
 * Running the deployment: the audit trail, signing keys, the console's operators, shards, stats and
 * the load test's mailbox.
 */
export const OPERATION_ROUTES: readonly AdminRoute[] = [
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
    method: "post",
    path: "/admin/v1/operators",
    summary: "Grant an address the web console, for the deployment or one tenant",
    handler: grantOperator,
    body: operatorInput,
    status: 201,
    scope: "platform",
  },
  {
    method: "get",
    path: "/admin/v1/operators",
    summary: "Who may use the web console",
    handler: listOperators,
    scope: "platform",
  },
  {
    method: "delete",
    path: "/admin/v1/operators/:email",
    summary: "Remove an address's console access",
    handler: revokeOperator,
    status: 204,
    scope: "platform",
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
    method: "post",
    path: "/admin/v1/stats/bill",
    summary:
      "The bill per million logins as the deployment runs: the stats counters over window_seconds, over the sign-ins in it, priced by docs/cost.md",
    handler: measureBill,
    body: billInput,
    scope: "platform",
  },
  {
    method: "get",
    path: "/admin/v1/test-mailbox/:email",
    summary: "Codes mailed to a load-test address",
    handler: testMailbox,
    scope: "tenant",
  },
];
