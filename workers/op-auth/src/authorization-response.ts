/** RFC 6749 §4.1.2 and RFC 9207: the response goes to the redirect URI's query, with `iss`. */
export function authorizationResponseUrl(
  redirectUri: string,
  issuer: string,
  params: Record<string, string | undefined>,
): string {
  const url = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.append(k, v);
  url.searchParams.append("iss", issuer);
  return url.toString();
}
