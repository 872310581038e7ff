/**
 * The built-in HTTP layer: whatever the hooks say, a Response-like result
 * reports its status, and a 429 reports its Retry-After header. It cannot be
 * switched off, so overriding a hook never loses genuine 429 handling.
 */

/** A Response-like result's status: an integer `status` (0-999); undefined when it is not HTTP. */
export function httpStatus(result: unknown): number | undefined {
  if (result === null || (typeof result !== 'object' && typeof result !== 'function')) return undefined;
  const { status } = result as { status?: unknown };
  return typeof status === 'number' && Number.isInteger(status) && status >= 0 && status <= 999 ? status : undefined;
}

/**
 * The raw Retry-After header of a Response-like result, from `headers` as a
 * `Headers` object or a plain object of header names (matched
 * case-insensitively). Read only for rate-limited attempts.
 */
export function retryAfterHeader(result: unknown): string | undefined {
  return header((result as { headers?: unknown }).headers, 'retry-after');
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
