import { describe, expect, it } from "vitest";
import { authorizeQuery, Browser, call, pkce, policy, registerClient, withVars } from "../support/harness";

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

  it("does not count a request whose body is still arriving, and gives its body a deadline (408)", async () => {
    const e = withVars({ POLICY: policy({ max_inflight_requests: 2, body_deadline_seconds: 1 }) });
    const client = await registerClient({}, e);
    // Six posts that declare a body and send one byte of it, on the endpoints that read one.
    const trickle = () =>
      new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode("{"));
        },
      });
    const started = Date.now();
    const stalled = ["/email-code/generate", "/email-code/verify", "/token", "/token", "/introspect", "/revoke"].map(
      (path) =>
        call(
          path,
          {
            method: "POST",
            headers: {
              "Content-Type": path.startsWith("/email") ? "application/json" : "application/x-www-form-urlencoded",
            },
            body: trickle(),
            duplex: "half",
          } as RequestInit,
          e,
        ),
    );
    // Meanwhile new logins are admitted: the trickling requests hold no slot.
    const { challenge } = await pkce();
    const path = `/authorize?${authorizeQuery(client, challenge)}`;
    for (let i = 0; i < 3; i++)
      expect((await new Browser({ env: e }).fetch(path, { headers: { Accept: "application/json" } })).status).toBe(200);
    // And every trickle ends at the deadline with 408, not a hang.
    for (const res of await Promise.all(stalled)) {
      expect(res.status).toBe(408);
      expect(await res.json()).toMatchObject({ error: "invalid_request" });
    }
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
