/**
 * Text for HTML (an element's content or a quoted attribute value): the five characters HTML gives a
 * meaning there, as numeric character references. Pages and mail bodies both go through it.
 */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}
