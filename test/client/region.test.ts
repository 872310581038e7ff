// Verifies limiter.for(env, { region }): a tree bucket's callers reach the
// child <name>@<region> with call sites unchanged (and place it with a
// locationHint when the region is a Cloudflare location hint), callers with
// no region reach the root, and a bad region throws at bind time naming it.
import { describe, expect, it } from 'vitest';
import {
  defineBinder,
  defineLimiter,
  defineTestBinder,
  NoSuchLimiterError,
  regionNear,
} from '../../shim/client/index.ts';
import { LOCATION_HINTS } from '../../shim/rules.ts';
import { bucket, configured, rejection, testEnv } from './helpers.ts';

describe('limiter.for(env, { region })', () => {
  it('calls the tree child of the region, and the root without one', async () => {
    const { name } = await configured({ tree: {} }, 'region');
    const api = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name });
    const near = api.for(testEnv, { region: 'weur' });
    expect(near.name).toBe(`${name}@weur`);
    expect(await near.call(() => new Response('near'), { read: (res) => res.text() })).toBe('near');
    expect(await api.for(testEnv).call(() => new Response('root'), { read: (res) => res.text() })).toBe('root');
    // The child joined its root, and took the call from a lease: the root's
    // ledger lent it.
    const rows = await bucket(name).stats();
    expect(rows.effective.tree?.leaseMs).toBe(2000);
    expect((await bucket(`${name}@weur`).stats()).name).toBe(`${name}@weur`);
  });

  it('places a child in a location hint region, and only there', async () => {
    const seen: { name: unknown; hint: string | undefined }[] = [];
    const namespace = {
      idFromName: (name: string) => name,
      get: (id: unknown, options?: { locationHint?: string }) => {
        seen.push({ name: id, hint: options?.locationHint });
        return { execute: async (fn: () => unknown) => fn() };
      },
    };
    const api = defineLimiter({ binder: defineTestBinder(namespace), name: 'api' });
    await api.for({}, { region: 'apac' }).call(() => 1, { read: (v) => v });
    await api.for({}, { region: 'lab1' }).call(() => 2, { read: (v) => v });
    await api.for({}).call(() => 3, { read: (v) => v });
    expect(seen).toEqual([
      { name: 'api@apac', hint: 'apac' },
      { name: 'api@lab1', hint: undefined },
      { name: 'api', hint: undefined },
    ]);
  });

  it('throws at bind time for a region that breaks the rule, naming it', () => {
    const api = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name: 'region-rule' });
    expect(() => api.for(testEnv, { region: 'West Europe' })).toThrowError(
      /^limiter\.for\(env, options\): region must be a lowercase letter, then at most 9 lowercase letters or digits, not "root" \(received "West Europe"\)$/,
    );
    expect(() => api.for(testEnv, { region: 'root' })).toThrowError(RangeError);
    expect(() => api.for(testEnv, { region: 7 as unknown as string })).toThrowError(TypeError);
    expect(() => api.for(testEnv, { place: 'weur' } as never)).toThrowError(/unknown key "place" \(allowed: region\)/);
  });

  it('a bucket that is no tree has no children: its region is an unconfigured object', async () => {
    const { name } = await configured({}, 'no-tree');
    const api = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name });
    const error = await rejection(api.for(testEnv, { region: 'weur' }).call(() => 1, { read: (v) => v }));
    expect(error).toBeInstanceOf(NoSuchLimiterError);
  });
});

describe('regionNear(request)', () => {
  const from = (cf: Record<string, unknown>) => ({ cf });

  it('names the location hint of the part of the world a request came from', () => {
    expect(regionNear(from({ continent: 'NA', longitude: '-122.42', country: 'US' }))).toBe('wnam');
    expect(regionNear(from({ continent: 'NA', longitude: '-73.94', country: 'US' }))).toBe('enam');
    expect(regionNear(from({ continent: 'NA' }))).toBe('enam'); // no longitude: the east
    expect(regionNear(from({ continent: 'SA', country: 'BR' }))).toBe('sam');
    expect(regionNear(from({ continent: 'EU', longitude: '2.35', country: 'FR' }))).toBe('weur');
    expect(regionNear(from({ continent: 'EU', longitude: '26.10', country: 'RO' }))).toBe('eeur');
    expect(regionNear(from({ continent: 'AS', country: 'JP' }))).toBe('apac');
    expect(regionNear(from({ continent: 'AS', country: 'AE' }))).toBe('me');
    expect(regionNear(from({ continent: 'AS', country: 'TR' }))).toBe('eeur');
    expect(regionNear(from({ continent: 'OC', country: 'AU' }))).toBe('oc');
    expect(regionNear(from({ continent: 'AF', country: 'ZA' }))).toBe('afr');
  });

  it('draws the lines at 100 degrees west and 20 degrees east', () => {
    expect(regionNear(from({ continent: 'NA', longitude: -100.01 }))).toBe('wnam');
    expect(regionNear(from({ continent: 'NA', longitude: -100 }))).toBe('enam');
    expect(regionNear(from({ continent: 'EU', longitude: 20 }))).toBe('weur');
    expect(regionNear(from({ continent: 'EU', longitude: 20.01 }))).toBe('eeur');
  });

  it('says nothing (the root) when the request does not say where it came from', () => {
    expect(regionNear(undefined)).toBeUndefined();
    expect(regionNear(null)).toBeUndefined();
    expect(regionNear(new Request('https://example.com/'))).toBeUndefined();
    expect(regionNear(from({}))).toBeUndefined();
    expect(regionNear(from({ continent: 'AN' }))).toBeUndefined();
    expect(regionNear(from({ continent: 42 }))).toBeUndefined();
    expect(regionNear({ cf: 'EU' })).toBeUndefined();
    // A longitude that is not a number reads as absent.
    expect(regionNear(from({ continent: 'EU', longitude: 'east' }))).toBe('weur');
  });

  it('answers only location hints, which bind as regions and place their child', () => {
    const continents = ['NA', 'SA', 'EU', 'AS', 'OC', 'AF'];
    const seen = new Set<string>();
    for (const continent of continents) {
      for (const country of ['US', 'AE', 'TR', 'JP']) {
        for (const longitude of ['-150', '0', '40']) {
          const hint = regionNear(from({ continent, country, longitude }));
          expect(hint).toBeDefined();
          seen.add(hint as string);
        }
      }
    }
    expect([...seen].sort()).toEqual([...LOCATION_HINTS].sort());
    const api = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name: 'near' });
    for (const hint of seen) expect(api.for(testEnv, { region: hint }).name).toBe(`near@${hint}`);
    expect(api.for(testEnv, { region: regionNear(new Request('https://example.com/')) }).name).toBe('near');
  });
});
