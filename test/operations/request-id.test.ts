import { afterEach, describe, expect, it, vi } from "vitest";
import { admin, call, withVars } from "../support/harness";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("request ids and structured logs (issue 15 item 5)", () => {
  it("names every response with X-Request-Id: successes, OAuth errors, 404s, redirects", async () => {
    const ids = new Set<string>();
    for (const res of [
      await call("/.well-known/openid-configuration"),
      await call("/token", { method: "POST" }),
      await call("/no-such-path"),
      await call("/authorize?client_id=nope"),
      await admin("/shards"),
      await call("/userinfo"),
    ]) {
      const id = res.headers.get("x-request-id") as string;
      expect(id, `${res.status} ${res.url}`).toMatch(/^[0-9a-f-]{36}$/);
      ids.add(id);
    }
    expect(ids.size).toBe(6);
  });

  it("uses Cloudflare's CF-Ray as the request id when the edge sent one, and nothing else a client sends", async () => {
    const ray = "8f2c1a7b9d3e4f50-SYD";
    const res = await call("/.well-known/openid-configuration", { headers: { "CF-Ray": ray } });
    expect(res.headers.get("x-request-id")).toBe(ray);
    const forged = await call("/.well-known/openid-configuration", { headers: { "CF-Ray": "<script>" } });
    expect(forged.headers.get("x-request-id")).not.toBe("<script>");
  });

  it("logs one JSON object per line, carrying the request id the client saw", async () => {
    const lines: string[] = [];
    vi.spyOn(console, "error").mockImplementation((line: unknown) => {
      lines.push(String(line));
    });
    // A broken configuration: the request answers 503 and the reason is logged, with its request id.
    const res = await call("/.well-known/openid-configuration", {}, withVars({ POLICY: "{not json" }));
    expect(res.status).toBe(503);
    const id = res.headers.get("x-request-id");
    const entries = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(entries).toContainEqual(
      expect.objectContaining({ level: "error", msg: "configuration refused", request_id: id }),
    );
  });
});
