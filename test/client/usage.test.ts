// Verifies the usage hook: what an attempt really cost, measured in the
// caller's isolate after read, chained call site first and then the
// limiter's default (null at the call site silences both), checked before it
// crosses, and carried to the object as CallReport.usage. Each call goes to
// the real object through a recording namespace, which keeps every report.
// The last cases follow a usage into the real bucket's windows.
import { describe, expect, it } from 'vitest';
import { defineLimiter, defineTestBinder, type LimiterDefinition } from '../../shim/client/index.ts';
import { reportingCallback, type HookLayers } from '../../shim/client/report.ts';
import { abortRelay } from '../../shim/client/waiting.ts';
import { configured, recordingNamespace, rejection } from './helpers.ts';

type Defaults = Pick<LimiterDefinition<object, unknown>, 'rateLimit' | 'error' | 'usage'>;

async function setup(
  defaults: Defaults = {},
  retry: { maxRetries?: number; minDelayInMs?: number } = { maxRetries: 0 },
) {
  // Windows for every unit the hooks below report: the object refuses a usage naming a unit none counts.
  const windows = {
    tpm: { unit: 'tokens', limitPerWindow: 1_000_000, windowInMs: 60_000 },
    ipm: { unit: 'images', limitPerWindow: 1_000, windowInMs: 60_000 },
  };
  const { name, stub } = await configured({ retry, windows }, 'usage');
  const recording = recordingNamespace();
  const bound = defineLimiter<object, unknown>({
    binder: defineTestBinder(recording.namespace),
    name,
    ...defaults,
  }).for({});
  return { bound, recording, stub };
}

const completion = (tokens: number, status = 200) => Response.json({ usage: { total_tokens: tokens } }, { status });
type Completion = { usage?: { total_tokens: number } };

describe('usage hook', () => {
  it('sends what the call-site hook measured, from the result and what read made of it', async () => {
    const { bound, recording } = await setup();
    const seen: unknown[] = [];
    const value = await bound.call(() => completion(1234), {
      read: (res) => res.json<Completion>(),
      cost: 5,
      usage: (res, body) => {
        seen.push([res.status, body]);
        return { tokens: body.usage!.total_tokens };
      },
    });
    expect(value).toEqual({ usage: { total_tokens: 1234 } });
    expect(seen).toEqual([[200, { usage: { total_tokens: 1234 } }]]);
    expect(recording.reports).toEqual([
      { value: { usage: { total_tokens: 1234 } }, status: 200, usage: { tokens: 1234 } },
    ]);
  });

  it('an async hook is awaited, and its answer may name several units, zero included', async () => {
    const { bound, recording } = await setup();
    await bound.call(() => 'done', { read: (s) => s, usage: async () => ({ requests: 1, tokens: 0, images: 3 }) });
    expect(recording.reports).toEqual([{ value: 'done', usage: { requests: 1, tokens: 0, images: 3 } }]);
  });

  it('the call site beats the limiter default; undefined or null from the call site falls through to it', async () => {
    const { bound, recording } = await setup({ usage: () => ({ tokens: 7 }) });
    await bound.call(() => 1, { read: (n) => n, usage: () => ({ tokens: 1 }) });
    await bound.call(() => 2, { read: (n) => n, usage: () => undefined });
    await bound.call(() => 3, { read: (n) => n, usage: async () => null });
    await bound.call(() => 4, { read: (n) => n });
    expect(recording.reports.map((r) => r.usage)).toEqual([{ tokens: 1 }, { tokens: 7 }, { tokens: 7 }, { tokens: 7 }]);
  });

  it('an explicit null at the call site silences the limiter default: no usage is sent and the default is never asked', async () => {
    let asked = 0;
    const { bound, recording } = await setup({
      usage: () => {
        asked += 1;
        return { tokens: 7 };
      },
    });
    expect(await bound.call(() => new Response('ok'), { read: (res) => res.text(), usage: null })).toBe('ok');
    expect(asked).toBe(0);
    expect(recording.reports).toEqual([{ value: 'ok', status: 200 }]);
  });

  it('no answer from any layer sends no usage field at all (the reservation stands)', async () => {
    const { bound, recording } = await setup({ usage: () => null });
    await bound.call(() => 1, { read: (n) => n, usage: () => undefined });
    await bound.call(() => 2, { read: (n) => n });
    expect(recording.reports).toEqual([{ value: 1 }, { value: 2 }]);
    expect(recording.reports.every((r) => !('usage' in r))).toBe(true);
  });

  it('runs on failed and rate-limited attempts too, beside their failure and 429', async () => {
    const { bound, recording } = await setup();
    const failed = await rejection(
      bound.call(() => completion(40, 500), {
        read: (res) => res.json<Completion>(),
        error: (res) => (res.ok ? null : { message: 'upstream error', retryable: false }),
        usage: (res, body) => (body.usage ? { tokens: body.usage.total_tokens } : null),
      }),
    );
    expect(failed.message).toContain('upstream error');
    const limited = await rejection(
      bound.call(() => new Response('slow down', { status: 429 }), {
        read: (res) => res.text(),
        usage: () => ({ tokens: 0 }),
      }),
    );
    expect(limited.message).toContain('(status 429)');
    expect(recording.reports).toEqual([
      {
        value: { usage: { total_tokens: 40 } },
        status: 500,
        failure: { message: 'upstream error', retryable: false },
        usage: { tokens: 40 },
      },
      { value: 'slow down', status: 429, usage: { tokens: 0 } },
    ]);
  });

  it('is never asked when the work or read threw: the attempt reports its throw alone', async () => {
    let asked = 0;
    const { bound, recording } = await setup({
      usage: () => {
        asked += 1;
        return { tokens: 1 };
      },
    });
    const workThrew = await rejection(
      bound.call(
        () => {
          throw new Error('socket closed');
        },
        { read: () => 1 },
      ),
    );
    const readThrew = await rejection(
      bound.call(() => new Response('not json'), { read: (res) => res.json(), usage: () => ({ tokens: 2 }) }),
    );
    expect(workThrew.message).toBe('socket closed');
    expect(asked).toBe(0);
    expect(recording.reports).toEqual([
      { thrown: { message: 'socket closed' } },
      { thrown: { message: readThrew.message } },
    ]);
  });

  it('a hook that throws is a thrown attempt, like a throwing read, rethrown as thrown', async () => {
    const { bound, recording } = await setup();
    class MeterError extends Error {}
    const thrown = new MeterError('no usage in the body');
    const error = await rejection(
      bound.call(() => 1, {
        read: (n) => n,
        usage: () => {
          throw thrown;
        },
      }),
    );
    expect(error).toBe(thrown);
    expect(recording.reports).toEqual([{ thrown: { message: 'no usage in the body' } }]);
  });
});

describe('usage hook: bad answers', () => {
  const prefix = (layer: string) =>
    `the usage hook (${layer}) must return { [unit]: integer >= 0 }, or null to keep the reservation`;
  const refusals: [string, unknown, typeof TypeError | typeof RangeError, string][] = [
    ['a string', '12', TypeError, `${prefix('call site')} (received "12")`],
    ['a number', 12, TypeError, `${prefix('call site')} (received 12)`],
    ['false', false, TypeError, `${prefix('call site')} (received false)`],
    [
      'an array',
      [12],
      TypeError,
      `${prefix('call site')}: usage must be an object of unit costs such as { tokens: 1200 } (received an array)`,
    ],
    [
      'a Map',
      new Map([['tokens', 1]]),
      TypeError,
      `${prefix('call site')}: usage must be a plain object of unit costs such as { tokens: 1200 } (received a Map instance)`,
    ],
    [
      'a fraction',
      { tokens: 1.5 },
      RangeError,
      `${prefix('call site')}: usage.tokens must be an integer >= 0 (received 1.5)`,
    ],
    [
      'a negative amount',
      { tokens: -1 },
      RangeError,
      `${prefix('call site')}: usage.tokens must be an integer >= 0 (received -1)`,
    ],
    [
      'NaN',
      { tokens: Number.NaN },
      RangeError,
      `${prefix('call site')}: usage.tokens must be an integer >= 0 (received NaN)`,
    ],
    [
      'an unsafe integer',
      { tokens: 2 ** 53 },
      RangeError,
      `${prefix('call site')}: usage.tokens must be an integer >= 0 and at most 9007199254740991 (received 9007199254740992)`,
    ],
    [
      'a string amount',
      { tokens: '12' },
      TypeError,
      `${prefix('call site')}: usage.tokens must be a number (received "12")`,
    ],
    [
      'a null amount',
      { tokens: null },
      TypeError,
      `${prefix('call site')}: usage.tokens must be a number (received null)`,
    ],
    [
      'a key that is not a unit name',
      { 'total tokens': 12 },
      RangeError,
      `${prefix('call site')}: usage has the key "total tokens", which is not a unit name (a letter, then at most 31 letters, digits, _ or -)`,
    ],
    [
      'a key starting with a digit',
      { '1k': 1 },
      RangeError,
      `${prefix('call site')}: usage has the key "1k", which is not a unit name`,
    ],
    ['a 33-character key', { ['t'.repeat(33)]: 1 }, RangeError, 'which is not a unit name'],
    [
      'nine units',
      Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`u${i}`, 1])),
      RangeError,
      `${prefix('call site')}: usage must name at most 8 units, one per window (received 9)`,
    ],
  ];

  for (const [what, answer, Kind, message] of refusals) {
    it(`${what} is a ${Kind.name} naming the hook (and the key); the report goes without a usage`, async () => {
      const { bound, recording } = await setup();
      const error = await rejection(bound.call(() => 1, { read: (n) => n, usage: () => answer as never }));
      expect(error).toBeInstanceOf(Kind);
      expect(error.message).toContain(message);
      // Never dropped silently: the call rejects with it; the report keeps the reservation.
      expect(recording.reports).toEqual([{ value: 1 }]);
    });
  }

  it('an empty object is a usage that names no unit: it crosses, and every reservation stands', async () => {
    const { bound, recording } = await setup();
    await bound.call(() => 1, { read: (n) => n, usage: () => ({}) });
    expect(recording.reports).toEqual([{ value: 1, usage: {} }]);
  });

  it("a bad answer from the limiter's default is named as the default's", async () => {
    const { bound } = await setup({ usage: () => ({ tokens: -2 }) });
    const error = await rejection(bound.call(() => 1, { read: (n) => n }));
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe(`${prefix('limiter default')}: usage.tokens must be an integer >= 0 (received -2)`);
  });

  it('is not retried: the work ran once, its reservation stands, and the call rejects with the error', async () => {
    const { bound, recording, stub } = await setup({}, { maxRetries: 3, minDelayInMs: 0 });
    let runs = 0;
    const error = await rejection(
      bound.call(() => ++runs, { read: (n) => n, cost: { tokens: 70 }, usage: () => ({ tokens: 0.5 }) }),
    );
    expect(error).toBeInstanceOf(RangeError);
    expect(runs).toBe(1);
    expect(recording.reports).toEqual([{ value: 1 }]);
    expect((await stub.stats()).windows.find((w) => w.name === 'tpm')!.used).toBe(70);
  });
});

describe("usage at the object's boundary", () => {
  it('a report whose usage is not an object of integers >= 0 settles as a final failure naming CallReport.usage', async () => {
    const { stub } = await configured({}, 'usage-rpc');
    const bad: [unknown, string][] = [
      ['12', '"12"'],
      [{ tokens: -1 }, 'an object'],
      [{ tokens: 1.5 }, 'an object'],
      [{ tokens: '3' }, 'an object'],
      [[3], 'an array'],
    ];
    for (const [usage, received] of bad) {
      const settled = await stub.execute(async () => ({ value: 1, usage }) as never, { settles: 'data' });
      expect(settled).toMatchObject({
        ok: false,
        error: {
          id: 'call-failed',
          reason: `CallReport.usage must be an object of integers >= 0 such as { tokens: 1200 }, or null (received ${received})`,
        },
      });
    }
    // Absent or null, a usage is no usage.
    for (const report of [{ value: 1, usage: null }, { value: 1 }]) {
      expect(await stub.execute(async () => report, { settles: 'data' })).toEqual({
        'drl:wire': 5,
        ok: true,
        value: 1,
      });
    }
  });
});

describe('usage hook: the hot path', () => {
  /** How many microtask turns the callback takes to hand back its report. */
  async function turns(callSite: HookLayers['callSite'], defaults: HookLayers['defaults'] = {}): Promise<number> {
    const callback = reportingCallback(
      () => 1,
      (n) => n,
      { callSite, defaults },
      { started: false },
      abortRelay(undefined),
    );
    let done = false;
    void Promise.resolve(callback()).then(() => (done = true));
    let n = 0;
    while (!done) {
      await null;
      n += 1;
      if (n > 1000) throw new Error('the callback never settled');
    }
    return n;
  }

  it('with no usage hook in either layer (or null at the call site) the report takes no extra turn and has no usage field', async () => {
    const bare = await turns({});
    // Plain work, a plain read and no hook: the report is answered at once, not as a promise.
    expect(bare).toBe(1);
    expect(await turns({ usage: null }, { usage: () => ({ tokens: 1 }) })).toBe(bare);
    expect(await turns({ usage: undefined }, { usage: null })).toBe(bare);
    const report = await reportingCallback(
      () => 1,
      (n) => n,
      { callSite: {}, defaults: {} },
      { started: false },
      abortRelay(undefined),
    )();
    expect(report).toEqual({ value: 1 });
    expect('usage' in report).toBe(false);
  });

  it('hooks that answer plain values take no extra turn either; one that answers a promise is awaited', async () => {
    const bare = await turns({});
    const plain = { tokens: 1 };
    expect(await turns({ usage: () => plain })).toBe(bare);
    expect(await turns({}, { usage: () => plain, error: () => null, rateLimit: () => undefined })).toBe(bare);
    expect(await turns({ usage: () => Promise.resolve(plain) })).toBeGreaterThan(bare);
    // The call site's hook has no opinion in a promise: the default is asked after it settles.
    expect(await turns({ error: () => Promise.resolve(null) }, { usage: () => plain })).toBeGreaterThan(bare);
    const both = async (layers: HookLayers) =>
      await reportingCallback(
        () => ({ status: 503 }),
        () => 'v',
        layers,
        { started: false },
        abortRelay(undefined),
      )();
    const failure = { message: 'HTTP 503', retryable: true };
    const sync = await both({ callSite: { usage: () => plain }, defaults: { error: () => failure } });
    const async = await both({
      callSite: { usage: () => Promise.resolve(plain) },
      defaults: { error: () => Promise.resolve(failure) },
    });
    // The same report either way.
    expect(sync).toEqual({ value: 'v', status: 503, failure, usage: plain });
    expect(async).toEqual(sync);
  });
});

describe('usage in the real bucket', () => {
  it('settles in the real bucket: a usage below the estimate refunds, above it charges, a typo fails the call', async () => {
    const { bound, stub } = await setup();
    const tokens = async () => (await stub.stats()).windows.find((w) => w.name === 'tpm')!.used;
    await bound.call(() => completion(300), {
      read: (res) => res.json<Completion>(),
      cost: { tokens: 1_000 },
      usage: (_res, body) => ({ tokens: body.usage!.total_tokens }),
    });
    expect(await tokens()).toBe(300);
    await bound.call(() => completion(2_500), {
      read: (res) => res.json<Completion>(),
      cost: { tokens: 1_000 },
      usage: (_res, body) => ({ tokens: body.usage!.total_tokens }),
    });
    expect(await tokens()).toBe(2_800);
    const typo = await rejection(
      bound.call(() => 'x', { read: (s) => s, cost: { tokens: 10 }, usage: () => ({ tokns: 10 }) }),
    );
    expect(typo.message).toContain(
      '[drl:invalid-argument] usage names unit "tokns", which no window counts (units: requests, images, tokens)',
    );
    expect(await tokens()).toBe(2_810); // the reservation stands
  });
});
