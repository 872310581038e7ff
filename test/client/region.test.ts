// Verifies limiter.for(env, { region }): a tree bucket's callers reach the
// child <name>@<region> with call sites unchanged (and place it with a
// locationHint when the region is a Cloudflare location hint), callers with
// no region reach the root, and a bad region throws at bind time naming it.
import { describe, expect, it } from 'vitest';
import { defineBinder, defineLimiter, defineTestBinder, NoSuchLimiterError } from '../../shim/client/index.ts';
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
