// Verifies that wrong arguments at the object's RPC boundary are refused with a clear, marked error of a stable class, and that nothing is written or run.
import { runInDurableObject } from 'cloudflare:test';
import { RpcTarget } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { REGISTRY_NAME } from '../../shim/do/index.ts';
import type { CallReport, LimiterConfig } from '../../shim/envelope.ts';
import { bucket, configured, recorder, rejection, tablesOf, uniqueName } from './helpers.ts';

const CONFIG: LimiterConfig = {
  bucket: { limitPerWindow: 7, windowInMs: 60_000 },
  concurrency: 2,
  retry: { maxRetries: 3, minDelayInMs: 10 },
};

type ErrorClass = typeof TypeError | typeof RangeError | typeof Error;

/** Asserts the class that crossed RPC (not just its message) and the marker. */
function expectError(error: Error, Kind: ErrorClass, marker: string, detail: RegExp): void {
  expect(error).toBeInstanceOf(Kind);
  expect(error.name).toBe(Kind.name);
  expect(error.message).toContain(marker);
  expect(error.message).toMatch(detail);
}

async function grantRows(name: string): Promise<number> {
  return runInDurableObject(
    bucket(name),
    async (_instance, state) => state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM drl_grants`).one().n,
  );
}

/** `{ a: { a: ... leaf } }` with `levels` objects (arrays when `arrays`): the config's own nesting is 3. */
function nested(levels: number, leaf: unknown = 1, arrays = false): unknown {
  let value = leaf;
  for (let i = 0; i < levels; i += 1) value = arrays ? [value] : { a: value };
  return value;
}

describe('execute', () => {
  type Fn = () => Promise<CallReport<string>>;
  const cases: [string, (stub: ReturnType<typeof bucket>, fn: Fn) => Promise<unknown>, ErrorClass, RegExp][] = [
    [
      'a string instead of a function',
      (s) => s.execute('not a function' as never),
      TypeError,
      /fn must be a function \(received "not a function"\)/,
    ],
    [
      'a number instead of a function',
      (s) => s.execute(42 as never),
      TypeError,
      /fn must be a function \(received 42\)/,
    ],
    [
      'options that are a string',
      (s, fn) => s.execute(fn, 'x' as never),
      TypeError,
      /options must be an object \(received "x"\)/,
    ],
    [
      'options that are an array',
      (s, fn) => s.execute(fn, [1] as never),
      TypeError,
      /options must be an object \(received an array\)/,
    ],
    [
      'a string cost',
      (s, fn) => s.execute(fn, { cost: '2' } as never),
      TypeError,
      /cost must be a number or an object of unit costs such as \{ tokens: 1200 \} \(received "2"\)/,
    ],
    [
      'a fractional cost',
      (s, fn) => s.execute(fn, { cost: 1.5 }),
      RangeError,
      /cost must be an integer >= 0 \(received 1\.5\)/,
    ],
    [
      'a negative cost',
      (s, fn) => s.execute(fn, { cost: -3 }),
      RangeError,
      /cost must be an integer >= 0 \(received -3\)/,
    ],
    [
      'a NaN cost',
      (s, fn) => s.execute(fn, { cost: NaN }),
      RangeError,
      /cost must be an integer >= 0 \(received NaN\)/,
    ],
    [
      'an infinite cost',
      (s, fn) => s.execute(fn, { cost: Infinity }),
      RangeError,
      /cost must be an integer >= 0 \(received Infinity\)/,
    ],
    [
      'an unsafe cost',
      (s, fn) => s.execute(fn, { cost: 2 ** 53 }),
      RangeError,
      /cost must be an integer >= 0 and at most 9007199254740991 \(received 9007199254740992\)/,
    ],
    [
      'a cost naming no unit',
      (s, fn) => s.execute(fn, { cost: {} }),
      RangeError,
      /cost names no unit \(received \{\}\): give a number, or at least one unit such as \{ tokens: 1200 \}/,
    ],
    [
      'an unknown option',
      (s, fn) => s.execute(fn, { bogus: 1 } as never),
      TypeError,
      /unknown key "bogus" \(allowed: cost, reportsThrows, settles, priority, maxWaitMs, whenAborted, wire, maxRetries, relaysAbort\)/,
    ],
  ];

  for (const [what, call, Kind, detail] of cases) {
    it(`refuses ${what} with [drl:invalid-argument] ${Kind.name}, takes nothing and runs nothing`, async () => {
      const { name, stub } = await configured(CONFIG, 'exec-arg');
      const { fn, startedAt } = recorder({ value: 'ran', status: 200 });
      const error = await rejection(call(stub, fn));
      expectError(error, Kind, '[drl:invalid-argument]', detail);
      expect(startedAt).toEqual([]);
      const stats = await stub.stats();
      expect(stats).toMatchObject({ used: 0, remaining: 7, liveGrants: 0, queued: 0, active: 0, running: 0 });
      expect(await grantRows(name)).toBe(0);
      // The bucket is unharmed: a proper call goes through at once.
      expect(await stub.execute(fn)).toBe('ran');
      expect(startedAt).toHaveLength(1);
    });
  }

  it('refuses a cost above the limit with [drl:cost-too-large] RangeError naming both numbers, and takes nothing', async () => {
    const { name, stub } = await configured(CONFIG, 'exec-cost');
    const { fn, startedAt } = recorder({ value: 'ran' });
    const error = await rejection(stub.execute(fn, { cost: 9 }));
    expectError(error, RangeError, '[drl:cost-too-large]', /\b9(\.0)?\b/);
    expect(error.message).toMatch(/\b7\b/);
    expect(startedAt).toEqual([]);
    expect(await stub.stats()).toMatchObject({ used: 0, remaining: 7, queued: 0, active: 0 });
    expect(await grantRows(name)).toBe(0);
    // The limit itself is a legal cost.
    expect(await stub.execute(fn, { cost: 7 })).toBe('ran');
    expect((await stub.stats()).used).toBe(7);
  });

  // An RpcTarget arrives as the same RpcStub a function does (typeof 'function', same class, no own
  // keys): it cannot be refused before the take, only when invoked. One grant is kept (under-admits).
  it('refuses an RpcTarget passed as fn with [drl:invalid-argument] TypeError when invoking it, once, never retried', async () => {
    const { name, stub } = await configured(CONFIG, 'exec-target'); // maxRetries 3
    class Target extends RpcTarget {
      hello(): string {
        return 'not a callback';
      }
    }
    const error = await rejection(stub.execute(new Target() as never));
    expectError(
      error,
      TypeError,
      '[drl:invalid-argument]',
      /execute\(fn\): fn must be a function, but what was sent cannot be called/,
    );
    expect(await stub.stats()).toMatchObject({ used: 1, liveGrants: 1, active: 0, running: 0, queued: 0 });
    expect(await grantRows(name)).toBe(1);
    // The slot is released and the bucket keeps working.
    const { fn, startedAt } = recorder({ value: 'ran', status: 200 });
    expect(await stub.execute(fn)).toBe('ran');
    expect(startedAt).toHaveLength(1);
  });

  it('still retries a callback that throws a TypeError of its own', async () => {
    const { stub } = await configured(CONFIG, 'exec-typeerror');
    let runs = 0;
    const error = await rejection(
      stub.execute(async () => {
        runs += 1;
        throw new TypeError('x is not a function');
      }),
    );
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe('x is not a function');
    expect(runs).toBe(4);
  });

  it('checks its arguments before anything else, so an unconfigured bucket stays empty', async () => {
    const name = uniqueName('exec-absent');
    const error = await rejection(bucket(name).execute('nope' as never));
    expectError(error, TypeError, '[drl:invalid-argument]', /fn must be a function/);
    expect(await tablesOf(name)).toEqual([]);
  });
});

describe('configure', () => {
  const cases: [string, (name: string) => [unknown, unknown], ErrorClass, string, RegExp][] = [
    [
      'a number as the name',
      () => [123, CONFIG],
      TypeError,
      '[drl:invalid-argument]',
      /name must be a string \(received 123\)/,
    ],
    ['an empty name', () => ['', CONFIG], RangeError, '[drl:invalid-argument]', /name must not be empty/],
    [
      'a 300-character name',
      () => ['n'.repeat(300), CONFIG],
      RangeError,
      '[drl:invalid-argument]',
      /at most 256 characters \(received 300\)/,
    ],
    [
      'a name with a control character',
      (n) => [`${n}\u0001`, CONFIG],
      RangeError,
      '[drl:invalid-argument]',
      /must be printable/,
    ],
    ['a name with a newline', (n) => [`${n}\n`, CONFIG], RangeError, '[drl:invalid-argument]', /must be printable/],
    [
      'the registry name',
      () => [REGISTRY_NAME, CONFIG],
      RangeError,
      '[drl:invalid-argument]',
      /reserved for the registry/,
    ],
    // A lone surrogate would be stored as U+FFFD: the registry would list a name leading to another object.
    [
      'a lone surrogate as the name',
      () => ['\ud800', CONFIG],
      RangeError,
      '[drl:invalid-argument]',
      /must be well-formed UTF-16: it has a lone surrogate U\+D800 at index 0/,
    ],
    [
      'a name ending in a lone surrogate',
      () => ['a\ud800', CONFIG],
      RangeError,
      '[drl:invalid-argument]',
      /well-formed UTF-16: it has a lone surrogate U\+D800 at index 1/,
    ],
    [
      'a zero-width space as the name',
      () => ['\u200b', CONFIG],
      RangeError,
      '[drl:invalid-argument]',
      /must be printable: it has U\+200B \(an invisible format character\) at index 0/,
    ],
    [
      'a name with a right-to-left override',
      () => ['a\u202eb', CONFIG],
      RangeError,
      '[drl:invalid-argument]',
      /must be printable: it has U\+202E \(an invisible format character\) at index 1/,
    ],
    [
      'a name with a line separator',
      () => ['a\u2028b', CONFIG],
      RangeError,
      '[drl:invalid-argument]',
      /must be printable: it has U\+2028 \(a line separator\)/,
    ],
    [
      'a lone space as the name',
      () => [' ', CONFIG],
      RangeError,
      '[drl:invalid-argument]',
      /must not start or end with a space: it has U\+0020 at index 0/,
    ],
    [
      'a name with a leading space',
      () => [' a', CONFIG],
      RangeError,
      '[drl:invalid-argument]',
      /must not start or end with a space: it has U\+0020 at index 0/,
    ],
    [
      'a name with a trailing space',
      () => ['a ', CONFIG],
      RangeError,
      '[drl:invalid-argument]',
      /must not start or end with a space: it has U\+0020 at index 1/,
    ],
    [
      'a name starting with a no-break space',
      () => ['\u00a0a', CONFIG],
      RangeError,
      '[drl:invalid-argument]',
      /must be printable: it has U\+00A0 \(a space other than U\+0020\) at index 0/,
    ],
    [
      'a null config',
      (n) => [n, null],
      TypeError,
      '[drl:invalid-config]',
      /config must be an object \(received null\)/,
    ],
    [
      'an array config',
      (n) => [n, []],
      TypeError,
      '[drl:invalid-config]',
      /config must be an object \(received an array\)/,
    ],
    ['a string config', (n) => [n, '{"concurrency":1}'], TypeError, '[drl:invalid-config]', /config must be an object/],
    [
      'a NaN concurrency',
      (n) => [n, { ...CONFIG, concurrency: NaN }],
      TypeError,
      '[drl:invalid-config]',
      /concurrency must be a finite number \(received NaN\)/,
    ],
    [
      'an infinite window',
      (n) => [n, { ...CONFIG, bucket: { limitPerWindow: 1, windowInMs: Infinity } }],
      TypeError,
      '[drl:invalid-config]',
      /bucket\.windowInMs must be a finite number/,
    ],
    [
      'a function in the config',
      (n) => [n, { ...CONFIG, retry: { factor: () => 2 } }],
      TypeError,
      '[drl:invalid-config]',
      /retry\.factor must be JSON data \(received a function\)/,
    ],
    [
      'a Date in the config',
      (n) => [n, { ...CONFIG, bucket: { limitPerWindow: 1, windowInMs: new Date(60_000) } }],
      TypeError,
      '[drl:invalid-config]',
      /bucket\.windowInMs must be a plain object/,
    ],
    [
      'an out-of-range limit',
      (n) => [n, { ...CONFIG, bucket: { limitPerWindow: 0, windowInMs: 1000 } }],
      RangeError,
      '[drl:invalid-config]',
      /bucket\.limitPerWindow.*received 0/,
    ],
    // Walked, serialised or parsed recursively, a deep document overflowed the stack, unmarked. About
    // 2,000 levels is the deepest workerd's RPC serialiser carries (deeper fails in the caller).
    [
      'a config nested 2,000 levels deep',
      (n) => [n, { ...CONFIG, retry: nested(2000) }],
      TypeError,
      '[drl:invalid-config]',
      /config is nested too deeply \(more than 32 levels\): retry(\.a){31} is level 33/,
    ],
    [
      'a config nested 33 levels deep',
      (n) => [n, { ...CONFIG, retry: nested(32) }],
      TypeError,
      '[drl:invalid-config]',
      /config is nested too deeply \(more than 32 levels\): retry(\.a){31} is level 33/,
    ],
    [
      'arrays nested 2,000 levels deep',
      (n) => [n, { ...CONFIG, retry: nested(2000, 1, true) }],
      TypeError,
      '[drl:invalid-config]',
      /config is nested too deeply \(more than 32 levels\): retry(\[0\]){31} is level 33/,
    ],
    [
      'a config that contains itself',
      (n) => {
        const cyclic: Record<string, unknown> = { ...CONFIG };
        cyclic.retry = cyclic;
        return [n, cyclic];
      },
      TypeError,
      '[drl:invalid-config]',
      /config is nested too deeply \(more than 32 levels\): (retry\.){31}bucket is level 33/,
    ],
  ];

  for (const [what, args, Kind, marker, detail] of cases) {
    it(`refuses ${what} with ${marker} ${Kind.name} and writes nothing`, async () => {
      const name = uniqueName('conf-arg');
      const [givenName, config] = args(name);
      const error = await rejection(bucket(name).configure(givenName as never, config as never));
      expectError(error, Kind, marker, detail);
      // The offending character is shown as its code point, never raw.
      expect(error.message).not.toMatch(/[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Zl}\p{Zp}\u00a0]/u);
      expect((await tablesOf(name)).filter((t) => t.startsWith('drl_'))).toEqual([]);
      const listed = await bucket(name).listNames();
      expect(listed).not.toContain(name);
      expect(listed).not.toContain(givenName);
      const stats = await rejection(bucket(name).stats());
      expect(stats.message).toContain('[drl:no-such-limiter]');
    });
  }

  it('accepts a name of exactly 256 printable characters', async () => {
    const name = `${uniqueName('long')}-`.padEnd(256, 'é');
    expect(name).toHaveLength(256);
    const stats = await bucket(name).configure(name, CONFIG);
    expect(stats.name).toBe(name);
    expect(await bucket(name).listNames()).toContain(name);
  });

  for (const good of ['a b', 'café', '日本語', 'emoji 🚦']) {
    it(`accepts the name ${JSON.stringify(good)} end to end: configure, execute, stats and listNames give back the same string`, async () => {
      const stub = bucket(good);
      expect((await stub.configure(good, CONFIG)).name).toBe(good);
      expect(await stub.execute(async () => ({ value: good, status: 200 }))).toBe(good);
      expect((await stub.stats()).name).toBe(good);
      expect((await bucket(uniqueName('other')).listNames()).filter((listed) => listed === good)).toEqual([good]);
    });
  }

  it('leaves a live bucket exactly as it was when a new config is refused', async () => {
    const { name, stub } = await configured(CONFIG, 'conf-live');
    await stub.execute(async () => ({ value: 1 }), { cost: 2 });
    const before = await stub.stats();
    for (const bad of [
      null,
      [],
      { ...CONFIG, concurrency: NaN },
      { ...CONFIG, retry: { factor: () => 2 } },
      { ...CONFIG, concurrency: 0 },
    ]) {
      await rejection(stub.configure(name, bad as never));
    }
    const after = await stub.stats();
    expect(after.config).toEqual(before.config);
    expect(after.used).toBe(2);
    expect(await grantRows(name)).toBe(1);
  });
});

describe('reconfigure', () => {
  for (const [what, patch] of [
    ['a string', 'x'],
    ['null', null],
    ['an array', [{ concurrency: 1 }]],
  ] as const) {
    it(`refuses ${what} as the patch with [drl:invalid-config] TypeError and changes nothing`, async () => {
      const { stub } = await configured(CONFIG, 'reconf');
      const error = await rejection(stub.reconfigure(patch as never));
      expectError(error, TypeError, '[drl:invalid-config]', /patch must be an object/);
      expect((await stub.stats()).config).toEqual(CONFIG);
    });
  }

  it('refuses a patch nested too deeply with [drl:invalid-config] TypeError naming where, and changes nothing', async () => {
    const { stub } = await configured(CONFIG, 'reconf-deep');
    for (const patch of [{ retry: nested(2000) }, { bucket: nested(32) }]) {
      const error = await rejection(stub.reconfigure(patch as never));
      expectError(
        error,
        TypeError,
        '[drl:invalid-config]',
        /patch is nested too deeply \(more than 32 levels\): (retry|bucket)(\.a){31} is level 33/,
      );
    }
    expect((await stub.stats()).config).toEqual(CONFIG);
  });

  it('leaves a document exactly 32 levels deep to the engine, which names the unknown key', async () => {
    const { stub } = await configured(CONFIG, 'reconf-32');
    const error = await rejection(stub.reconfigure({ retry: nested(31) } as never));
    expect(error.message).toContain('[drl:invalid-config]');
    expect(error.message).not.toContain('nested');
    expect(error.message).toMatch(/\ba\b/);
    expect((await stub.stats()).config).toEqual(CONFIG);
  });

  it('refuses a patch holding a function, naming its path', async () => {
    const { stub } = await configured(CONFIG, 'reconf-fn');
    const error = await rejection(stub.reconfigure({ retry: { maxRetries: (() => 1) as never } }));
    expectError(error, TypeError, '[drl:invalid-config]', /retry\.maxRetries must be JSON data/);
    expect((await stub.stats()).config).toEqual(CONFIG);
  });
});

describe('pause', () => {
  const cases: [string, unknown, ErrorClass, RegExp][] = [
    // One rule, one wording: the object checks the type, the engine the range.
    [
      'a string',
      '10',
      TypeError,
      /pause ms must be a finite number, an integer between 0 and 31622400000 \(received "10"\)$/,
    ],
    ['a negative number', -1, RangeError, /pause ms must be an integer between 0 and 31622400000 \(received -1\)$/],
    ['a fraction', 1.5, RangeError, /pause ms must be an integer between 0 and 31622400000 \(received 1\.5\)$/],
    ['NaN', NaN, TypeError, /pause ms must be a finite number, an integer between 0 and 31622400000 \(received NaN\)$/],
    ['nothing', undefined, TypeError, /pause ms must be a finite number, .* \(received undefined\)$/],
  ];
  for (const [what, ms, Kind, detail] of cases) {
    it(`refuses ${what} with [drl:invalid-argument] ${Kind.name} and does not pause`, async () => {
      const { name, stub } = await configured(CONFIG, 'pause');
      const error = await rejection(stub.pause(ms as never));
      expectError(error, Kind, '[drl:invalid-argument]', detail);
      const stats = await stub.stats();
      expect(stats).toMatchObject({ penalised: false, forcedUntil: null, remaining: 7 });
      const penalty = await runInDurableObject(bucket(name), async (_instance, state) =>
        state.storage.sql.exec(`SELECT value FROM drl_meta WHERE key = 'penalty'`).toArray(),
      );
      expect(penalty).toEqual([]);
    });
  }
});

describe('finished(slot, ranMs) at the RPC boundary', () => {
  const cases: [string, unknown, unknown, ErrorClass, RegExp][] = [
    [
      'a slot that is not a string',
      42,
      10,
      TypeError,
      /slot must be the slot its callback was handed at the start \(readAttemptStart\(start\)\.slot; received 42\)$/,
    ],
    ['no slot', undefined, 10, TypeError, /slot must be the slot its callback was handed .*received undefined\)$/],
    ['ranMs that is not a number', '7.1.2.3.ab', '10', TypeError, /ranMs/],
  ];
  for (const [what, slot, ranMs, Kind, detail] of cases) {
    it(`refuses ${what} with [drl:invalid-argument] ${Kind.name} and frees nothing`, async () => {
      const { stub } = await configured(CONFIG, 'finished');
      const error = await rejection(stub.finished(slot as never, ranMs as never));
      expectError(error, Kind, '[drl:invalid-argument]', detail);
      expect(await stub.stats()).toMatchObject({ remaining: 7, restoredSlots: 0 });
    });
  }
});

describe('a callback returning a malformed report', () => {
  const cases: [string, unknown, RegExp][] = [
    ['a non-numeric status', { status: 'x' }, /CallReport\.status must be an integer HTTP status \(received "x"\)/],
    ['a number', 5, /must return a CallReport object \(received 5\)/],
    [
      'a string failure',
      { failure: 'boom' },
      /CallReport\.failure must be \{ message: string, retryable: boolean \} \(received "boom"\)/,
    ],
    ['a failure without retryable', { status: 500, failure: { message: 'boom' } }, /CallReport\.failure/],
    ['a numeric retryAfter', { status: 429, retryAfter: 5 }, /CallReport\.retryAfter must be a string \(received 5\)/],
    ['nothing', undefined, /must return a CallReport object/],
  ];
  for (const [what, bad, detail] of cases) {
    it(`rejects the call when the report is ${what}, naming the field, after exactly one run`, async () => {
      const { stub } = await configured(CONFIG, 'report');
      let runs = 0;
      const error = await rejection(
        stub.execute(async () => {
          runs += 1;
          return bad as never;
        }),
      );
      expect(error.message).toContain('[drl:call-failed]');
      expect(error.message).toMatch(detail);
      expect(runs).toBe(1); // maxRetries is 3: a malformed report is final, not retried
      // The slot is released and the bucket keeps working.
      expect(await stub.stats()).toMatchObject({ active: 0, running: 0, queued: 0 });
      expect(await stub.execute(async () => ({ value: 'next', status: 200 }))).toBe('next');
    });
  }
});
