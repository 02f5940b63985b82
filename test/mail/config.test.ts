import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../workers/shared/config/config";
import { loadMailConfig } from "../../workers/shared/config/mail-settings";
import { ConfigError } from "../../workers/shared/config/vars";

/** A production env that parses: https issuer, a real transport, every secret. */
const production = (vars: Record<string, string | undefined> = {}): Record<string, unknown> => {
  const e: Record<string, unknown> = {
    ...env,
    ENVIRONMENT: "production",
    ISSUER: "https://id.example.com",
    MAIL_FROM: "login@example.com",
    MAIL_TRANSPORT: "http",
    MAIL_API_KEY: "re_0123456789abcdef",
    ...vars,
  };
  for (const [k, v] of Object.entries(vars)) if (v === undefined) delete e[k];
  return e;
};

const refused = (vars: Record<string, string | undefined>, message: RegExp) => {
  expect(() => loadConfig(production(vars))).toThrow(ConfigError);
  expect(() => loadConfig(production(vars))).toThrow(message);
};

describe("configuration refuses an unsafe production at start-up", () => {
  it("accepts a complete production configuration for each real transport", () => {
    expect(loadConfig(production()).MAIL_TRANSPORT).toBe("http");
    expect(loadConfig(production({ MAIL_TRANSPORT: "smtp", SMTP_HOST: "smtp.example.com" })).SMTP_PORT).toBe(587);
    expect(loadConfig(production({ MAIL_TRANSPORT: "send_email" })).MAIL_TRANSPORT).toBe("send_email");
  });

  it("refuses the dev transport, an http issuer and a placeholder sender", () => {
    refused({ MAIL_TRANSPORT: "dev" }, /MAIL_TRANSPORT: the dev mailbox is never on in production/);
    refused({ ISSUER: "http://id.example.com" }, /ISSUER: production requires an https issuer/);
    refused({ MAIL_FROM: undefined }, /MAIL_FROM: production needs a real sender address/);
  });

  it("refuses a missing or weak secret", () => {
    for (const name of ["ADMIN_TOKEN", "OTP_HMAC_SECRET", "KEY_ENCRYPTION_SECRET", "MAIL_OUTBOX_SECRET"]) {
      refused({ [name]: undefined }, new RegExp(`${name}: ${name} is required`));
      refused({ [name]: "short" }, new RegExp(`${name} must be at least 32 characters`));
    }
    refused({ SIGNING_KEY_RS256: undefined }, /SIGNING_KEY_RS256/);
    refused({ SIGNING_KEY_ES256: undefined }, /SIGNING_KEY_ES256/);
  });

  it("refuses a transport without what it needs", () => {
    refused({ MAIL_API_KEY: undefined }, /MAIL_API_KEY is required with MAIL_TRANSPORT=http/);
    refused(
      { MAIL_HTTP_URL: "http://mail.example.com/emails" },
      /MAIL_HTTP_URL: production requires an https mail API/,
    );
    refused({ MAIL_TRANSPORT: "smtp" }, /SMTP_HOST is required/);
    refused(
      { MAIL_TRANSPORT: "smtp", SMTP_HOST: "smtp.example.com", SMTP_STARTTLS: "off" },
      /never sends mail in the clear/,
    );
    refused({ MAIL_TRANSPORT: "smtp", SMTP_HOST: "smtp.example.com", SMTP_USER: "u" }, /SMTP_USER and SMTP_PASSWORD/);
    refused({ MAIL_TRANSPORT: "smtp", SMTP_HOST: "smtp.example.com", SMTP_PORT: "99999" }, /SMTP_PORT/);
    refused({ MAIL_TRANSPORT: "carrier-pigeon" }, /MAIL_TRANSPORT/);
    const noBinding = { ...production({ MAIL_TRANSPORT: "send_email" }), SEND_EMAIL: undefined };
    expect(() => loadConfig(noBinding)).toThrow(/needs a send_email binding named SEND_EMAIL/);
  });

  it("holds the store Worker's mail settings to the same rules, without the Workers' other secrets", () => {
    const stores = {
      ENVIRONMENT: "production",
      ISSUER: "https://id.example.com",
      MAIL_FROM: "login@example.com",
      MAIL_TRANSPORT: "smtp",
      SMTP_HOST: "smtp.example.com",
      MAIL_OUTBOX_SECRET: (env as unknown as Record<string, string>).MAIL_OUTBOX_SECRET,
    };
    expect(loadMailConfig(stores).SMTP_HOST).toBe("smtp.example.com");
    expect(() => loadMailConfig({ ...stores, MAIL_TRANSPORT: "dev" })).toThrow(/never on in production/);
    expect(() => loadMailConfig({ ...stores, MAIL_OUTBOX_SECRET: undefined })).toThrow(/MAIL_OUTBOX_SECRET/);
  });
});
