/**
 * The English catalogue: the source every other catalogue is checked against (same keys, same
 * placeholders, by the type below and by test/pages/catalogues.test.ts). `{name}` is a placeholder;
 * an object is a plural message chosen by Intl.PluralRules for its `{n}`.
 */
export const en = {
  "page.title": "{title} · {product}",
  "page.support": "Need help? Contact support",
  "page.language": "Language",
  "page.app_privacy": "Privacy policy",
  "page.app_terms": "Terms of service",

  "login.title": "Sign in",
  "login.heading": "Sign in to {app}",
  "login.lead": "Enter your email address and we will send you a 6-digit code.",
  "login.email_label": "Email address",
  "login.submit": "Email me a code",
  "login.cancel": "Cancel",

  "code.title": "Enter your code",
  "code.heading": "Check your email",
  "code.lead": "If {email} can sign in to {app}, a 6-digit code is on its way.",
  "code.label": "6-digit code",
  "code.submit": "Sign in",
  "code.lifetime": {
    one: "The code works for {n} minute and only once.",
    other: "The code works for {n} minutes and only once.",
  },
  "code.resend_wait": "You can ask for a new code in {time}.",
  "code.resend_ready": "You can ask for a new code now.",
  "code.resend": "Send a new code",
  "code.sent_again": "A new code is on its way. Use the newest one: the earlier code no longer works.",
  "code.another_address": "Use another address",

  "login.passkey": "Sign in with a passkey",
  "login.passkey_failed": "That passkey could not sign you in here. Try again, or get a code by email.",
  "passkey.title": "Create a passkey",
  "passkey.heading": "Sign in faster next time",
  "passkey.lead":
    "Create a passkey for {app}: next time you sign in with your fingerprint, face or screen lock, without waiting for an email.",
  "passkey.create": "Create a passkey",
  "passkey.later": "Not now",
  "passkey.failed": "No passkey was created. You can try again, or continue without one.",
  "passkey.needs_script": "Creating a passkey needs JavaScript in this browser. You can go on without one.",

  "error.wrong_code": "That code is not right, or it has expired. Check the newest email and try again.",
  "error.code_format": "Enter the 6 digits from the email.",
  "error.email_invalid": "Enter a valid email address, like name@example.com.",
  "error.locked": "Too many wrong codes. You can try again in {wait}.",
  "error.resend_too_soon": "A code was just sent. You can ask for a new one in {wait}.",
  "error.too_many_codes": "Too many codes were asked for. You can try again in {wait}.",
  "error.too_many_tries": "Too many tries from this network. You can try again in {wait}.",
  "error.generic": "Something went wrong. Try again.",
  "error.overloaded": "The service is busy. Try again in {wait}.",

  "err.invalid_request.title": "This request cannot be used",
  "err.invalid_request.message":
    "The application sent a sign-in request that is not valid. Go back to it and try again.",
  "err.invalid_form.message": "This page was sent in a form Keyway does not read. Go back and try again.",
  "err.expired.title": "Sign-in expired",
  "err.expired.start_again":
    "This sign-in took too long or was started in another browser. Start again from the application.",
  "err.expired.link_invalid": "This sign-in link is not valid. Start again from the application.",
  "err.expired.other_browser": "This sign-in was finished in another browser. Continue there, or start again here.",
  "err.expired.used": "This sign-in is no longer valid, or was already used. Start again from the application.",
  "err.refused.title": "Request refused",
  "err.refused.cross_site": "This form was sent from another site. Go back to the application and start again.",
  "err.too_many.title": "Too many attempts",
  "err.unknown_app.title": "Unknown application",
  "err.unknown_app.message": "The application that asked is no longer registered.",
  "err.signed_out.title": "Signed out",
  "err.signed_out.device": "Your sign-in has ended. Enter the device code again.",
  "err.code_expired.title": "Code expired",
  "err.code_expired.device": "That code is not valid any more. Start again on your device.",
  "err.technical_detail": "Details for the application's developers:",

  "device.title": "Connect a device",
  "device.lead": "Enter the code your device shows.",
  "device.code_label": "Device code",
  "device.continue": "Continue",
  "device.not_a_code": "That is not a device code. It has 8 letters, like BDWP-HQPK.",
  "device.invalid": "That code is not valid, or has expired. Check your device.",
  "device.consent_heading": "Connect {app}?",
  "device.consent_lead": "A device showing {code} asks to sign in as {email} with access to: {scope}.",
  "device.consent_warning": "Only allow it if you started this on your own device.",
  "device.allow": "Allow",
  "device.deny": "Deny",
  "device.connected.title": "Device connected",
  "device.connected.message": "You can return to your device now.",
  "device.denied.title": "Request denied",
  "device.denied.message": "The device was not signed in. You can close this page.",
  "org.title": "Choose an organization",
  "org.lead": "You belong to several organizations. Which one are you signing in to {app} for?",

  "logout.confirm.title": "Sign out?",
  "logout.confirm.lead": "An application asked to sign you out of this browser.",
  "logout.confirm.submit": "Sign out",
  "logout.done.title": "Signed out",
  "logout.done.message": "You are signed out. You can close this window.",

  "unit.seconds": { one: "{n} second", other: "{n} seconds" },
  "unit.minutes": { one: "{n} minute", other: "{n} minutes" },
  "unit.hours": { one: "{n} hour", other: "{n} hours" },

  "mail.subject": "{code} is your {product} sign-in code",
  "mail.intro": "Your code to sign in to {app} is:",
  "mail.expiry": "It expires in {lifetime} and works once.",
  "mail.expiry_at": "It expires {lifetime} after it was requested, at {time} UTC, and works once.",
  "mail.ignore":
    "If you did not try to sign in to {host}, you did not request this code: you can ignore this email. Nothing happens without the code. Never share it with anyone.",
  "mail.support": "Need help? {link}",
} as const;

/** A message: text with `{placeholders}`, or its plural forms (Intl.PluralRules categories). */
export type PluralForms = { other: string } & Partial<Record<"zero" | "one" | "two" | "few" | "many", string>>;
export type MessageKey = keyof typeof en;
/** What every catalogue holds: a message for every key, plural where English is plural. */
export type Catalogue = {
  [K in MessageKey]: (typeof en)[K] extends string ? string : PluralForms;
};
