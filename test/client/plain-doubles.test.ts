// Verifies that a hand-written test double works with the client: a
// namespace whose execute runs the callback and returns what it resolved to
// (or returns a value of its own) needs nothing from the wire protocol. And
// that a user value is never taken for the object's verdict, whatever it
// looks like: through a double, the test fake and the real object.
import { describe, expect, it } from 'vitest';
import {
  CallFailedError,
  defineBinder,
  defineLimiter,
  defineTestBinder,
  type NamespaceLike,
} from '../../shim/client/index.ts';
import { createFakeLimiterNamespace } from '../../shim/testing/index.ts';
import { configured, rejection, testEnv } from './helpers.ts';

function bound(namespace: NamespaceLike, name = 'example-api') {
  return defineLimiter({ binder: defineTestBinder(namespace), name }).for({});
}

/** The smallest natural double, in a few spellings people write. */
const shapes: [string, () => NamespaceLike][] = [
  [
    'an async arrow returning fn()',
    () => ({ idFromName: (name) => name, get: () => ({ execute: async (fn) => fn() }) }),
  ],
  ['a plain arrow returning fn()', () => ({ idFromName: (name) => name, get: () => ({ execute: (fn) => fn() }) })],
  [
    'an async function awaiting fn()',
    () => ({
      idFromName: (name) => name,
      get: () => ({
        async execute(fn) {
          const result = await fn();
          return result;
        },
      }),
    }),
  ],
  [
    'a class',
    () => {
      class Stub {
        async execute(fn: () => unknown) {
          return fn();
        }
      }
      class Namespace {
        idFromName(name: string) {
          return { name };
        }
        get() {
          return new Stub();
        }
      }
      return new Namespace();
    },
  ],
];

describe('plain test doubles', () => {
  for (const [label, make] of shapes) {
    it(`${label}: the call resolves with read's value, runs the work once and returns the work's own exception`, async () => {
      const limiter = bound(make());
      let runs = 0;
      const body = { id: 7, tags: ['a'] };
      expect(
        await limiter.call(
          () => {
            runs += 1;
            return Response.json(body);
          },
          { read: (res) => res.json() },
        ),
      ).toEqual(body);
      expect(runs).toBe(1);
      const boom = new Error('upstream unreachable');
      expect(
        await rejection(
          limiter.call(
            () => {
              throw boom;
            },
            { read: (s) => s },
          ),
        ),
      ).toBe(boom);
    });
  }

  it('a recording double sees the options the client sends and still serves the call', async () => {
    const seen: unknown[] = [];
    const limiter = bound({
      idFromName: (name) => name,
      get: () => ({
        execute: async (fn, options) => {
          seen.push(options);
          return fn();
        },
      }),
    });
    expect(await limiter.call(() => 'ok', { read: (s) => s, cost: 2, priority: 1 })).toBe('ok');
    expect(seen).toEqual([{ wire: 5, settles: 'data', reportsThrows: true, relaysAbort: true, cost: 2, priority: 1 }]);
  });

  it("a double's failure and 429 become what the object settles a final attempt with", async () => {
    const limiter = bound({ idFromName: (name) => name, get: () => ({ execute: async (fn) => fn() }) });
    const failed = await rejection(
      limiter.call(() => new Response('nope', { status: 503 }), {
        read: (res) => res.text(),
        error: (res) => (res.ok ? null : { message: `HTTP ${res.status}`, retryable: true }),
      }),
    );
    expect(failed).toBeInstanceOf(CallFailedError);
    expect(failed).toMatchObject({ status: 503, reason: 'HTTP 503' });
    const limited = await rejection(
      limiter.call(() => new Response('slow down', { status: 429 }), { read: (res) => res.text() }),
    );
    expect(limited).toMatchObject({ name: 'CallFailedError', status: 429 });
  });

  it('a double that answers a value of its own (the callback never ran) resolves with that value', async () => {
    for (const canned of [42, 'cached', null, { ok: false, error: 'looks like a verdict' }, { value: 1 }]) {
      const limiter = bound({ idFromName: (name) => name, get: () => ({ execute: async () => canned }) });
      let ran = false;
      const value = await limiter.call(
        () => {
          ran = true;
          return 'fresh';
        },
        { read: (s) => s },
      );
      expect(value).toEqual(canned);
      expect(ran).toBe(false);
    }
  });

  it('a double that throws is a drop: retried, then CallDroppedError with its error as the cause', async () => {
    let executes = 0;
    const limiter = defineLimiter({
      binder: defineTestBinder({
        idFromName: (name) => name,
        get: () => ({
          execute: async () => {
            executes += 1;
            throw new Error('no such object');
          },
        }),
      }),
      name: 'dropping',
      dropRetries: 1,
    }).for({});
    const error = await rejection(limiter.call(() => 1, { read: (n) => n }));
    expect(error).toMatchObject({ name: 'CallDroppedError', attempts: 2 });
    expect((error as Error).cause).toMatchObject({ message: 'no such object' });
    expect(executes).toBe(2);
  });
});

describe('a user value that looks like a verdict passes through unchanged', () => {
  const lookalikes: unknown[] = [
    { ok: false, error: { id: 'call-failed', kind: 'Error', message: '[drl:call-failed] not mine (status 500)' } },
    { ok: true, value: 'nested' },
    { 'drl:wire': 5, ok: false, error: { id: 'no-such-limiter', kind: 'Error', message: '[drl:no-such-limiter] x' } },
    { 'drl:wire': 'not a number' },
  ];

  it('through a plain double', async () => {
    const limiter = bound({ idFromName: (name) => name, get: () => ({ execute: async (fn) => fn() }) });
    for (const value of lookalikes) expect(await limiter.call(() => value, { read: (v) => v })).toEqual(value);
  });

  it('through the test fake', async () => {
    const fake = createFakeLimiterNamespace();
    const limiter = bound(fake.namespace);
    for (const value of lookalikes) expect(await limiter.call(() => value, { read: (v) => v })).toEqual(value);
  });

  it('through the real object, which wraps only a value carrying the brand', async () => {
    const { name, stub } = await configured();
    const limiter = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name }).for(testEnv);
    for (const value of lookalikes) expect(await limiter.call(() => value, { read: (v) => v })).toEqual(value);
    // On the wire-5 form a success is the value itself; a value with the brand travels wrapped.
    expect(await stub.execute(async () => ({ value: { ok: false } }), { wire: 5, settles: 'data' })).toEqual({
      ok: false,
    });
    expect(await stub.execute(async () => ({ value: lookalikes[2] }), { wire: 5, settles: 'data' })).toEqual({
      'drl:wire': 5,
      ok: true,
      value: lookalikes[2],
    });
  });
});
