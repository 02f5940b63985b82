import { z } from "zod";
import { JURISDICTIONS, LOCATION_HINTS } from "../../../durable-objects/contract/places.ts";

/**
 * Regions (issue 12): where a login's Durable Objects live. A region is a named placement, a
 * Durable Object location hint or a jurisdiction, with its own shards; every issued id names the
 * region it was placed in, so it keeps its route whatever the region table says later.
 *
 * A new login is placed in the region its first request maps to: `request.cf.country` through
 * `countries` (residency first), else `request.cf.continent` through `continents`, else `default`.
 * Every later object of that login (code, session, refresh family, token jtis) follows the login's
 * region, not the region of whoever calls later (a relying party's back end calling /token from
 * another continent does not move a European user's refresh family out of Europe).
 */

/**
 * The region of every deployment that configures none, and of every id issued before ids named
 * their region: no hint, no jurisdiction (Cloudflare places each object near its first request), and
 * its objects keep the names they had (`session:g0:s1`).
 */
export const GLOBAL_REGION = "global";

/** The 27 EU member states and Iceland, Liechtenstein and Norway (ISO 3166-1 alpha-2; Greece is GR here). */
export const EEA_COUNTRIES = [
  "AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE", "IT", "LV", "LT", "LU",
  "MT", "NL", "PL", "PT", "RO", "SK", "SI", "ES", "SE", "IS", "LI", "NO",
] as const; // biome-ignore format: a table

/** `request.cf.continent` values. */
const CONTINENTS = ["AF", "AN", "AS", "EU", "NA", "OC", "SA"] as const;

const regionName = z
  .string()
  .regex(/^[a-z][a-z0-9]{1,7}$/, "a region name is 2 to 8 lower-case letters and digits, starting with a letter");
const country = z.string().regex(/^[A-Z]{2}$/, "a country is an ISO 3166-1 alpha-2 code");

const regionSchema = z
  .object({
    /** Where Cloudflare creates the region's objects (a hint: honoured when an object is first created). */
    hint: z.enum(LOCATION_HINTS).optional(),
    /** The jurisdiction the region's objects are created in and never leave. */
    jurisdiction: z.enum(JURISDICTIONS).optional(),
  })
  .strict();

export const regionsSchema = z
  .object({
    regions: z.record(regionName, regionSchema).refine((r) => Object.keys(r).length >= 1, "at least one region"),
    /** The region of a request whose country and continent map to none (or that has no `cf`). */
    default: regionName,
    /**
     * The region whose shards count wrong codes for an address across every region (docs/security.md):
     * one place per address, so guesses spread over regions still meet one hourly limit.
     */
    home: regionName.optional(),
    continents: z.partialRecord(z.enum(CONTINENTS), regionName).default({}),
    countries: z.record(country, regionName).default({}),
    /**
     * Data residency: requests from these countries are placed in this region, whose objects must be
     * in a jurisdiction. `"EEA"` in the list stands for the 30 EEA countries. Checked before
     * `countries` and `continents`, and never overridden by them.
     */
    residency: z
      .object({ region: regionName, countries: z.array(z.union([country, z.literal("EEA")])).min(1) })
      .strict()
      .optional(),
  })
  .strict()
  .superRefine((r, ctx) => {
    const known = (name: string, path: (string | number)[]) => {
      if (!(name in r.regions)) ctx.addIssue({ code: "custom", path, message: `region ${name} is not in regions` });
    };
    // A region's jurisdiction is part of its name (`eu`, `eu2`, `us`, `fedramp`), as the name is part
    // of every id: config can never move a region's live objects into or out of a jurisdiction (the
    // same name in another jurisdiction is another, empty object). Moving means a new region.
    for (const [name, region] of Object.entries(r.regions)) {
      const named = JURISDICTIONS.find((j) => name.startsWith(j));
      if (region.jurisdiction !== named)
        ctx.addIssue({
          code: "custom",
          path: ["regions", name],
          message: named
            ? `a region named ${name} is in the ${named} jurisdiction: say "jurisdiction": "${named}"`
            : `a region in the ${region.jurisdiction} jurisdiction is named after it (${region.jurisdiction}, ${region.jurisdiction}2, ...)`,
        });
    }
    known(r.default, ["default"]);
    if (r.home) known(r.home, ["home"]);
    for (const [k, v] of Object.entries(r.continents)) known(v as string, ["continents", k]);
    for (const [k, v] of Object.entries(r.countries)) known(v, ["countries", k]);
    const g = r.regions[GLOBAL_REGION];
    if (g && (g.hint || g.jurisdiction))
      ctx.addIssue({
        code: "custom",
        path: ["regions", GLOBAL_REGION],
        message: "the global region is placed by first request: no hint, no jurisdiction",
      });
    if (r.residency) {
      known(r.residency.region, ["residency", "region"]);
      if (!r.regions[r.residency.region]?.jurisdiction)
        ctx.addIssue({
          code: "custom",
          path: ["residency", "region"],
          message: "the residency region must have a jurisdiction",
        });
    }
  })
  .transform((r) => {
    const resident = new Set((r.residency?.countries ?? []).flatMap((c) => (c === "EEA" ? [...EEA_COUNTRIES] : [c])));
    return { ...r, home: r.home ?? r.default, resident };
  });

export type RegionConfig = z.output<typeof regionsSchema>;

export const DEFAULT_REGIONS = JSON.stringify({ regions: { [GLOBAL_REGION]: {} }, default: GLOBAL_REGION });
