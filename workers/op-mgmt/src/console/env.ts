import type { Locale } from "../../../shared/branding/i18n/locales";
import type { Env } from "../../../shared/platform/env";
import type { AppEnv } from "../../../shared/request/context";

/** An operator signed in to the console, as every page after the guard (operator.ts) sees them. */
export interface Operator {
  email: string;
  /** The session's CSRF token: every form carries it, every POST is refused without it. */
  csrf: string;
  /** "all" for a deployment operator, else the tenants granted (`operators` table). */
  scope: "all" | string[];
}

/** The tenant a `/console/t/{tenant}/...` page is about, once the guard has let the operator in. */
export interface ConsoleTenant {
  id: string;
  name: string;
  status: string;
}

/** The console's Hono environment: the app's own variables, and what the console's guard sets. */
export type ConsoleEnv = {
  Bindings: Env;
  Variables: AppEnv["Variables"] & {
    operator: Operator;
    locale: Locale;
    /** The CSP nonce of the page being rendered (styles and the small scripts of progressive enhancement). */
    nonce: string;
    tenant: ConsoleTenant;
  };
};
