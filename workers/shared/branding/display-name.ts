import { z } from "zod";

/**
 * Unicode's bidirectional formatting characters (UAX #9 §2): the embeddings and overrides LRE, RLE,
 * PDF, LRO, RLO (U+202A–U+202E), the isolates LRI, RLI, FSI, PDI (U+2066–U+2069) and the marks LRM,
 * RLM (U+200E, U+200F) and ALM (U+061C). In a name they reorder what a page or a mail shows around it
 * (an RLO turns `moc.elppa` into `apple.com`), so a name that holds one is refused, not cleaned: the
 * admin sees why, and what is stored is what was sent.
 */
const BIDI_CONTROLS = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;
/** C0 and C1 controls and the line and paragraph separators: a name is one line of text. */
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/**
 * A name people see (issue 38): a tenant's, a client's, a product's, an organization's or entity's,
 * a user's, a mail sender's. Trimmed, 1 to `max` characters, one line, no bidirectional controls;
 * the pages and the mail isolate it in its own direction instead (docs/pages.md).
 */
export function displayName(max: number) {
  return z
    .string()
    .trim()
    .min(1)
    .max(max)
    .refine(
      (v) => !BIDI_CONTROLS.test(v),
      "must not contain bidirectional control characters (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C)",
    )
    .refine((v) => !CONTROLS.test(v), "must be one line, without control characters");
}
