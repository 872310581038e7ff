// Verifies the shared limits (shim/limits.ts, generated from
// core/include/drl/limits.def) as a caller meets them: through the client
// and through a raw stub, a value at each bound of a call is taken and one
// past it is refused before anything is taken, in the same words on both
// paths, naming the bound.
import { describe, expect, it } from 'vitest';
import { defineBinder, defineLimiter } from '../../shim/client/index.ts';
import {
  DEFAULT_UNIT,
  MAX_DELAY_MS,
  MAX_EXTRA_WINDOWS,
  MAX_NAME_BYTES,
  MAX_PRIORITY,
  MAX_RETRIES,
  MAX_WINDOWS,
} from '../../shim/limits.ts';
import { configured, rejection, testEnv } from './helpers.ts';

/** How each path puts an argument's name before the rule: the client names the option, a raw stub marks the id. */
const CLIENT = 'call(fn, options): options.';
const STUB = '[drl:invalid-argument] ';

/** The bucket `name` as a caller's application binds it. */
const limiterFor = (name: string) =>
  defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name }).for(testEnv);

describe('the limits of a call, on the client and on a raw stub', () => {
  const bounds = [
    ['priority', -MAX_PRIORITY, MAX_PRIORITY],
    ['maxWaitMs', 0, MAX_DELAY_MS],
    ['maxRetries', 0, MAX_RETRIES],
  ] as const;

  it('priority, maxWaitMs and maxRetries run at their bounds; one past is a RangeError naming the bound', async () => {
    const { name, stub } = await configured();
    const bound = limiterFor(name);
    let runs = 0;
    for (const [option, min, max] of bounds) {
      for (const value of [min, max]) {
        expect(await bound.call(() => ++runs, { read: (n) => n, [option]: value })).toBe(runs);
        expect(await stub.execute(async () => ({ value: ++runs }), { [option]: value })).toBe(runs);
      }
      for (const value of [min - 1, max + 1]) {
        const rule = `${option} must be an integer between ${min} and ${max} (received ${value})`;
        const viaClient = await rejection(bound.call(() => ++runs, { read: (n) => n, [option]: value }));
        const viaStub = await rejection(stub.execute(async () => ({ value: ++runs }), { [option]: value }));
        expect([viaClient.name, viaClient.message]).toEqual(['RangeError', CLIENT + rule]);
        expect([viaStub.name, viaStub.message]).toEqual(['RangeError', STUB + rule]);
      }
    }
    expect(runs).toBe(bounds.length * 4);
    expect((await stub.stats()).used).toBe(bounds.length * 4);
  });

  it('one that is not a finite number is a TypeError naming the bound, in the same words on both paths', async () => {
    const { name, stub } = await configured();
    const bound = limiterFor(name);
    let ran = false;
    for (const [option, min, max] of bounds) {
      for (const value of [Number.NaN, Number.POSITIVE_INFINITY, '1']) {
        const viaClient = await rejection(bound.call(() => (ran = true), { read: (n) => n, [option]: value }));
        const viaStub = await rejection(stub.execute(async () => ({ value: (ran = true) }), { [option]: value }));
        expect([viaClient.name, viaStub.name]).toEqual(['TypeError', 'TypeError']);
        expect(viaClient.message).toContain(`${option} must be a finite number, an integer between ${min} and ${max}`);
        expect(viaClient.message.slice(CLIENT.length)).toBe(viaStub.message.slice(STUB.length));
      }
    }
    expect(ran).toBe(false);
    expect((await stub.stats()).used).toBe(0);
  });
});

describe('the limits of a cost, on the client and on a raw stub', () => {
  it(`a unit name of ${MAX_NAME_BYTES} characters is counted; one more is refused in the same words`, async () => {
    const longest = 'u'.repeat(MAX_NAME_BYTES);
    const { name, stub } = await configured({
      windows: { longest: { unit: longest, limitPerWindow: 100, windowInMs: 60_000 } },
    });
    const bound = limiterFor(name);
    expect(await bound.call(() => 'ran', { read: (s) => s, cost: { [longest]: 2 } })).toBe('ran');
    expect(await stub.execute(async () => ({ value: 'ran' }), { cost: { [longest]: 3 } })).toBe('ran');
    const stats = await stub.stats();
    expect(stats.windows.find((w) => w.name === 'longest')).toMatchObject({ unit: longest, used: 5 });

    const tooLong = `${longest}u`;
    const rule = `cost has the key "${tooLong}", which is not a unit name (a letter, then at most ${MAX_NAME_BYTES - 1} letters, digits, _ or -)`;
    const viaClient = await rejection(bound.call(() => 'ran', { read: (s) => s, cost: { [tooLong]: 1 } }));
    const viaStub = await rejection(stub.execute(async () => ({ value: 'ran' }), { cost: { [tooLong]: 1 } }));
    expect([viaClient.name, viaClient.message]).toEqual(['RangeError', CLIENT + rule]);
    expect([viaStub.name, viaStub.message]).toEqual(['RangeError', STUB + rule]);
    expect((await stub.stats()).used).toBe(2);
  });

  it(`a cost may name all ${MAX_WINDOWS} units of a bucket with every window; one more is refused in the same words`, async () => {
    const units = Array.from({ length: MAX_EXTRA_WINDOWS }, (_, i) => `unit${i}`);
    const { name, stub } = await configured({
      windows: Object.fromEntries(units.map((unit) => [unit, { unit, limitPerWindow: 100, windowInMs: 60_000 }])),
    });
    const bound = limiterFor(name);
    const every = Object.fromEntries([DEFAULT_UNIT, ...units].map((unit) => [unit, 1]));
    expect(Object.keys(every)).toHaveLength(MAX_WINDOWS);
    expect(await bound.call(() => 'ran', { read: (s) => s, cost: every })).toBe('ran');
    expect(await stub.execute(async () => ({ value: 'ran' }), { cost: every })).toBe('ran');
    expect((await stub.stats()).windows.map((w) => w.used)).toEqual(Array(MAX_WINDOWS).fill(2));

    const tooMany = { ...every, extra: 1 };
    const rule = `cost must name at most ${MAX_WINDOWS} units, one per window (received ${MAX_WINDOWS + 1})`;
    const viaClient = await rejection(bound.call(() => 'ran', { read: (s) => s, cost: tooMany }));
    const viaStub = await rejection(stub.execute(async () => ({ value: 'ran' }), { cost: tooMany }));
    expect([viaClient.name, viaClient.message]).toEqual(['RangeError', CLIENT + rule]);
    expect([viaStub.name, viaStub.message]).toEqual(['RangeError', STUB + rule]);
  });
});
