import { afterEach, describe, expect, it, vi } from "vitest";
import {
  admin,
  call,
  form,
  fullLogin,
  pinClock,
  registerClient,
  type TestClient,
  type Tokens,
  uniqueEmail,
  userinfo,
  verifyJwt,
} from "../support/harness";

/**
 * Pairwise subject identifiers (OIDC Core §8.1; issue 40): a pairwise client sees a `sub` of its own
 * sector, the same at every login of the user and different from the user's id and from any other
 * sector's; userinfo and introspection answer with it too.
 */
afterEach(() => {
  vi.useRealTimers();
});

describe("pairwise subject identifiers (OIDC Core §8.1)", () => {
  it("a pairwise client's sub is stable for the user, differs by sector, and is the one userinfo and introspection give", async () => {
    const clock = pinClock();
    let elapsed = 0;
    const email = uniqueEmail("pairwise");
    const user = (await (await admin("/users", { method: "POST", json: { email } })).json()) as { id: string };
    const pairwise = (host: string, extra: Record<string, unknown> = {}) =>
      registerClient({ subject_type: "pairwise", redirect_uris: [`https://${host}/cb`], ...extra });
    const a = await pairwise("app-a.example");
    const sameSector = await pairwise("app-b.example", { sector_identifier_uri: "https://app-a.example/sector.json" });
    const otherSector = await pairwise("app-c.example");
    const publicClient = await registerClient();
    expect(a).toMatchObject({ subject_type: "pairwise", sector_identifier_uri: null });

    // One login each, a minute apart (one code a minute per address).
    const login = async (client: TestClient) => {
      elapsed += 61_000;
      clock(elapsed);
      const { tokens } = await fullLogin(client, email);
      return { tokens, sub: (await verifyJwt(tokens.id_token)).payload.sub as string };
    };
    const first = await login(a);
    const again = await login(a);
    const b = await login(sameSector);
    const c = await login(otherSector);
    const pub = await login(publicClient);

    expect(pub.sub).toBe(user.id);
    expect(first.sub).not.toBe(user.id);
    expect(again.sub).toBe(first.sub);
    // A sector named by sector_identifier_uri is shared with the clients of that host.
    expect(b.sub).toBe(first.sub);
    expect(c.sub).not.toBe(first.sub);
    // The access token shows the pairwise sub and never the user's id.
    const access = (await verifyJwt(first.tokens.access_token, { typ: "at+jwt" })).payload;
    expect(access.sub).toBe(first.sub);
    expect(JSON.stringify(access)).not.toContain(user.id);

    const info = (await (await userinfo(first.tokens.access_token)).json()) as Record<string, unknown>;
    expect(info).toMatchObject({ sub: first.sub, email });
    for (const token of [first.tokens.access_token, (first.tokens as Tokens).refresh_token as string]) {
      const intro = (await (await form(a, { token }, "/introspect")).json()) as Record<string, unknown>;
      expect(intro).toMatchObject({ active: true, sub: first.sub });
    }
  });

  it("refuses a pairwise client whose redirect URIs span hosts without a sector_identifier_uri; discovery lists pairwise", async () => {
    const res = await admin("/clients", {
      method: "POST",
      json: {
        client_name: "two hosts",
        redirect_uris: ["https://one.example/cb", "https://two.example/cb"],
        token_endpoint_auth_method: "client_secret_basic",
        subject_type: "pairwise",
      },
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error_description: string }).error_description).toContain("sector_identifier_uri");
    const withSector = await registerClient({
      redirect_uris: ["https://one.example/cb", "https://two.example/cb"],
      subject_type: "pairwise",
      sector_identifier_uri: "https://one.example/sector.json",
    });
    expect(withSector.client_id).toBeTruthy();
    for (const bad of ["http://one.example/s.json", "https://user:pw@one.example/s.json", "not a url"]) {
      const refused = await admin("/clients", {
        method: "POST",
        json: {
          client_name: "bad sector",
          redirect_uris: ["https://one.example/cb"],
          token_endpoint_auth_method: "client_secret_basic",
          subject_type: "pairwise",
          sector_identifier_uri: bad,
        },
      });
      expect(refused.status, bad).toBe(400);
    }
    const doc = (await (await call("/.well-known/openid-configuration")).json()) as Record<string, unknown>;
    expect(doc.subject_types_supported).toEqual(["public", "pairwise"]);
  });
});
