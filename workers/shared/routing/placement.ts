import type { Jurisdiction, LocationHint } from "../../../durable-objects/contract/places";
import type { RegionConfig } from "../config/regions";

/**
 * Regions: where a login's objects are placed (the REGIONS table is parsed by config/regions.ts): a
 * region's placement (location hint, jurisdiction) and the region a new login goes to by the
 * request's geography.
 */

/** What routing needs to know of a region: where its objects are created. */
export interface Placement {
  region: string;
  hint?: LocationHint;
  jurisdiction?: Jurisdiction;
}

export function placementOf(regions: RegionConfig, region: string): Placement | null {
  const r = regions.regions[region];
  if (!r) return null;
  return { region, ...(r.hint ? { hint: r.hint } : {}), ...(r.jurisdiction ? { jurisdiction: r.jurisdiction } : {}) };
}

/** The part of `request.cf` placement reads. */
export interface RequestGeo {
  country?: string | null;
  continent?: string | null;
}

/**
 * The region a new login (or device request, or machine token) is placed in: residency, then the
 * country table, then the continent table, then the default. Cloudflare sets `cf.country` to `T1`
 * for Tor and `XX` when unknown; neither is in a table, so both take the continent or the default.
 */
export function regionFor(regions: RegionConfig, geo: RequestGeo | undefined): string {
  const country = typeof geo?.country === "string" ? geo.country.toUpperCase() : undefined;
  if (country && regions.residency && regions.resident.has(country)) return regions.residency.region;
  if (country && regions.countries[country]) return regions.countries[country];
  const continent = typeof geo?.continent === "string" ? geo.continent.toUpperCase() : undefined;
  const byContinent = continent ? regions.continents[continent as keyof RegionConfig["continents"]] : undefined;
  return byContinent ?? regions.default;
}

/** The geography Cloudflare put on a request (absent locally, where the dev gateway may set it). */
export function requestGeo(req: Request): RequestGeo | undefined {
  const cf = (req as { cf?: { country?: unknown; continent?: unknown } }).cf;
  if (!cf) return undefined;
  return {
    country: typeof cf.country === "string" ? cf.country : null,
    continent: typeof cf.continent === "string" ? cf.continent : null,
  };
}
