import { afterEach, describe, expect, it } from "vitest";
import { frontDoor } from "../../workers/dev-gateway/front-door";
import gateway from "../../workers/dev-gateway/index";
import { loginEnded, loginsBurst, resetAdmission, takeLoginPlace } from "../../workers/shared/request/admission";

// Issue 44 item 3: the local runtime's front door (workers/dev-gateway/front-door.ts). Here the gateway's
// module alone, with the Worker behind it a function; test/e2e/front-door.test.ts runs it in its own
// workerd in front of Keyway's.

afterEach(() => resetAdmission());

const ISSUER = "http://127.0.0.1:8787";
const newLogin = (tenant = "") => new Request(`${ISSUER}${tenant}/authorize?client_id=c1&response_type=code`);
const redirectTo = () => new Request(`${ISSUER}/authorize?tx=tx_global_0_0_abc`);
const env = {
  FRONT_DOOR: "1",
  ENVIRONMENT: "development",
  POLICY: JSON.stringify({ max_logins_under_way: 2, login_burst: 0 }),
};

/** The Worker behind: a login page for a new login (or `status`), a redirect for a `redirect_to`. */
function behind(status = 200) {
  const seen: string[] = [];
  const forward = async (req: Request) => {
    seen.push(req.url);
    return new Response("ok", { status: new URL(req.url).searchParams.has("tx") ? 302 : status });
  };
  return { seen, forward };
}
const through = (req: Request, forward: (r: Request) => Promise<Response>, e: object = env) =>
  frontDoor(req, new URL(req.url), e, forward);

describe("the front door's count of logins under way (issue 44 item 3)", () => {
  it("refuses a new login past the bound without forwarding it, as op-auth answers a refusal", async () => {
    const { seen, forward } = behind();
    expect((await through(newLogin(), forward)).status).toBe(200);
    expect((await through(newLogin("/t/acme"), forward)).status).toBe(200);
    const refused = await through(newLogin(), forward);
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(refused.headers.get("cache-control")).toBe("no-store");
    expect(refused.headers.get("x-request-id")).toBeTruthy();
    expect(await refused.json()).toEqual({
      error: "temporarily_unavailable",
      error_description: "Keyway is busy, retry shortly",
    });
    expect(seen).toHaveLength(2);
    // Everything else passes, refused or not: a step of a login under way, another endpoint.
    expect((await through(new Request(`${ISSUER}/email-code/generate`, { method: "POST" }), forward)).status).toBe(200);
    expect(seen).toHaveLength(3);
  });

  it("frees a place at a login's redirect_to, and at once for a request that began no login", async () => {
    const { forward } = behind();
    await through(newLogin(), forward);
    await through(newLogin(), forward);
    expect((await through(redirectTo(), forward)).status).toBe(302);
    expect((await through(newLogin(), forward)).status).toBe(200);
    expect((await through(newLogin(), forward)).status).toBe(503);
    await through(redirectTo(), forward);
    // An error page (an unknown client): its place is given back.
    expect((await through(newLogin(), behind(400).forward)).status).toBe(400);
    expect((await through(newLogin(), forward)).status).toBe(200);
    expect((await through(newLogin(), forward)).status).toBe(503);
  });

  it("lets a stall take the spare places past the bound, once, and refuses past them", async () => {
    const { seen, forward } = behind();
    const burst = { ...env, POLICY: JSON.stringify({ max_logins_under_way: 2, login_burst: 2 }) };
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await through(newLogin(), forward, burst)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 503]);
    expect(seen).toHaveLength(4);
    // Back under the bound, the spares are spent: a freed place is taken again, and the next is refused.
    for (let i = 0; i < 3; i++) await through(redirectTo(), forward, burst);
    expect((await through(newLogin(), forward, burst)).status).toBe(200);
    expect((await through(newLogin(), forward, burst)).status).toBe(503);
  });

  it("forwards every login when the policy is one op-auth refuses (op-auth answers it, 503 with why)", async () => {
    const { seen, forward } = behind();
    for (let i = 0; i < 3; i++)
      expect((await through(newLogin(), forward, { ...env, POLICY: "{not json" })).status).toBe(200);
    expect(seen).toHaveLength(3);
  });

  it("is no front door unless told (`npm run dev`, one process): op-auth alone decides", async () => {
    const { seen, forward } = behind();
    for (let i = 0; i < 5; i++)
      expect((await through(newLogin(), forward, { ...env, FRONT_DOOR: "" })).status).toBe(200);
    expect(seen).toHaveLength(5);
  });
});

describe("the spare places past the bound (issue 44 item 3)", () => {
  const SLOT = 2_000;
  const T = 1_000_000;

  it("come back only over time spent below half the bound, so an overload spends them once", () => {
    // Bound 4, 2 spares: a stall fills 6 places at once, and the seventh is refused.
    const stall = Array.from({ length: 7 }, () => takeLoginPlace(4, SLOT, T, 2));
    expect(stall).toEqual([true, true, true, true, true, true, false]);
    // Then an overload for 30 s: a login ends every 100 ms and two new ones come. The count stays at
    // the bound, no spare comes back, and one of the two is admitted each time once it is back under it.
    for (let i = 0; i < 300; i++) {
      const t = T + 100 * (i + 1);
      loginEnded();
      const round = [takeLoginPlace(4, SLOT, t, 2), takeLoginPlace(4, SLOT, t, 2)];
      expect(round).toEqual(i < 2 ? [false, false] : [true, false]);
    }
    // The overload ends; 1 s later, half the refill time, one spare is back.
    for (let i = 0; i < 4; i++) loginEnded();
    const after = Array.from({ length: 6 }, () => takeLoginPlace(4, SLOT, T + 31_000, 2));
    expect(after).toEqual([true, true, true, true, true, false]);
  });

  it("are 16 on the local runtime and none in production, unless the policy says", () => {
    expect(loginsBurst(undefined, "development")).toBe(16);
    expect(loginsBurst(undefined, "test")).toBe(16);
    expect(loginsBurst(undefined, "production")).toBe(0);
    expect(loginsBurst(3, "production")).toBe(3);
  });
});

describe("the gateway when the Worker behind cannot be reached", () => {
  it("answers 503 with Retry-After, not a 500", async () => {
    const down = {
      fetch: async () => {
        throw new Error("connect ECONNREFUSED");
      },
    } as unknown as Fetcher;
    const res = await gateway.fetch(new Request(`${ISSUER}/token`, { method: "POST" }), {
      ISSUER,
      OP_AUTH: down,
      OP_TOKEN: down,
      OP_MGMT: down,
    } as unknown as Parameters<typeof gateway.fetch>[1]);
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("1");
    expect(await res.json()).toMatchObject({ error: "temporarily_unavailable" });
  });
});
