/**
 * The built-in HTTP layer: whatever the hooks say, a Response-like result
 * reports its status, and a 429 reports its Retry-After header. It cannot be
 * switched off, so overriding a hook never loses genuine 429 handling.
 */

/** What the HTTP layer read from a result. */
export interface HttpOutcome {
  status: number;
  /** The raw Retry-After header, if there was one. */
  retryAfter?: string;
}

/**
 * Reads a Response-like result: anything with an integer `status` (0-999),
 * and optionally `headers` as a `Headers` object or a plain object of header
 * names (matched case-insensitively). Anything else is not HTTP.
 */
export function httpOutcome(result: unknown): HttpOutcome | undefined {
  if (result === null || (typeof result !== 'object' && typeof result !== 'function')) return undefined;
  const { status, headers } = result as { status?: unknown; headers?: unknown };
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 0 || status > 999) return undefined;
  const retryAfter = header(headers, 'retry-after');
  return retryAfter === undefined ? { status } : { status, retryAfter };
}

function header(headers: unknown, name: string): string | undefined {
  if (headers === null || typeof headers !== 'object') return undefined;
  const get = (headers as { get?: unknown }).get;
  if (typeof get === 'function') {
    const value: unknown = get.call(headers, name);
    return typeof value === 'string' ? value : undefined;
  }
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name) continue;
    const first: unknown = Array.isArray(value) ? value[0] : value;
    return typeof first === 'string' || typeof first === 'number' ? String(first) : undefined;
  }
  return undefined;
}
