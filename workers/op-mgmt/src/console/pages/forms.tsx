import type { Context } from "hono";
import type { ConsoleEnv } from "../env";

/**
 * What the tenant's settings pages, the tenants page and the capacity page share: the admin API's
 * validation error put back on the form's fields, and their few styles beyond the layout's.
 */

/**
 * The admin API's 400 description (`field: message; other.field: message`, validation.ts) by the
 * form's field it names (the last segment of its path: `branding.logo_uri` is `logo_uri`). A message
 * that names none of the fields goes to `fallback`, when given.
 */
export function fieldErrors<F extends string>(
  error: string | undefined,
  fields: readonly F[],
  fallback?: F,
): Partial<Record<F, string>> {
  const out: Partial<Record<F, string>> = {};
  if (!error) return out;
  for (const part of error.split("; ")) {
    const m = /^([A-Za-z0-9_.]+): (.+)$/.exec(part);
    const path = m?.[1]?.split(".") ?? [];
    const field = [...path].reverse().find((p): p is F => (fields as readonly string[]).includes(p));
    if (field && m?.[2]) out[field] = out[field] ? `${out[field]}; ${m[2]}` : m[2];
    else if (fallback) out[fallback] = out[fallback] ? `${out[fallback]}; ${part}` : part;
  }
  return out;
}

/** A field's error under it, named by the field's aria-describedby. */
export function FieldError(props: { id: string; message: string | undefined }) {
  return props.message ? (
    <p class="field-error" id={props.id}>
      {props.message}
    </p>
  ) : null;
}

const STYLE = `
.hint{margin:2px 0 8px;font-size:14px;color:#4b5563}
.field-error{margin:2px 0 8px;font-size:14px;color:#991b1b;font-weight:600}
input[aria-invalid=true],select[aria-invalid=true]{border:2px solid #b91c1c}
fieldset{border:1px solid #d1d5db;border-radius:8px;margin:12px 0;padding:4px 12px 8px}
legend{font-weight:600;padding:0 4px}
label.choice{font-weight:400;display:flex;gap:8px;align-items:center}
.actions{display:flex;gap:8px 12px;flex-wrap:wrap;align-items:center;margin:12px 0}
ul.actions li{border:0;padding:0}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:16px}
.card{border:1px solid #e5e7eb;border-radius:10px;padding:4px 16px 12px}
.warn{padding:8px 12px;border-radius:8px;background:#fffbeb;border:1px solid #b45309;color:#78350f}
.badge{display:inline-block;padding:0 8px;border-radius:999px;font-size:14px;border:1px solid currentColor}
.badge.ok{color:#065f46}.badge.off{color:#92400e}
progress{width:100%;height:16px}
figure{margin:12px 0}
figcaption{font-size:14px;color:#4b5563;margin-bottom:6px}
svg text{font:13px system-ui,sans-serif;fill:#1b1f24}
.chart{max-width:100%;height:auto}
table.numbers td.n,table.numbers th.n{text-align:end;font-variant-numeric:tabular-nums}
table.numbers th.id{white-space:nowrap}
.sr-only{position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0,0,0,0);white-space:nowrap;border:0}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px}
dl.facts dt{font-weight:600;color:#374151}
dl.facts dd{margin:0}`;

/** The styles of these pages, with the page's CSP nonce. */
export function PageStyle(props: { c: Context<ConsoleEnv>; extra?: string }) {
  return <style nonce={props.c.get("nonce")}>{`${STYLE}${props.extra ?? ""}`}</style>;
}
