/**
 * The probe routes are internet-facing once deployed: every one needs the
 * PROBE_KEY secret, as `?key=` (handy with curl) or `Authorization: Bearer`.
 * An unset secret denies everything.
 */

async function digest(text: string): Promise<ArrayBuffer> {
  return crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
}

/** Null when the request carries the key, else the reason it is refused. */
export async function refusal(request: Request, secret: string | undefined): Promise<string | null> {
  if (!secret) return 'PROBE_KEY is not set on this Worker: every probe is denied (wrangler secret put PROBE_KEY)';
  const url = new URL(request.url);
  const bearer = request.headers.get('authorization')?.match(/^Bearer\s+(.+)$/i)?.[1];
  const given = url.searchParams.get('key') ?? bearer;
  if (!given) return 'missing key: add ?key=<PROBE_KEY>';
  // Equal-length digests, compared in constant time.
  const [a, b] = await Promise.all([digest(given), digest(secret)]);
  return crypto.subtle.timingSafeEqual(a, b) ? null : 'wrong key';
}
