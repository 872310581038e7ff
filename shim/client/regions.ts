// The lease-tree child nearest a request: Cloudflare's location hint for
// where the request came from, read from its `cf` properties
// (docs/trees.md, "Turning it on").

import type { LocationHint } from '../rules.ts';

export type { LocationHint };

// Countries Cloudflare reports on the Asian continent that its `me`
// (Middle East) hint serves better than `apac`, and those nearer `eeur`.
const MIDDLE_EAST = new Set(['AE', 'BH', 'IL', 'IQ', 'IR', 'JO', 'KW', 'LB', 'OM', 'PS', 'QA', 'SA', 'SY', 'YE']);
const EAST_EUROPE_IN_ASIA = new Set(['AM', 'AZ', 'CY', 'GE', 'TR']);
// West of this longitude North America is `wnam`; east of the other,
// Europe is `eeur` (degrees).
const WEST_NORTH_AMERICA = -100;
const EAST_EUROPE = 20;

function text(cf: object, key: string): string | undefined {
  const value = (cf as Record<string, unknown>)[key];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function longitude(cf: object): number | undefined {
  const raw = (cf as Record<string, unknown>).longitude;
  const value = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
  return Number.isFinite(value) ? value : undefined;
}

/**
 * The location hint nearest where `request` came from, by its `cf`
 * continent (and longitude in North America and Europe, country in Asia),
 * for `limiter.for(env, { region: regionNear(request) })`: a tree's callers
 * then reach the child in their part of the world. `undefined` when the
 * request carries no continent (a test's plain Request, Antarctica): the
 * call then goes to the root, as with no region.
 *
 * @example
 * const items = await api.for(env, { region: regionNear(request) }).call(() => fetch(url), { read: (r) => r.text() });
 */
export function regionNear(request: { readonly cf?: unknown } | null | undefined): LocationHint | undefined {
  const cf = request?.cf;
  if (cf === null || typeof cf !== 'object') return undefined;
  const country = text(cf, 'country')?.toUpperCase();
  switch (text(cf, 'continent')?.toUpperCase()) {
    case 'NA':
      return (longitude(cf) ?? 0) < WEST_NORTH_AMERICA ? 'wnam' : 'enam';
    case 'SA':
      return 'sam';
    case 'EU':
      return (longitude(cf) ?? 0) > EAST_EUROPE ? 'eeur' : 'weur';
    case 'AS':
      if (country !== undefined && MIDDLE_EAST.has(country)) return 'me';
      if (country !== undefined && EAST_EUROPE_IN_ASIA.has(country)) return 'eeur';
      return 'apac';
    case 'OC':
      return 'oc';
    case 'AF':
      return 'afr';
    default:
      return undefined;
  }
}
