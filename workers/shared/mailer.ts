/** The mailer interface and its transports live in `./mail/`; this module keeps the old import path. */
export {
  deliverOtp,
  MailError,
  type Mailer,
  mailerFor,
  type OtpMessage,
  type RenderedMail,
  renderOtpMail,
} from "./mail/index";
