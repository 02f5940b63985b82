import { describe, expect, it } from "vitest";
import { authorizeQuery, Browser, pkce, policy, registerClient, withVars } from "../support/harness";

describe("load shedding (checklist I2: past capacity, 503 with Retry-After, never a hang)", () => {
  it("answers requests beyond an isolate's in-flight limit with an immediate 503 and Retry-After", async () => {
    const e = withVars({ POLICY: policy({ max_inflight_requests: 2 }) });
    const client = await registerClient({}, e);
    const { challenge } = await pkce();
    const path = `/authorize?${authorizeQuery(client, challenge)}`;
    // Ten at once: each waits on its SessionStore call, so only two are in flight when the rest arrive.
    const responses = await Promise.all(
      Array.from({ length: 10 }, () =>
        new Browser({ env: e }).fetch(path, { headers: { Accept: "application/json" } }),
      ),
    );
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(2);
    expect(statuses.filter((s) => s === 503)).toHaveLength(8);
    for (const res of responses.filter((r) => r.status === 503)) {
      expect(res.headers.get("retry-after")).toBe("1");
      expect(await res.json()).toMatchObject({ error: "temporarily_unavailable" });
    }
    // Once they finish, the isolate admits requests again.
    const after = await new Browser({ env: e }).fetch(path, { headers: { Accept: "application/json" } });
    expect(after.status).toBe(200);
  });
});
