// Verifies that a call's cost is what the real bucket takes, on every
// attempt, and that a bad cost is refused before anything is sent. A cost
// object crosses to execute unchanged; its shape is refused at the object's
// boundary too, before the engine (which checks its units) sees it.
import { describe, expect, it } from 'vitest';
import { defineBinder, defineLimiter, defineTestBinder, type UnitCosts } from '../../shim/client/index.ts';
import { createFakeLimiterNamespace } from '../../shim/testing/index.ts';
import { configured, recordingNamespace, rejection, testEnv, uniqueName } from './helpers.ts';

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

  it('passes a cost object to execute unchanged, beside the options bound.call always sets', async () => {
    const fake = createFakeLimiterNamespace();
    const seen: unknown[] = [];
    const bound = defineLimiter({
      binder: defineTestBinder({
        idFromName: (name) => fake.namespace.idFromName(name),
        get: (id) => ({
          execute: (fn, options) => {
            seen.push(options);
            return fake.namespace.get(id as { name: string }).execute(fn, options);
          },
        }),
      }),
      name: 'cost-objects',
    }).for({});
    const costs: (number | UnitCosts)[] = [
      { tokens: 4000 },
      { requests: 2, tokens: 0 },
      Object.freeze({ images: 1 }),
      3,
    ];
    for (const cost of costs) expect(await bound.call(() => 'ok', { read: (s) => s, cost })).toBe('ok');
    expect(seen).toEqual(
      costs.map((cost) => ({ wire: 5, cost, reportsThrows: true, settles: 'data', whenAborted: expect.any(Function) })),
    );
    expect(fake.calls.map((c) => c.cost)).toEqual(costs);
  });

  it('refuses a cost object of the wrong shape before sending anything, naming the key and what it held', async () => {
    const recording = recordingNamespace();
    const bound = defineLimiter({
      binder: defineTestBinder(recording.namespace),
      name: uniqueName('cost-object-bad'),
    }).for({});
    const prefix = 'call(fn, options): options.cost';
    const refusals: [unknown, typeof TypeError | typeof RangeError, string][] = [
      [{}, RangeError, `${prefix} must name at least one unit (received {})`],
      [{ tokens: -1 }, RangeError, `${prefix}.tokens must be an integer >= 0 (received -1)`],
      [{ tokens: 1.5 }, RangeError, `${prefix}.tokens must be an integer >= 0 (received 1.5)`],
      [
        { tokens: Number.POSITIVE_INFINITY },
        RangeError,
        `${prefix}.tokens must be an integer >= 0 (received Infinity)`,
      ],
      [{ tokens: '5' }, TypeError, `${prefix}.tokens must be a number (received "5")`],
      [{ requests: 1, tokens: undefined }, TypeError, `${prefix}.tokens must be a number (received undefined)`],
      [
        { 'total tokens': 5 },
        RangeError,
        `${prefix} has the key "total tokens", which is not a unit name (a letter, then at most 31 letters, digits, _ or -)`,
      ],
      [{ 'to\u200bkens': 5 }, RangeError, `${prefix} has the key "to\\u200bkens", which is not a unit name`],
      [{ _tokens: 5 }, RangeError, `${prefix} has the key "_tokens", which is not a unit name`],
      [
        Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`u${i}`, 1])),
        RangeError,
        `${prefix} must name at most 8 units, one per window (received 9)`,
      ],
      [
        new Map([['tokens', 5]]),
        TypeError,
        `${prefix} must be a plain object of unit costs such as { tokens: 1200 } (received a Map instance)`,
      ],
      [
        [5],
        RangeError,
        `${prefix} must be an integer >= 1 or an object of unit costs such as { tokens: 1200 } (received an array)`,
      ],
    ];
    for (const [cost, Kind, message] of refusals) {
      const error = await rejection(bound.call(() => 1, { read: (n) => n, cost: cost as never }));
      expect(error).toBeInstanceOf(Kind);
      expect(error.message).toContain(message);
    }
    expect(recording.executes).toEqual([]);
  });

  it("the object's boundary refuses a cost object of the wrong shape as [drl:invalid-argument], before the engine sees it", async () => {
    const { stub } = await configured({}, 'cost-object-rpc');
    let ran = false;
    const fn = async () => ((ran = true), { value: 1 });
    const refusals: [unknown, string][] = [
      [{ tokens: '5' }, '[drl:invalid-argument] cost.tokens must be a number (received "5")'],
      [{ 'a b': null }, '[drl:invalid-argument] cost["a b"] must be a number (received null)'],
      [
        [5],
        '[drl:invalid-argument] cost must be a number (received an array), or a plain object of unit costs such as { tokens: 1200 }',
      ],
      [
        true,
        '[drl:invalid-argument] cost must be a number (received true), or a plain object of unit costs such as { tokens: 1200 }',
      ],
    ];
    for (const [cost, message] of refusals) {
      expect(await stub.execute(fn, { cost, settles: 'data' } as never)).toEqual({
        'drl:wire': 5,
        ok: false,
        error: { id: 'invalid-argument', kind: 'TypeError', message },
      });
    }
    expect(ran).toBe(false);
    expect((await stub.stats()).used).toBe(0);
  });
});
