import { z } from "zod";

/**
 * SHARDS: each store's shard counts by generation, per region, and the stores whose generations can
 * be appended live (docs/sharding.md). The router builds its per-region and live views from these.
 */

export const STORE_NAMES = ["session", "challenge", "code", "revocation", "refresh"] as const;
export type StoreName = (typeof STORE_NAMES)[number];
/** Stores whose generations can be appended live (POST /admin/v1/shards): the login's five and the entity store. */
export const LIVE_STORES = [...STORE_NAMES, "entity"] as const;
export type LiveStoreName = (typeof LIVE_STORES)[number];

const shardCount = z.number().int().min(1).max(1024);
/**
 * One generation: its shard count, or `{shards, from}` for a generation appended to a running
 * deployment. Every Worker routes ids of a listed generation at once; new ids are issued into it only
 * from `from` on. A rollout (or a live config change) that reaches every Worker before `from` never
 * meets an id a Worker does not know yet (accept before issue).
 */
const generation = z.union([
  shardCount,
  z.object({ shards: shardCount, from: z.iso.datetime({ offset: true }) }).strict(),
]);
const generations = z
  .array(generation)
  .min(1)
  .max(36)
  .transform((list) => ({
    counts: list.map((g) => (typeof g === "number" ? g : g.shards)),
    from: list.map((g) => (typeof g === "number" ? 0 : Date.parse(g.from))),
  }))
  .refine((g) => g.from.every((t, i) => i === 0 || t >= (g.from[i - 1] as number)), {
    message: "a generation's `from` may not be earlier than the one before it",
  });

const storeGenerations = Object.fromEntries(STORE_NAMES.map((s) => [s, generations])) as Record<
  StoreName,
  typeof generations
>;

/** Each store's shard counts by generation; the last entry is the newest generation. */
const rawShardsSchema = z
  .object(storeGenerations)
  .extend({
    /**
     * Shard counts of the two write-behind objects, MailOutbox and AuditBuffer. Optional: they hold
     * only transient rows (a mail waiting for a retry, audit events waiting for the next D1 flush)
     * whose alarms run wherever they are, so a count can change at any time.
     */
    mail: generations.default({ counts: [4], from: [0] }),
    audit: generations.default({ counts: [4], from: [0] }),
    /** Webhook queues (issue 25): an endpoint's messages stay in the shard chosen when it was created. */
    webhook: generations.default({ counts: [4], from: [0] }),
    /**
     * Entities and grants (issue 24): sized by what they hold, not by logins (a login never calls
     * them). An entity stays in the shard its id names; a generation appended when a shard grows past
     * `entity_shard_split_bytes` takes the new ones (docs/storage.md).
     */
    entity: generations.default({ counts: [16], from: [0] }),
    /**
     * A region's own counts (issue 12), for the stores it lists; the others follow the counts above.
     * A region's list is its own history: it only ever grows at the end, like the default's.
     */
    regions: z
      .record(
        z.string().regex(/^[a-z][a-z0-9]{1,7}$/),
        z
          .object(storeGenerations)
          .extend({ mail: generations, audit: generations, webhook: generations, entity: generations })
          .partial()
          .strict(),
      )
      .default({}),
  })
  .strict();

export type ShardedName = Exclude<keyof z.infer<typeof rawShardsSchema>, "regions">;
export type Generations = { counts: number[]; from: number[] };

/**
 * The parsed SHARDS: each store's shard count by generation (`SHARDS.session[gen]`), and, apart,
 * from when each generation may be issued into (`issueFrom`, epoch ms; 0 for at once) and each
 * region's own lists (`regions`; see shardsIn).
 */
export type ShardConfig = Record<ShardedName, number[]> & {
  readonly issueFrom: Readonly<Record<ShardedName, readonly number[]>>;
  readonly regions: Readonly<Record<string, Partial<Record<ShardedName, Generations>>>>;
};

/** A ShardConfig from its lists (the parsed SHARDS; the router builds the per-region and live ones the same way). */
export function shardConfig(
  lists: Record<ShardedName, Generations>,
  regions: Record<string, Partial<Record<ShardedName, Generations>>>,
): ShardConfig {
  const names = Object.keys(lists) as ShardedName[];
  const counts = Object.fromEntries(names.map((n) => [n, lists[n].counts])) as Record<ShardedName, number[]>;
  const issueFrom = Object.fromEntries(names.map((n) => [n, lists[n].from])) as Record<ShardedName, number[]>;
  // Not enumerable: code that walks the stores (Object.keys, JSON) sees only the stores.
  Object.defineProperty(counts, "issueFrom", { value: issueFrom, enumerable: false });
  return Object.defineProperty(counts, "regions", { value: regions, enumerable: false }) as ShardConfig;
}

const shardsSchema = rawShardsSchema.transform((raw): ShardConfig => {
  const { regions, ...lists } = raw;
  return shardConfig(lists, regions as Record<string, Partial<Record<ShardedName, Generations>>>);
});

export { shardsSchema };
