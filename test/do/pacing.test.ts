// Verifies pacing with real timers: a limit of N per window admits N at once
// and the N+1th only once the first grant has left the window.
import { describe, expect, it } from 'vitest';

import { configured, recorder } from './helpers.ts';

const WINDOW = 600;

describe('pacing', () => {
  it('admits the whole limit at once, then waits a full window for the next', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 3, windowInMs: WINDOW }, concurrency: 10 });
    const calls = Array.from({ length: 4 }, (_, i) => recorder({ value: i }));
    const values = await Promise.all(calls.map((c) => stub.execute(c.fn)));
    expect(values).toEqual([0, 1, 2, 3]);

    // In the order the object admitted them (arrival order is the object's,
    // not the order the promises were made in).
    const starts = calls.map((c) => c.startedAt[0]!).sort((a, b) => a - b);
    // A rested bucket spends its limit at once, and the fourth starts last.
    expect(starts[2]! - starts[0]!).toBeLessThan(WINDOW);
    expect(calls.every((c) => c.startedAt.length === 1)).toBe(true);

    // By the object's own clock (grants are dated when it admits; a callback
    // is invoked a commit later, which on a loaded machine varies): the first
    // three were admitted together and the fourth a full window after them.
    const { grants } = await stub.stats();
    const admitted = grants.flatMap(([at, n]) => Array.from({ length: n! }, () => at!)).sort((a, b) => a - b);
    expect(admitted).toHaveLength(4);
    expect(admitted[2]! - admitted[0]!).toBeLessThan(WINDOW);
    expect(admitted[3]! - admitted[0]!).toBeGreaterThanOrEqual(WINDOW);
    // No rolling window holds more than 3.
    for (const [at] of grants) {
      const inWindow = grants.filter(([t]) => t! > at! - WINDOW && t! <= at!).reduce((sum, [, n]) => sum + n!, 0);
      expect(inWindow).toBeLessThanOrEqual(3);
    }
  });

  it('takes `cost` units per call', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 4, windowInMs: WINDOW }, concurrency: 10 });
    const big = recorder({ value: 'big' });
    const small = recorder({ value: 'small' });
    await stub.execute(big.fn, { cost: 3 });
    expect((await stub.stats()).remaining).toBe(1);
    const pending = stub.execute(small.fn, { cost: 2 });
    expect(await pending).toBe('small');
    expect(small.startedAt[0]!).toBeGreaterThanOrEqual(big.startedAt[0]!);
    // By the object's clock: the small call's grant came a full window after the big one's.
    const grants = (await stub.stats()).grants.map(([at, n]) => [at!, n!]).sort((a, b) => a[0]! - b[0]!);
    expect(grants.map(([, n]) => n)).toEqual([3, 2]);
    expect(grants[1]![0]! - grants[0]![0]!).toBeGreaterThanOrEqual(WINDOW);
  });
});
