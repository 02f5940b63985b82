import { describe, expect, it } from "vitest";
import { contrast, lookOf } from "../../workers/shared/branding/branding";
import type { MessageKey } from "../../workers/shared/branding/i18n/index";
import { LOCALES, pickLocale, SUPPORTED_LOCALES, translator } from "../../workers/shared/branding/i18n/index";
import { renderOtpMail } from "../../workers/shared/events/mail/message";

/**
 * The catalogues (issue 26): every language says everything English says, with the same
 * placeholders; the language is chosen as OIDC Core §3.1.2.1 and RFC 9110 §12.5.4 say; the chosen
 * colours stay legible; and the mail speaks the page's language in its branding.
 */

const placeholders = (text: string) => new Set([...text.matchAll(/\{([a-z_]+)\}/g)].map((m) => m[1]));
const forms = (m: string | Record<string, string>) => (typeof m === "string" ? [m] : Object.values(m));

describe("catalogues", () => {
  const english = LOCALES.en.messages;

  it("English and at least two more, one of them right to left", () => {
    expect(SUPPORTED_LOCALES).toContain("en");
    expect(SUPPORTED_LOCALES.length).toBeGreaterThanOrEqual(3);
    expect(SUPPORTED_LOCALES.some((l) => LOCALES[l].dir === "rtl")).toBe(true);
  });

  for (const locale of SUPPORTED_LOCALES) {
    it(`${locale}: every key, no empty message, the same placeholders as English`, () => {
      const messages = LOCALES[locale].messages;
      expect(Object.keys(messages).sort()).toEqual(Object.keys(english).sort());
      for (const key of Object.keys(english) as MessageKey[]) {
        const want = placeholders(forms(english[key]).join(" "));
        // A plural form may spell its number out ("دقيقتين"): `{n}` is optional in it, nothing else is.
        want.delete("n");
        for (const text of forms(messages[key])) {
          expect(text.trim(), `${locale} ${key}`).not.toBe("");
          const got = placeholders(text);
          got.delete("n");
          expect([...got].sort(), `${locale} ${key}: ${text}`).toEqual([...want].sort());
        }
        // Plural where English is plural, with a form for every category the language has.
        if (typeof english[key] !== "string") {
          const categories = new Intl.PluralRules(locale).resolvedOptions().pluralCategories;
          for (const c of categories) expect(messages[key], `${locale} ${key} ${c}`).toHaveProperty(c);
        }
      }
    });
  }

  it("Arabic plurals take the form CLDR gives each number", () => {
    const t = translator("ar");
    expect(t.duration(1)).toBe("ثانية واحدة");
    expect(t.duration(2)).toBe("ثانيتين");
    expect(t.duration(5)).toBe("5 ثوانٍ");
    expect(t.duration(15 * 60)).toBe("15 دقيقة");
    expect(translator("en").duration(90)).toBe("2 minutes");
    expect(translator("fr").duration(1)).toBe("1 seconde");
  });

  it("a key no catalogue has reads as the generic error instead of failing the page", () => {
    expect(translator("fr").text("error.nope" as MessageKey)).toBe("Une erreur s’est produite. Réessayez.");
  });

  it("message text is escaped in HTML; parameters are escaped unless they are HTML already", () => {
    const t = translator("en");
    expect(t.html("login.heading", { app: `<img src=x onerror=alert(1)>` })).toBe(
      "Sign in to &#60;img src=x onerror=alert(1)&#62;",
    );
    expect(t.text("login.heading", { app: "A&B" })).toBe("Sign in to A&B");
  });
});

describe("choosing the language", () => {
  it("ui_locales first (by its order), then Accept-Language (by q), then the tenant's default", () => {
    expect(pickLocale({ uiLocales: "de fr-CA en", acceptLanguage: "ar", fallback: "en" })).toBe("fr");
    expect(pickLocale({ uiLocales: "de", acceptLanguage: "de;q=1, ar;q=0.5, fr;q=0.9", fallback: "en" })).toBe("fr");
    expect(pickLocale({ acceptLanguage: "*, fr;q=0", fallback: "ar" })).toBe("ar");
    expect(pickLocale({ acceptLanguage: "AR-eg", fallback: "en" })).toBe("ar");
    expect(pickLocale({ uiLocales: "", acceptLanguage: null, fallback: "fr" })).toBe("fr");
  });
});

describe("branding", () => {
  it("any chosen colour gives buttons and links at least 4.5:1 (WCAG 2.x AA)", () => {
    for (const colour of ["#ffff00", "#777777", "#000000", "#ffffff", "#1f6feb", "#ff6600", "#00ff00"]) {
      const look = lookOf({ name: "Acme", branding: { primary_color: colour } });
      expect(contrast(look.primary, look.onPrimary), colour).toBeGreaterThanOrEqual(4.5);
      expect(contrast(look.accent, "#ffffff"), colour).toBeGreaterThanOrEqual(4.5);
    }
  });

  it("a client overrides the tenant's branding field by field; the page names the client", () => {
    const look = lookOf(
      { name: "Acme", branding: { logo_uri: "https://cdn.acme.test/logo.svg", support_uri: "mailto:help@acme.test" } },
      { name: "Acme Billing", branding: { product_name: "Acme Cloud" } },
    );
    expect(look).toMatchObject({
      product: "Acme Cloud",
      app: "Acme Billing",
      logoUri: "https://cdn.acme.test/logo.svg",
      supportUri: "mailto:help@acme.test",
    });
  });
});

describe("the code mail", () => {
  const message = {
    to: "ada@example.com",
    code: "042917",
    expiresInSeconds: 600,
    expiresAt: Date.UTC(2026, 10, 25, 14, 32),
    issuerName: "Keyway",
    issuer: "https://login.acme.test",
  };

  it("in the page's language and direction, branded: product, application, logo, colour, support link", () => {
    const mail = renderOtpMail(
      { MAIL_FROM: "login@acme.test" },
      {
        ...message,
        look: {
          locale: "fr",
          product: "Acme",
          app: "Acme Billing",
          logo_uri: "https://cdn.acme.test/logo.png",
          support_uri: "https://acme.test/help",
          primary: "#aa3300",
        },
      },
    );
    expect(mail.subject).toBe("042917 est votre code de connexion à Acme");
    expect(mail.fromName).toBe("Acme");
    expect(mail.text).toContain("Votre code pour vous connecter à Acme Billing :");
    expect(mail.text).toContain("Il expire 10 minutes après la demande, à 14:32 UTC");
    expect(mail.text).toContain("Besoin d’aide ? https://acme.test/help");
    expect(mail.html).toContain('<html lang="fr" dir="ltr">');
    expect(mail.html).toContain('src="https://cdn.acme.test/logo.png"');
    expect(mail.html).toContain("#aa3300");
    expect(mail.html).toContain('href="https://acme.test/help"');

    const arabic = renderOtpMail(
      { MAIL_FROM: "login@acme.test" },
      { ...message, look: { locale: "ar", product: "Acme", app: "Acme" } },
    );
    expect(arabic.html).toContain('<html lang="ar" dir="rtl">');
    expect(arabic.subject).toBe("042917 هو رمز تسجيل الدخول إلى Acme");
    expect(arabic.text).toContain("10 دقائق");
  });

  it("in Arabic, the application, the host and the support address are isolated from the sentence (issue 38)", () => {
    const look = { product: "Acme", app: "Acme (EU)", support_uri: "mailto:help@acme.test" };
    const arabic = renderOtpMail({ MAIL_FROM: "login@acme.test" }, { ...message, look: { ...look, locale: "ar" } });
    expect(arabic.html).toContain("<bdi>Acme (EU)</bdi>");
    expect(arabic.html).toContain('<bdi dir="ltr">login.acme.test</bdi>');
    expect(arabic.html).toContain('<bdi dir="ltr"><a href="mailto:help@acme.test"');
    // The text part: FSI/LRI ... PDI (UAX #9 §2.4) around the name and each address.
    expect(arabic.text).toContain("\u2068Acme (EU)\u2069");
    expect(arabic.text).toContain("\u2066login.acme.test\u2069");
    expect(arabic.text).toContain("\u2066help@acme.test\u2069");
    expect(arabic.text).toContain("-- \u2068Acme\u2069 (\u2066https://login.acme.test\u2069)");
    // A left-to-right mail needs none of them, and its text stays free of invisible characters.
    const english = renderOtpMail({ MAIL_FROM: "login@acme.test" }, { ...message, look: { ...look, locale: "en" } });
    expect(english.text).not.toMatch(/[\u2066-\u2069]/);
    expect(english.text).toContain("Need help? help@acme.test");
    // A name stored before the API refused bidi controls does not reorder the subject or the sender.
    const stored = renderOtpMail(
      { MAIL_FROM: "login@acme.test" },
      { ...message, look: { product: "Acme \u202egnp.exe", app: "x", locale: "en" } },
    );
    expect(stored.subject).toBe("042917 is your Acme gnp.exe sign-in code");
    expect(stored.fromName).toBe("Acme gnp.exe");
  });

  it("without a look (older queued mail), English and the issuer's name, as before", () => {
    const mail = renderOtpMail({ MAIL_FROM: "login@acme.test" }, message);
    expect(mail.subject).toBe("042917 is your Keyway sign-in code");
    expect(mail.html).toContain('<html lang="en" dir="ltr">');
  });
});
