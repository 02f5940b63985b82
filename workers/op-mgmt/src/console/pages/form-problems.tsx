import type { Context } from "hono";
import type { ConsoleEnv } from "../env";

/**
 * Forms of the applications and webhooks pages: what the browser posted, and the admin API's refusal
 * shown beside the form, each problem next to the field it is about, with the operator's input kept.
 * The API says what is wrong as `field.path: message; ...` (validation.ts) or names the field in
 * its sentence (`scope must include openid ...`); a problem about no known field goes at the top.
 */

export interface Problem {
  field: string | null;
  message: string;
}

/** The API's description split into problems, each with the first of `fields` it names (or none). */
export function problemsOf(description: string | undefined, fields: readonly string[]): Problem[] {
  if (!description) return [];
  return description
    .split("; ")
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const pathed = /^([a-z_]+(?:\.[\w]+)*): (.+)$/s.exec(part);
      const path = pathed?.[1] ?? "";
      // The longest field the path is or is under: `branding.logo_uri`, `redirect_uris` for `redirect_uris.0`.
      const under = fields.filter((f) => path === f || path.startsWith(`${f}.`)).sort((a, b) => b.length - a.length)[0];
      if (under) return { field: under, message: part };
      const text = path === "body" && pathed ? (pathed[2] as string) : part;
      let first: { field: string; at: number } | null = null;
      for (const field of fields) {
        const at = new RegExp(`(^|[^a-z_])${field}([^a-z_]|$)`).exec(text)?.index;
        if (at !== undefined && (!first || at < first.at)) first = { field, at };
      }
      return { field: first?.field ?? null, message: text };
    });
}

/** What the browser posted (the guard has parsed it already; Hono keeps the parse). */
export interface Posted {
  text(name: string): string;
  all(name: string): string[];
  has(name: string): boolean;
}

export async function posted(c: Context<ConsoleEnv>): Promise<Posted> {
  const body = await c.req.parseBody({ all: true });
  const values = (name: string): string[] => {
    const v = body[name];
    return (Array.isArray(v) ? v : v === undefined ? [] : [v]).filter((x): x is string => typeof x === "string");
  };
  return {
    text: (name) => (values(name)[0] ?? "").trim(),
    all: values,
    has: (name) => values(name).length > 0,
  };
}

/** A textarea's lines, trimmed, without the empty ones. */
export const lines = (text: string) =>
  text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean);

export const problemId = (field: string) => `problem-${field.replace(/[^a-z0-9_-]/gi, "-")}`;

/** The problems about `field`, beside it (the field names this element in aria-describedby). */
export function FieldProblems(props: { problems: Problem[]; field: string }) {
  const mine = props.problems.filter((p) => p.field === props.field);
  if (!mine.length) return null;
  return (
    <p class="field-problem" id={problemId(props.field)}>
      {mine.map((p) => (
        <span>{p.message} </span>
      ))}
    </p>
  );
}

/** The form's summary of a refusal: an alert at the top of the form, naming every problem. */
export function ProblemSummary(props: { problems: Problem[]; heading: string }) {
  if (!props.problems.length) return null;
  return (
    <div class="error" role="alert">
      <p>{props.heading}</p>
      <ul>
        {props.problems.map((p) => (
          <li>{p.message}</li>
        ))}
      </ul>
    </div>
  );
}

/** A labelled input (or textarea) with its hint and its problems, described by both. */
export function Field(props: {
  name: string;
  label: string;
  value: string;
  problems: Problem[];
  hint?: string | undefined;
  /** The problems' field, when it is not the input's name (`branding.logo_uri`, say). */
  field?: string;
  multiline?: boolean;
  type?: "text" | "url" | "datetime-local";
  required?: boolean;
  /** URLs, ids and codes read left to right in an Arabic page too. */
  ltr?: boolean;
  autocomplete?: string;
}) {
  const field = props.field ?? props.name;
  const id = `f-${props.name.replace(/[^a-z0-9_-]/gi, "-")}`;
  const invalid = props.problems.some((p) => p.field === field);
  const described =
    [props.hint ? `${id}-hint` : null, invalid ? problemId(field) : null].filter(Boolean).join(" ") || undefined;
  const common = {
    id,
    name: props.name,
    "aria-describedby": described,
    "aria-invalid": invalid ? "true" : undefined,
    dir: props.ltr ? "ltr" : undefined,
    required: props.required,
  };
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      {props.hint ? (
        <p class="hint" id={`${id}-hint`}>
          {props.hint}
        </p>
      ) : null}
      {props.multiline ? (
        <textarea {...common} rows={3}>
          {props.value}
        </textarea>
      ) : (
        <input
          {...common}
          type={props.type ?? "text"}
          value={props.value}
          autocomplete={props.autocomplete ?? "off"}
          spellcheck={props.ltr ? false : undefined}
        />
      )}
      <FieldProblems problems={props.problems} field={field} />
    </div>
  );
}

/** The forms' own look: checkbox rows, hints, problems beside fields, scrolling tables. */
export const FORM_STYLE = `
.field{margin:12px 0}
.hint{margin:0 0 4px;font-size:14px;color:#4b5563}
.field-problem{margin:4px 0 0;color:#991b1b;font-weight:600}
[aria-invalid=true]{border-color:#b91c1c;border-width:2px}
fieldset{border:1px solid #d1d5db;border-radius:8px;margin:12px 0;padding:8px 12px}
legend{font-weight:600;padding:0 4px}
label.check{display:flex;gap:8px;align-items:baseline;font-weight:400;margin:4px 0}
.columns{columns:2 16em}
.actions{display:flex;gap:8px;flex-wrap:wrap;align-items:center;margin:12px 0}
.scroll{overflow-x:auto}
input[type=text],input[type=url],textarea{width:100%}
.secret-box{margin:12px 0}
code.secret{display:inline-block;margin:2px 0}
code.event{white-space:nowrap;overflow-wrap:normal}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:8px 16px;align-items:baseline}
dl.facts dt{font-weight:600;color:#374151}
dl.facts dd{margin:0}
.badge{display:inline-block;padding:0 8px;border-radius:999px;font-size:14px;border:1px solid #6b7280}
.badge.ok{border-color:#047857;color:#065f46}
.badge.bad{border-color:#b91c1c;color:#991b1b}
section.danger{border-top:2px solid #fecaca;margin-top:24px}`;

/** The page's style element, with the CSP nonce. */
export function FormStyle(props: { c: Context<ConsoleEnv> }) {
  return <style nonce={props.c.get("nonce")}>{FORM_STYLE}</style>;
}
