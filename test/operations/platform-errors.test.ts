import { afterEach, describe, expect, it, vi } from "vitest";
import { inRequest } from "../../durable-objects/contract/log";
import { errorResponse, OAuthError } from "../../workers/shared/platform/errors";

/**
 * Storage that cannot take a write (a full or unwritable disk) is temporary from the caller's view:
 * 503 with Retry-After, never 500 (issue 27 item 15); and every refused request leaves one JSON log
 * line with its request id and the kind of failure (item 16).
 */

afterEach(() => {
  vi.restoreAllMocks();
});

function refused(err: unknown) {
  const lines: Record<string, unknown>[] = [];
  const capture = (line: unknown) => {
    lines.push(JSON.parse(String(line)) as Record<string, unknown>);
  };
  vi.spyOn(console, "warn").mockImplementation(capture);
  vi.spyOn(console, "error").mockImplementation(capture);
  const res = inRequest({ requestId: "req-platform-1" }, () => errorResponse(err));
  return { res, lines };
}

describe("platform failures", () => {
  for (const message of [
    "database or disk is full: SQLITE_FULL at resumeLogin",
    "attempt to write a readonly database: SQLITE_READONLY",
    "disk I/O error: SQLITE_IOERR",
    "unable to open database file: SQLITE_CANTOPEN",
  ])
    it(`answers 503 with Retry-After, not 500, for "${message}"`, async () => {
      const { res, lines } = refused(new Error(message));
      expect(res.status).toBe(503);
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      const body = (await res.json()) as { error: string; error_description: string };
      expect(body.error).toBe("temporarily_unavailable");
      expect(body.error_description).not.toContain("busy");
      expect(lines).toEqual([
        expect.objectContaining({ level: "warn", request_id: "req-platform-1", kind: "storage", error: message }),
      ]);
    });

  it("logs an overloaded object and a shed request once each, with the request id", () => {
    const overloaded = Object.assign(new Error("Durable Object is overloaded"), { overloaded: true });
    expect(refused(overloaded).lines).toEqual([
      expect.objectContaining({ request_id: "req-platform-1", kind: "overloaded" }),
    ]);
    const shed = new OAuthError("temporarily_unavailable", "Keyway is busy, retry shortly", {
      retryAfter: 1,
      status: 503,
    });
    expect(refused(shed).lines).toEqual([expect.objectContaining({ request_id: "req-platform-1", kind: "busy" })]);
  });

  it("still answers an unexpected error 500 without details", async () => {
    const { res } = refused(new TypeError("x is undefined"));
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: "server_error", error_description: "internal error" });
  });
});
