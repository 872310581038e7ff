// Verifies exactly what crosses to the object for each kind of result: only
// a small CallReport (never the response), execute's options, and the value
// the caller gets back when the object retried.
import { describe, expect, it } from 'vitest';
import { defineLimiter, defineTestBinder } from '../../shim/client/index.ts';
import { configured, recordingNamespace, rejection } from './helpers.ts';

async function setup(retry: { maxRetries?: number; minDelayInMs?: number } = { maxRetries: 0 }) {
  const { name, stub } = await configured({ retry }, 'shapes');
  const recording = recordingNamespace();
  const bound = defineLimiter({ binder: defineTestBinder(recording.namespace), name }).for({});
  return { bound, recording, stub, name };
}

describe('report shapes', () => {
  it('a Response sends its status and what read extracted, never the response itself', async () => {
    const { bound, recording } = await setup();
    const value = await bound.call(() => Response.json({ id: 'f-1', big: 'x'.repeat(10_000) }), {
      read: async (res) => ((await res.json()) as { id: string }).id,
    });
    expect(value).toBe('f-1');
    expect(recording.reports).toEqual([{ value: 'f-1', status: 200 }]);
  });

  it('a result that is not HTTP sends only its value', async () => {
    const { bound, recording } = await setup();
    expect(await bound.call(async () => ({ rows: [1, 2, 3] }), { read: (r) => r.rows.length })).toBe(3);
    // A status that is not an integer HTTP status does not make a result HTTP.
    expect(await bound.call(() => ({ status: 'ok' }), { read: (r) => r.status })).toBe('ok');
    expect(await bound.call(() => 42, { read: (n) => n + 1 })).toBe(43);
    expect(recording.reports).toEqual([{ value: 3 }, { value: 'ok' }, { value: 43 }]);
  });

  it('a plain error status is the caller value when no hook calls it a failure', async () => {
    const { bound, recording } = await setup();
    expect(await bound.call(() => new Response('missing', { status: 404 }), { read: (res) => res.text() })).toBe(
      'missing',
    );
    expect(recording.reports).toEqual([{ value: 'missing', status: 404 }]);
  });

  it('a rateLimit answer without a usable delay sends rateLimited and status 429 alone (no upstreamStatus when the work is not HTTP)', async () => {
    const { bound, recording } = await setup({ maxRetries: 0, minDelayInMs: 0 }); // no pause between the calls
    for (const retryAfterMs of [undefined, null, -5, Number.NaN, Number.POSITIVE_INFINITY]) {
      await rejection(bound.call(() => ({ done: true }), { read: () => 'v', rateLimit: () => ({ retryAfterMs }) }));
    }
    expect(recording.reports).toEqual(
      Array.from({ length: 5 }, () => ({ value: 'v', status: 429, rateLimited: true })),
    );
  });

  it('a malformed hook answer is a thrown callback, named by its hook', async () => {
    const { bound, recording } = await setup();
    const error = await rejection(
      bound.call(() => new Response('x'), {
        read: () => 1,
        error: () => ({ message: 'no retryable flag' }) as never,
      }),
    );
    expect(error.message).toContain('the error hook must return { message: string, retryable: boolean }');
    const signal = await rejection(
      bound.call(() => new Response('x'), { read: () => 1, rateLimit: () => 'yes' as never }),
    );
    expect(signal.message).toContain('the rateLimit hook (call site) must return { retryAfterMs? }');
    // The callback reports a throw as data (so the object can tell it from a
    // caller that is gone): the message only, never the result.
    expect(recording.reports).toEqual([
      { thrown: { message: error.message } },
      { thrown: { message: signal.message } },
    ]);
  });

  it('a read that returns what RPC cannot carry (a symbol, a function) fails naming read and the value, never a bare DataCloneError', async () => {
    const { bound, recording } = await setup();
    const symbol = await rejection(bound.call(() => 1, { read: () => Symbol('token') }));
    expect(symbol).toBeInstanceOf(TypeError);
    expect(symbol.message).toBe(
      'call(fn, options): read returned a symbol, Symbol(token), which Workers RPC cannot carry to the limiter and back: ' +
        'return plain data (a string, number, boolean, null, array or plain object)',
    );
    const fn = await rejection(bound.call(() => 1, { read: () => function parse() {} }));
    expect(fn).toBeInstanceOf(TypeError);
    expect(fn.message).toContain('read returned a function (parse), which Workers RPC cannot carry');
    expect(recording.reports).toEqual([{ thrown: { message: symbol.message } }, { thrown: { message: fn.message } }]);
  });

  it('passes cost through as execute options, and always says the callback reports its throws and asks for a settled envelope', async () => {
    const { bound, recording } = await setup();
    await bound.call(() => 1, { read: (n) => n });
    await bound.call(() => 2, { read: (n) => n, cost: 3 });
    expect(recording.executes.map((e) => [e.optionsGiven, e.options])).toEqual([
      [true, { wire: 5, reportsThrows: true, settles: 'data', relaysAbort: true }],
      [true, { wire: 5, cost: 3, reportsThrows: true, settles: 'data', relaysAbort: true }],
    ]);
  });

  it('resolves with the final attempt value when the object retried, running fn and read afresh each time', async () => {
    const { bound, recording } = await setup({ maxRetries: 2, minDelayInMs: 10 });
    let calls = 0;
    const reads: number[] = [];
    const value = await bound.call(
      () => {
        calls += 1;
        return new Response(`attempt ${calls}`, { status: calls < 3 ? 503 : 200 });
      },
      {
        read: async (res) => {
          reads.push(res.status);
          return res.text();
        },
        error: (res) => (res.status >= 500 ? { message: 'unavailable', retryable: true } : null),
      },
    );
    expect(value).toBe('attempt 3');
    expect(reads).toEqual([503, 503, 200]);
    expect(recording.executes).toHaveLength(1); // the object's retries, not the client's
    expect(recording.reports).toEqual([
      { value: 'attempt 1', status: 503, failure: { message: 'unavailable', retryable: true } },
      { value: 'attempt 2', status: 503, failure: { message: 'unavailable', retryable: true } },
      { value: 'attempt 3', status: 200 },
    ]);
  });
});
