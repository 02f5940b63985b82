/**
 * The console acts through the admin API itself (issue 43: one implementation, not two): a console
 * page builds an ordinary admin request and dispatches it into op-mgmt's own app. Instead of a bearer
 * token, the request object is registered here with the operator who sent it; the admin check
 * (`requireAdminOrTenantKey`) looks the request up by identity. A request from outside can never be in
 * this map, so there is nothing to forge: no header, no secret, no token in a browser.
 */
export interface ConsoleCaller {
  /** The operator's verified address (the ID token's `email`), recorded in the audit trail. */
  email: string;
  /** "all" for a deployment operator, else the tenants granted. */
  scope: "all" | readonly string[];
}

const callers = new WeakMap<Request, ConsoleCaller>();

export function markConsoleRequest(req: Request, caller: ConsoleCaller): Request {
  callers.set(req, caller);
  return req;
}

export function consoleCallerOf(req: Request): ConsoleCaller | undefined {
  return callers.get(req);
}
