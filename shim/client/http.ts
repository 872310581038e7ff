/**
 * The built-in HTTP layer: whatever the hooks say, a Response-like result
 * reports its status, and a 429 reports its Retry-After header. It cannot be
 * switched off, so overriding a hook never loses genuine 429 handling.
 */
import { MAX_RATE_LIMIT_HEADER_BYTES, MAX_RATE_LIMIT_HEADERS } from '../limits.ts';

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

/**
 * Whether the engine reads a header (lower-case name) when a bucket learns
 * from them: drl::is_rate_limit_header (test/node checks they agree).
 */
export function isRateLimitHeader(name: string): boolean {
  return (
    (name.startsWith('x-ratelimit-') && name.length > 'x-ratelimit-'.length) ||
    (name.startsWith('anthropic-ratelimit-') && name.length > 'anthropic-ratelimit-'.length) ||
    name === 'ratelimit' ||
    name === 'ratelimit-policy' ||
    name === 'ratelimit-limit' ||
    name === 'ratelimit-remaining' ||
    name === 'ratelimit-reset'
  );
}

/**
 * A Response-like result's rate-limit headers as "name: value" lines, for a
 * bucket that learns from them; undefined when it has none. Bounded by what
 * the engine reads: the first MAX_RATE_LIMIT_HEADERS, values longer than
 * MAX_RATE_LIMIT_HEADER_BYTES left out.
 */
export function rateLimitHeaders(result: unknown): string | undefined {
  const headers = (result as { headers?: unknown } | null)?.headers;
  if (headers === null || typeof headers !== 'object') return undefined;
  const lines: string[] = [];
  const add = (name: string, value: unknown) => {
    const lower = name.toLowerCase();
    if (lines.length >= MAX_RATE_LIMIT_HEADERS || !isRateLimitHeader(lower)) return;
    const text = Array.isArray(value)
      ? value.join(', ')
      : typeof value === 'string' || typeof value === 'number'
        ? String(value)
        : undefined;
    if (text === undefined || text.length > MAX_RATE_LIMIT_HEADER_BYTES || /[\r\n]/.test(text)) return;
    lines.push(`${lower}: ${text}`);
  };
  const forEach = (headers as { forEach?: unknown }).forEach;
  if (typeof forEach === 'function') {
    forEach.call(headers, (value: unknown, name: unknown) => {
      if (typeof name === 'string') add(name, value);
    });
  } else {
    for (const [name, value] of Object.entries(headers)) add(name, value);
  }
  return lines.length > 0 ? lines.join('\n') : undefined;
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
