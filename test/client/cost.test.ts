// Verifies that a call's cost is what the real bucket takes, on every
// attempt, and that a bad cost is refused before anything is sent.
import { describe, expect, it } from 'vitest';

import { defineBinder, defineLimiter, defineTestBinder } from '../../shim/client/index.ts';
import { configured, recordingNamespace, rejection, testEnv } from './helpers.ts';

describe('cost', () => {
  it('takes cost units from the bucket, 1 by default', async () => {
    const { name, stub } = await configured({}, 'cost');
    const bound = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name }).for(testEnv);
    await bound.call(() => 'a', { read: (s) => s });
    expect((await stub.stats()).used).toBe(1);
    await bound.call(() => 'b', { read: (s) => s, cost: 5 });
    expect((await stub.stats()).used).toBe(6);
  });

  it('takes the cost again on each of the object retries', async () => {
    const { name, stub } = await configured({ retry: { maxRetries: 2, minDelayInMs: 0 } }, 'cost-retry');
    const bound = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name }).for(testEnv);
    let attempt = 0;
    const value = await bound.call(() => ++attempt, {
      read: (n) => n,
      error: (n) => (n < 3 ? { message: 'again', retryable: true } : null),
      cost: 2,
    });
    expect(value).toBe(3);
    expect((await stub.stats()).used).toBe(6);
  });

  it('refuses a cost that is not an integer >= 1 before sending anything', async () => {
    const { name, stub } = await configured({}, 'cost-bad');
    const recording = recordingNamespace();
    const bound = defineLimiter({ binder: defineTestBinder(recording.namespace), name }).for({});
    for (const cost of [0, -1, 1.5, Number.NaN, '2', null]) {
      const error = await rejection(bound.call(() => 1, { read: (n) => n, cost: cost as number }));
      expect(error).toBeInstanceOf(RangeError);
      expect(error.message).toContain('options.cost must be an integer >= 1');
    }
    expect(recording.executes).toEqual([]);
    expect((await stub.stats()).used).toBe(0);
  });
});
