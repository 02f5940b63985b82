/**
 * Where a Durable Object may be placed (issue 12): the location hints and jurisdictions a region
 * names, and a shard address carries (shard-address.ts). The region table itself, with its
 * countries and continents, is configuration (workers/shared/config/regions.ts).
 */

/** Cloudflare's location hints (developers.cloudflare.com/durable-objects/reference/data-location/). */
export const LOCATION_HINTS = ["wnam", "enam", "sam", "weur", "eeur", "apac", "oc", "afr", "me"] as const;
export type LocationHint = (typeof LOCATION_HINTS)[number];

/** Durable Object jurisdictions: objects created in one never leave it. */
export const JURISDICTIONS = ["eu", "us", "fedramp"] as const;
export type Jurisdiction = (typeof JURISDICTIONS)[number];
