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
    // A rested bucket spends its limit at once...
    expect(starts[2]! - starts[0]!).toBeLessThan(WINDOW);
    // ...and the fourth waits until the first grant expires (the clock is
    // shared by the object and this isolate; 5 ms covers timer granularity).
    expect(starts[3]! - starts[0]!).toBeGreaterThanOrEqual(WINDOW - 5);

    // The object's own record agrees: no rolling window holds more than 3.
    const { grants } = await stub.stats();
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
    expect(small.startedAt[0]! - big.startedAt[0]!).toBeGreaterThanOrEqual(WINDOW - 5);
  });
});
