// Verifies that a call's cost is what the real bucket takes, on every
// attempt, that a cost of 0 takes nothing, and that a bad cost is refused
// before anything is sent. A cost object crosses to execute unchanged; its
// shape is refused at the object's boundary too, before the engine (which
// checks its units and limits) sees it. One rule on every path: the same
// cost gets the same outcome, in the same words, from the client, a raw
// stub's execute and LimiterEntrypoint.execute.
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { defineBinder, defineLimiter, defineTestBinder, type UnitCosts } from '../../shim/client/index.ts';
import type { LimiterService } from '../../shim/do/index.ts';
import { createFakeLimiterNamespace } from '../../shim/testing/index.ts';
import { configured, recordingNamespace, rejection, testEnv, uniqueName, waitFor } from './helpers.ts';

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

  it('refuses a cost that is not an integer >= 0 before sending anything', async () => {
    const { name, stub } = await configured({}, 'cost-bad');
    const recording = recordingNamespace();
    const bound = defineLimiter({ binder: defineTestBinder(recording.namespace), name }).for({});
    for (const cost of [-1, 1.5, Number.NaN, Infinity]) {
      const error = await rejection(bound.call(() => 1, { read: (n) => n, cost }));
      expect(error).toBeInstanceOf(RangeError);
      expect(error.message).toBe(`call(fn, options): options.cost must be an integer >= 0 (received ${cost})`);
    }
    const unsafe = await rejection(bound.call(() => 1, { read: (n) => n, cost: 2 ** 53 }));
    expect(unsafe).toBeInstanceOf(RangeError);
    expect(unsafe.message).toBe(
      'call(fn, options): options.cost must be an integer >= 0 and at most 9007199254740991 (received 9007199254740992)',
    );
    for (const cost of ['2', null, true]) {
      const error = await rejection(bound.call(() => 1, { read: (n) => n, cost: cost as never }));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toContain(
        'options.cost must be a number or an object of unit costs such as { tokens: 1200 }',
      );
    }
    expect(recording.executes).toEqual([]);
    expect((await stub.stats()).used).toBe(0);
  });

  it('a cost of 0, or 0 of every unit, runs the call and takes nothing, yet holds a slot while it runs', async () => {
    const { name, stub } = await configured({ concurrency: 1 }, 'cost-zero');
    const bound = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name }).for(testEnv);
    expect(await bound.call(() => 'a', { read: (s) => s, cost: 0 })).toBe('a');
    expect(await bound.call(() => 'b', { read: (s) => s, cost: { requests: 0 } })).toBe('b');
    expect(await stub.stats()).toMatchObject({ used: 0, liveGrants: 0 });
    // While one runs, it holds the only slot: stats see it running, nothing used.
    let running: (() => void) | undefined;
    const held = bound.call(() => new Promise<string>((resolve) => (running = () => resolve('c'))), {
      read: (s) => s,
      cost: 0,
    });
    await waitFor(() => running !== undefined, 10_000, 'the zero-cost call to start');
    expect(await stub.stats()).toMatchObject({ used: 0, running: 1, active: 1 });
    running!();
    expect(await held).toBe('c');
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
      costs.map((cost) => ({ wire: 5, cost, reportsThrows: true, settles: 'data', relaysAbort: true })),
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
      [
        {},
        RangeError,
        `${prefix} names no unit (received {}): give a number, or at least one unit such as { tokens: 1200 }`,
      ],
      [
        { tokens: 2 ** 53 },
        RangeError,
        `${prefix}.tokens must be an integer >= 0 and at most 9007199254740991 (received 9007199254740992)`,
      ],
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
        TypeError,
        `${prefix} must be a number or an object of unit costs such as { tokens: 1200 } (received an array)`,
      ],
    ];
    for (const [cost, Kind, message] of refusals) {
      const error = await rejection(bound.call(() => 1, { read: (n) => n, cost: cost as never }));
      expect(error).toBeInstanceOf(Kind);
      expect(error.message).toContain(message);
    }
    expect(recording.executes).toEqual([]);
  });

  it("the object's boundary refuses a cost of the wrong shape as [drl:invalid-argument], before the engine sees it", async () => {
    const { stub } = await configured({}, 'cost-object-rpc');
    let ran = false;
    const fn = async () => ((ran = true), { value: 1 });
    const refusals: [unknown, 'TypeError' | 'RangeError', string][] = [
      [{ tokens: '5' }, 'TypeError', 'cost.tokens must be a number (received "5")'],
      [
        { 'a b': null },
        'RangeError',
        'cost has the key "a b", which is not a unit name (a letter, then at most 31 letters, digits, _ or -)',
      ],
      [
        [5],
        'TypeError',
        'cost must be a number or an object of unit costs such as { tokens: 1200 } (received an array)',
      ],
      [true, 'TypeError', 'cost must be a number or an object of unit costs such as { tokens: 1200 } (received true)'],
      [
        new Map(),
        'TypeError',
        'cost must be a plain object of unit costs such as { tokens: 1200 } (received a Map instance)',
      ],
    ];
    for (const [cost, kind, message] of refusals) {
      expect(await stub.execute(fn, { cost, settles: 'data' } as never)).toEqual({
        'drl:wire': 5,
        ok: false,
        error: { id: 'invalid-argument', kind, message: `[drl:invalid-argument] ${message}` },
      });
    }
    expect(ran).toBe(false);
    expect((await stub.stats()).used).toBe(0);
  });

  it('the same cost gets the same outcome and words from the client, the raw stub and the entrypoint', async () => {
    const service = (exports as unknown as { LimiterEntrypoint: LimiterService }).LimiterEntrypoint;
    const { name, stub } = await configured({}, 'cost-paths');
    const bound = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name }).for(testEnv);
    const nine = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`u${i}`, 1]));
    type Outcome = { ok: true; value: unknown } | { ok: false; kind: string; message: string };
    const outcome = async (call: () => Promise<unknown>): Promise<Outcome> => {
      try {
        return { ok: true, value: await call() };
      } catch (error) {
        return { ok: false, kind: (error as Error).constructor.name, message: (error as Error).message };
      }
    };
    const costs: unknown[] = [
      0,
      3,
      { requests: 0 },
      { requests: 2 },
      -1,
      1.5,
      Number.NaN,
      2 ** 53,
      '2',
      [5],
      {},
      nine,
      { requests: -1 },
      { 'a b': 1 },
      { tokens: 5 }, // no window counts tokens: the object's refusal
      1001, // above the bucket's limit of 1000
      { requests: 2e9 }, // above the largest limit any window may have
    ];
    for (const cost of costs) {
      const viaClient = await outcome(() => bound.call(() => 'ran', { read: (s) => s, cost: cost as never }));
      const viaStub = await outcome(() => stub.execute(async () => ({ value: 'ran' }), { cost } as never));
      const viaService = await outcome(() => service.execute(name, async () => ({ value: 'ran' }), { cost } as never));
      expect({ cost, viaService }).toEqual({ cost, viaService: viaStub });
      if (viaStub.ok || viaClient.ok) {
        expect({ cost, viaClient }).toEqual({ cost, viaClient: viaStub });
        continue;
      }
      // Refused: in the client's words before sending, or the object's own error as it sent it.
      const words = viaStub.message.replace(/^\[drl:invalid-argument\] cost/, 'call(fn, options): options.cost');
      expect({ cost, viaClient }).toEqual({
        cost,
        viaClient: {
          ok: false,
          kind: viaStub.kind,
          message: expect.stringMatching(new RegExp(`^(${escape(words)}|${escape(viaStub.message)})$`)),
        },
      });
    }
    const codes = (
      await Promise.all(costs.map((cost) => outcome(() => stub.execute(async () => ({ value: 1 }), { cost } as never))))
    ).map((o) => (o.ok ? 'ok' : /\[drl:([a-z-]+)\]/.exec(o.message)![1]));
    expect(codes).toEqual([
      'ok',
      'ok',
      'ok',
      'ok',
      ...Array<string>(10).fill('invalid-argument'),
      'invalid-argument',
      'cost-too-large',
      'cost-too-large',
    ]);
  });
});

/** `text` as a literal in a RegExp. */
function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
