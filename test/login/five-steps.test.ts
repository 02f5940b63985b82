import { describe, expect, it } from "vitest";
import { call, fullLogin, ISSUER, registerClient } from "../support/harness";

describe("the five-step login (CONTRACT §2)", () => {
  it("ends in tokens for a new user", async () => {
    const client = await registerClient();
    const { tokens, redirect } = await fullLogin(client);
    expect(redirect.searchParams.get("state")).toBe("st-123");
    expect(redirect.searchParams.get("iss")).toBe(ISSUER);
    expect(tokens.token_type).toBe("Bearer");
    expect(tokens.refresh_token).toBeTruthy();
    const info = await call("/userinfo", { headers: { Authorization: `Bearer ${tokens.access_token}` } });
    expect(info.status).toBe(200);
  });
});
