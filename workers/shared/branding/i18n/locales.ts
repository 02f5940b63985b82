/**
 * The languages Keyway has a catalogue for (i18n/index.ts holds them). Import-free: config.ts, which
 * Node loads by type stripping in scripts/deploy.mjs, takes the list from here.
 */
export const LOCALE_TAGS = ["en", "fr", "ar"] as const;
export type Locale = (typeof LOCALE_TAGS)[number];
