// The latency model's inputs (issue 12, docs/performance.md "Where a login's time goes on the planet").
//
// Round-trip times between Cloudflare's nine Durable Object location hints, in ms. Cloudflare publishes
// no such matrix; each hint is stood in for by the AWS region in the same metro area or nearest it, and
// the figures are the public cloudping.co p50 inter-region RTTs for those regions, rounded to 5 ms as
// they stood when this was written. This machine has no internet: they were neither re-measured nor
// re-checked here. A model input (a ±20 % change moves every modeled figure by about that much).
//   wnam us-west-1 (N. California)   enam us-east-1 (N. Virginia)   sam sa-east-1 (São Paulo)
//   weur eu-west-2 (London)          eeur eu-central-1 (Frankfurt)  apac ap-northeast-1 (Tokyo)
//   oc ap-southeast-2 (Sydney)       afr af-south-1 (Cape Town)     me me-south-1 (Bahrain)
export const HINTS = ["wnam", "enam", "sam", "weur", "eeur", "apac", "oc", "afr", "me"];

/** Upper triangle, in HINTS order. */
const UPPER = {
  wnam: { enam: 60, sam: 175, weur: 140, eeur: 150, apac: 105, oc: 140, afr: 285, me: 225 },
  enam: { sam: 115, weur: 75, eeur: 90, apac: 145, oc: 200, afr: 225, me: 165 },
  sam: { weur: 185, eeur: 205, apac: 255, oc: 310, afr: 340, me: 290 },
  weur: { eeur: 15, apac: 215, oc: 265, afr: 150, me: 90 },
  eeur: { apac: 225, oc: 285, afr: 155, me: 80 },
  apac: { oc: 105, afr: 355, me: 160 },
  oc: { afr: 410, me: 180 },
  afr: { me: 235 },
};

/**
 * A Worker and a Durable Object in the same hint area: the Worker runs in the colo nearest the user,
 * the object in one of the area's colos that host Durable Objects, which is often another city.
 */
export const SAME_AREA_MS = 10;

/** Round trip between two hint areas, in ms. */
export function rtt(a, b) {
  if (a === b) return SAME_AREA_MS;
  const v = UPPER[a]?.[b] ?? UPPER[b]?.[a];
  if (v === undefined) throw new Error(`no RTT for ${a}-${b}`);
  return v;
}

/**
 * Where a deployment's logins come from, by hint area: the share of logins, which under first-touch
 * placement is also the chance that a given shard was created in that area (its first request came
 * from there). An assumption, roughly the world's internet users by area; `--shares` overrides it.
 */
export const TRAFFIC_SHARES = {
  wnam: 0.08,
  enam: 0.12,
  sam: 0.08,
  weur: 0.12,
  eeur: 0.08,
  apac: 0.35,
  oc: 0.02,
  afr: 0.08,
  me: 0.07,
};

/** A user in each area, as the dev gateway is told (country, continent). */
export const USERS = {
  wnam: { country: "CA", continent: "NA", city: "Vancouver" },
  enam: { country: "US", continent: "NA", city: "New York" },
  sam: { country: "BR", continent: "SA", city: "São Paulo" },
  weur: { country: "GB", continent: "EU", city: "London" },
  eeur: { country: "PL", continent: "EU", city: "Warsaw" },
  apac: { country: "JP", continent: "AS", city: "Tokyo" },
  oc: { country: "AU", continent: "OC", city: "Sydney" },
  afr: { country: "ZA", continent: "AF", city: "Johannesburg" },
  me: { country: "AE", continent: "AS", city: "Dubai" },
};

/** The REGIONS the model's stack runs with: one region per hint, chosen by country. */
export const MODEL_REGIONS = {
  regions: Object.fromEntries(HINTS.map((h) => [h, { hint: h }])),
  default: "enam",
  countries: { CA: "wnam", US: "enam", BR: "sam", GB: "weur", PL: "eeur", JP: "apac", AU: "oc", ZA: "afr", AE: "me" },
};
