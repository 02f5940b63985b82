/** The mail peers test/support/global-setup.ts starts, as the Workers tests see them (TEST_MAIL_PEERS). */
export interface MailPeers {
  smtpPort: number;
  /** Same server behaviour, but its certificate is self-signed and trusted by nobody. */
  smtpUntrustedPort: number;
  /** Same server behaviour, but it does not offer STARTTLS. */
  smtpPlainPort: number;
  httpPort: number;
  smtpUser: string;
  smtpPassword: string;
  apiKey: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    mailPeers: MailPeers;
  }
}
