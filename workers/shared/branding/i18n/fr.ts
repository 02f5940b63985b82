import type { Catalogue } from "./en";

/** French. CLDR gives French a `many` form (for a million and more); its words are those of `other` here. */
export const fr: Catalogue = {
  "page.title": "{title} · {product}",
  "page.support": "Besoin d’aide ? Contactez l’assistance",
  "page.language": "Langue",
  "page.app_privacy": "Politique de confidentialité",
  "page.app_terms": "Conditions d’utilisation",

  "login.title": "Connexion",
  "login.heading": "Se connecter à {app}",
  "login.lead": "Saisissez votre adresse e-mail : nous vous enverrons un code à 6 chiffres.",
  "login.email_label": "Adresse e-mail",
  "login.submit": "Recevoir un code par e-mail",
  "login.cancel": "Annuler",

  "code.title": "Saisissez votre code",
  "code.heading": "Consultez vos e-mails",
  "code.lead": "Si {email} peut se connecter à {app}, un code à 6 chiffres est en route.",
  "code.label": "Code à 6 chiffres",
  "code.submit": "Se connecter",
  "code.lifetime": {
    one: "Le code est valable {n} minute, pour une seule utilisation.",
    many: "Le code est valable {n} minutes, pour une seule utilisation.",
    other: "Le code est valable {n} minutes, pour une seule utilisation.",
  },
  "code.resend_wait": "Vous pourrez demander un nouveau code dans {time}.",
  "code.resend_ready": "Vous pouvez demander un nouveau code maintenant.",
  "code.resend": "Envoyer un nouveau code",
  "code.sent_again": "Un nouveau code est en route. Utilisez le plus récent : le précédent ne fonctionne plus.",
  "code.another_address": "Utiliser une autre adresse",

  "login.passkey": "Se connecter avec une clé d’accès",
  "login.passkey_failed":
    "Cette clé d’accès ne permet pas de vous connecter ici. Réessayez, ou recevez un code par e-mail.",
  "passkey.title": "Créer une clé d’accès",
  "passkey.heading": "Connectez-vous plus vite la prochaine fois",
  "passkey.lead":
    "Créez une clé d’accès pour {app} : la prochaine fois, vous vous connecterez avec votre empreinte, votre visage ou le verrouillage de votre écran, sans attendre d’e-mail.",
  "passkey.create": "Créer une clé d’accès",
  "passkey.later": "Pas maintenant",
  "passkey.failed": "Aucune clé d’accès n’a été créée. Vous pouvez réessayer, ou continuer sans.",
  "passkey.needs_script": "Créer une clé d’accès nécessite JavaScript dans ce navigateur. Vous pouvez continuer sans.",

  "error.wrong_code": "Ce code n’est pas le bon, ou il a expiré. Vérifiez le dernier e-mail et réessayez.",
  "error.code_format": "Saisissez les 6 chiffres reçus par e-mail.",
  "error.email_invalid": "Saisissez une adresse e-mail valide, par exemple nom@exemple.fr.",
  "error.locked": "Trop de codes erronés. Vous pourrez réessayer dans {wait}.",
  "error.resend_too_soon": "Un code vient d’être envoyé. Vous pourrez en demander un nouveau dans {wait}.",
  "error.too_many_codes": "Trop de codes ont été demandés. Vous pourrez réessayer dans {wait}.",
  "error.too_many_tries": "Trop de tentatives depuis ce réseau. Vous pourrez réessayer dans {wait}.",
  "error.generic": "Une erreur s’est produite. Réessayez.",
  "error.overloaded": "Le service est très sollicité. Réessayez dans {wait}.",

  "err.invalid_request.title": "Cette demande ne peut pas être utilisée",
  "err.invalid_request.message":
    "L’application a envoyé une demande de connexion non valide. Revenez à l’application et réessayez.",
  "err.invalid_form.message":
    "Cette page a été envoyée sous une forme que Keyway ne lit pas. Revenez en arrière et réessayez.",
  "err.expired.title": "Connexion expirée",
  "err.expired.start_again":
    "Cette connexion a pris trop de temps ou a commencé dans un autre navigateur. Recommencez depuis l’application.",
  "err.expired.link_invalid": "Ce lien de connexion n’est pas valide. Recommencez depuis l’application.",
  "err.expired.other_browser":
    "Cette connexion a été terminée dans un autre navigateur. Continuez là-bas, ou recommencez ici.",
  "err.expired.used": "Cette connexion n’est plus valide ou a déjà été utilisée. Recommencez depuis l’application.",
  "err.refused.title": "Demande refusée",
  "err.refused.cross_site": "Ce formulaire a été envoyé depuis un autre site. Revenez à l’application et recommencez.",
  "err.too_many.title": "Trop de tentatives",
  "err.unknown_app.title": "Application inconnue",
  "err.unknown_app.message": "L’application qui a fait la demande n’est plus enregistrée.",
  "err.signed_out.title": "Déconnecté",
  "err.signed_out.device": "Votre connexion a pris fin. Saisissez à nouveau le code de l’appareil.",
  "err.code_expired.title": "Code expiré",
  "err.code_expired.device": "Ce code n’est plus valide. Recommencez sur votre appareil.",
  "err.technical_detail": "Détails pour les développeurs de l’application :",

  "device.title": "Connecter un appareil",
  "device.lead": "Saisissez le code affiché par votre appareil.",
  "device.code_label": "Code de l’appareil",
  "device.continue": "Continuer",
  "device.not_a_code": "Ce n’est pas un code d’appareil. Il compte 8 lettres, par exemple BDWP-HQPK.",
  "device.invalid": "Ce code n’est pas valide ou a expiré. Vérifiez votre appareil.",
  "device.consent_heading": "Connecter {app} ?",
  "device.consent_lead":
    "Un appareil affichant {code} demande à se connecter en tant que {email} avec l’accès à : {scope}.",
  "device.consent_warning": "N’autorisez que si vous avez lancé cette demande sur votre propre appareil.",
  "device.allow": "Autoriser",
  "device.deny": "Refuser",
  "device.connected.title": "Appareil connecté",
  "device.connected.message": "Vous pouvez revenir à votre appareil.",
  "device.denied.title": "Demande refusée",
  "device.denied.message": "L’appareil n’a pas été connecté. Vous pouvez fermer cette page.",
  "org.title": "Choisissez une organisation",
  "org.lead": "Vous faites partie de plusieurs organisations. Pour laquelle vous connectez-vous à {app} ?",

  "logout.confirm.title": "Se déconnecter ?",
  "logout.confirm.lead": "Une application a demandé à vous déconnecter de ce navigateur.",
  "logout.confirm.submit": "Se déconnecter",
  "logout.done.title": "Déconnecté",
  "logout.done.message": "Vous êtes déconnecté. Vous pouvez fermer cette fenêtre.",

  "unit.seconds": { one: "{n} seconde", many: "{n} secondes", other: "{n} secondes" },
  "unit.minutes": { one: "{n} minute", many: "{n} minutes", other: "{n} minutes" },
  "unit.hours": { one: "{n} heure", many: "{n} heures", other: "{n} heures" },

  "mail.subject": "{code} est votre code de connexion à {product}",
  "mail.intro": "Votre code pour vous connecter à {app} :",
  "mail.expiry": "Il expire dans {lifetime} et ne sert qu’une fois.",
  "mail.expiry_at": "Il expire {lifetime} après la demande, à {time} UTC, et ne sert qu’une fois.",
  "mail.ignore":
    "Si vous n’avez pas essayé de vous connecter à {host}, vous n’avez pas demandé ce code : ignorez cet e-mail. Rien ne se passe sans le code. Ne le communiquez jamais à personne.",
  "mail.support": "Besoin d’aide ? {link}",
};
