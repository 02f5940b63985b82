/**
 * What MailOutbox content (retries and captured mail) is sealed under: MAIL_OUTBOX_SECRET. A Worker
 * seals a retry (workers/shared/events/otp-mail.ts) and the MailOutbox unseals it, so the label is
 * part of the contract.
 */
export const outboxSealMaterial = (secret: string) => `mail-outbox:${secret}`;
