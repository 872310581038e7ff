/**
 * Names a received value in an error message: enough to recognise a mistake
 * ("a function", "undefined", "\"RATE_LIMTER\"") without dumping the value.
 */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function') return 'a promise';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
