// Verifies the waiting options at the client's boundary: maxWaitMs,
// priority and signal are checked before anything is sent (the error names
// the option and what it held), the limiter's defaults fill in what a call
// leaves out (a call-site null removes the maxWaitMs default), only what is
// set is sent, and whenAborted goes along with every call, signal or not.
// The fake namespace records the options and honours maxWaitMs against the
// wait it pretends.
import { describe, expect, it } from 'vitest';
import {
  DeadlineError,
  defineBinder,
  defineLimiter,
  defineTestBinder,
  type LimiterDefinition,
  type NamespaceLike,
} from '../../shim/client/index.ts';
import type { ExecuteOptions } from '../../shim/envelope.ts';
import { createFakeLimiterNamespace } from '../../shim/testing/index.ts';
import { recordingNamespace, rejection } from './helpers.ts';

/** A namespace over the fake that keeps the options of every execute. */
function capturing(fake = createFakeLimiterNamespace()) {
  const sent: ExecuteOptions[] = [];
  const callbacks: unknown[] = [];
  const namespace: NamespaceLike = {
    idFromName: (name) => fake.namespace.idFromName(name),
    get: (id) => ({
      execute: (fn, options) => {
        sent.push(options!);
        callbacks.push(fn);
        return fake.namespace.get(id as { name: string }).execute(fn, options);
      },
    }),
  };
  return { fake, sent, callbacks, namespace };
}

function limiter(namespace: NamespaceLike, definition: Partial<LimiterDefinition<object>> = {}) {
  return defineLimiter({ binder: defineTestBinder(namespace), name: 'waiting', ...definition }).for({});
}

function definitionError(definition: Record<string, unknown>): Error {
  try {
    defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name: 'defaults', ...definition } as never);
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected defineLimiter to throw');
}

describe('waiting options at the call boundary', () => {
  it('refuses a malformed maxWaitMs, priority or signal before sending anything, naming the option', async () => {
    const recording = recordingNamespace();
    const bound = limiter(recording.namespace);
    const refusals: [Record<string, unknown>, ErrorConstructor, string][] = [
      [
        { maxWaitMs: -1 },
        RangeError,
        'call(fn, options): options.maxWaitMs must be an integer between 0 and 31622400000 (received -1)',
      ],
      [{ maxWaitMs: 1.5 }, RangeError, 'options.maxWaitMs must be an integer between 0 and 31622400000 (received 1.5)'],
      [
        { maxWaitMs: Number.NaN },
        TypeError,
        'options.maxWaitMs must be a finite number, an integer between 0 and 31622400000, or left out to wait as long as needed (received NaN)',
      ],
      [{ maxWaitMs: 31_622_400_001 }, RangeError, '(received 31622400001)'],
      [
        { maxWaitMs: '2000' },
        TypeError,
        'options.maxWaitMs must be a finite number, an integer between 0 and 31622400000, or left out to wait as long as needed (received "2000")',
      ],
      [
        { priority: 1001 },
        RangeError,
        'call(fn, options): options.priority must be an integer between -1000 and 1000 (received 1001)',
      ],
      [{ priority: -1001 }, RangeError, '(received -1001)'],
      [{ priority: 0.5 }, RangeError, '(received 0.5)'],
      [
        { priority: Infinity },
        TypeError,
        'options.priority must be a finite number, an integer between -1000 and 1000 (received Infinity)',
      ],
      [
        { priority: 'high' },
        TypeError,
        'options.priority must be a finite number, an integer between -1000 and 1000 (received "high")',
      ],
      [
        { priority: null },
        TypeError,
        'options.priority must be a finite number, an integer between -1000 and 1000 (received null)',
      ],
      [
        { signal: new AbortController() },
        TypeError,
        'call(fn, options): options.signal must be an AbortSignal, e.g. request.signal or AbortSignal.timeout(ms) (received an object)',
      ],
      [{ signal: null }, TypeError, 'options.signal must be an AbortSignal'],
      [{ signal: true }, TypeError, '(received true)'],
    ];
    for (const [options, Kind, message] of refusals) {
      const error = await rejection(bound.call(() => 1, { read: (n) => n, ...options }));
      expect({ options, kind: error.constructor.name, message: error.message }).toEqual({
        options,
        kind: Kind.name,
        message: expect.stringContaining(message),
      });
    }
    expect(recording.executes).toEqual([]);
  });

  it('accepts the bounds: maxWaitMs 0 and 366 days, priority -1000 and 1000', async () => {
    const { sent, namespace } = capturing();
    const bound = limiter(namespace);
    for (const options of [{ maxWaitMs: 0 }, { maxWaitMs: 31_622_400_000 }, { priority: -1000 }, { priority: 1000 }]) {
      expect(await bound.call(() => 'ok', { read: (s) => s, ...options })).toBe('ok');
    }
    expect(sent.map(({ maxWaitMs, priority }) => ({ maxWaitMs, priority }))).toEqual([
      { maxWaitMs: 0, priority: undefined },
      { maxWaitMs: 31_622_400_000, priority: undefined },
      { maxWaitMs: undefined, priority: -1000 },
      { maxWaitMs: undefined, priority: 1000 },
    ]);
  });

  it('sends priority and maxWaitMs only when set, and the abort relay with every call, signal or not', async () => {
    const { sent, callbacks, namespace } = capturing();
    const bound = limiter(namespace);
    await bound.call(() => 1, { read: (n) => n });
    await bound.call(() => 1, { read: (n) => n, priority: 0, maxWaitMs: 0 });
    await bound.call(() => 1, { read: (n) => n, signal: new AbortController().signal, cost: 2 });
    // The wire version first (a wire-4 object names the first key it does not know), then only what is set.
    expect(sent[0]).toStrictEqual({ wire: 5, reportsThrows: true, settles: 'data', relaysAbort: true });
    expect(Object.keys(sent[0]!)[0]).toBe('wire');
    expect(sent[1]).toStrictEqual({
      wire: 5,
      reportsThrows: true,
      settles: 'data',
      relaysAbort: true,
      priority: 0,
      maxWaitMs: 0,
    });
    expect(Object.keys(sent[2]!).sort()).toEqual(['cost', 'relaysAbort', 'reportsThrows', 'settles', 'wire']);
    // The relay travels on the callback (relaysAbort), one per attempt.
    expect(callbacks.map((fn) => typeof (fn as { whenAborted?: unknown }).whenAborted)).toEqual([
      'function',
      'function',
      'function',
    ]);
  });

  it("fills in the limiter's defaults; a call site's value replaces them, and its maxWaitMs: null removes the default", async () => {
    const { sent, namespace } = capturing();
    const bound = limiter(namespace, { maxWaitMs: 2000, priority: -5 });
    await bound.call(() => 1, { read: (n) => n });
    await bound.call(() => 1, { read: (n) => n, maxWaitMs: 0, priority: 7 });
    await bound.call(() => 1, { read: (n) => n, maxWaitMs: null });
    expect(sent.map(({ maxWaitMs, priority }) => ({ maxWaitMs, priority }))).toEqual([
      { maxWaitMs: 2000, priority: -5 },
      { maxWaitMs: 0, priority: 7 },
      { maxWaitMs: undefined, priority: -5 },
    ]);
    expect('maxWaitMs' in sent[2]!).toBe(false);
  });

  it('defineLimiter refuses malformed defaults, naming the field', () => {
    expect(definitionError({ maxWaitMs: -1 })).toBeInstanceOf(RangeError);
    expect(definitionError({ maxWaitMs: -1 }).message).toBe(
      'defineLimiter: maxWaitMs must be an integer between 0 and 31622400000 (received -1)',
    );
    expect(definitionError({ maxWaitMs: null })).toBeInstanceOf(TypeError);
    expect(definitionError({ maxWaitMs: null }).message).toBe(
      'defineLimiter: maxWaitMs must be a finite number, an integer between 0 and 31622400000, or left out to wait as long as needed (received null)',
    );
    expect(definitionError({ priority: 2.5 })).toBeInstanceOf(RangeError);
    expect(definitionError({ priority: 2.5 }).message).toBe(
      'defineLimiter: priority must be an integer between -1000 and 1000 (received 2.5)',
    );
    expect(definitionError({ priority: '1' })).toBeInstanceOf(TypeError);
    expect(definitionError({ priority: '1' }).message).toContain('defineLimiter: priority must be a finite number');
    expect(definitionError({ maxWait: 5 }).message).toContain('unknown key "maxWait"');
    expect(() =>
      defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name: 'ok', maxWaitMs: 0, priority: -1000 }),
    ).not.toThrow();
  });
});

describe('the fake namespace and the waiting options', () => {
  it('records priority and maxWaitMs as sent, undefined when none was', async () => {
    const fake = createFakeLimiterNamespace();
    const bound = limiter(fake.namespace, { priority: 3 });
    await bound.call(() => 'a', { read: (s) => s });
    await bound.call(() => 'b', { read: (s) => s, priority: -1, maxWaitMs: 500 });
    const plain = limiter(fake.namespace);
    await plain.call(() => 'c', { read: (s) => s });
    expect(fake.calls.map(({ priority, maxWaitMs }) => ({ priority, maxWaitMs }))).toEqual([
      { priority: 3, maxWaitMs: undefined },
      { priority: -1, maxWaitMs: 500 },
      { priority: undefined, maxWaitMs: undefined },
    ]);
  });

  it('runs maxWaitMs: 0 at once: by default the fake pretends no wait', async () => {
    const fake = createFakeLimiterNamespace();
    expect(await limiter(fake.namespace).call(() => 'now', { read: (s) => s, maxWaitMs: 0 })).toBe('now');
    expect(fake.calls).toHaveLength(1);
  });

  it('with waitMs, refuses a call whose maxWaitMs is shorter with DeadlineError (retryAfterMs = waitMs), without running or recording it', async () => {
    const fake = createFakeLimiterNamespace({ waitMs: 1500 });
    const drops: unknown[] = [];
    const bound = limiter(fake.namespace, { onDrop: (event) => drops.push(event) });
    let ran = 0;
    const work = () => {
      ran += 1;
      return 'ran';
    };
    const error = await rejection(bound.call(work, { read: (s) => s, maxWaitMs: 1499 }));
    expect(error).toBeInstanceOf(DeadlineError);
    expect((error as DeadlineError).retryAfterMs).toBe(1500);
    expect((error as DeadlineError).limiter).toBe('waiting');
    expect(error.message).toContain('[drl:deadline-exceeded]');
    expect(ran).toBe(0);
    expect(fake.calls).toEqual([]);
    expect(drops).toEqual([]);
    // A maxWaitMs that covers the wait, or none at all, runs.
    expect(await bound.call(work, { read: (s) => s, maxWaitMs: 1500 })).toBe('ran');
    expect(await bound.call(work, { read: (s) => s })).toBe('ran');
    expect(fake.calls.map((c) => c.maxWaitMs)).toEqual([1500, undefined]);
  });

  it('refuses a deadline as the object does on a raw stub: as data, or as a rejection whose message carries the wait', async () => {
    const fake = createFakeLimiterNamespace({ waitMs: 20 });
    const stub = fake.namespace.get(fake.namespace.idFromName('raw'));
    await expect(stub.execute(async () => ({ value: 1 }), { maxWaitMs: 10, settles: 'data' })).resolves.toEqual({
      'drl:wire': 5,
      ok: false,
      error: {
        id: 'deadline-exceeded',
        kind: 'Error',
        message:
          '[drl:deadline-exceeded] the call would wait 20 ms to start, more than its maxWaitMs of 10 ms (retry after 20 ms)',
        retryAfterMs: 20,
      },
    });
    await expect(stub.execute(async () => ({ value: 1 }), { maxWaitMs: 0 })).rejects.toThrow(
      /^\[drl:deadline-exceeded\] .*\(retry after 20 ms\)$/,
    );
  });

  it('refuses malformed waiting options on a raw stub as [drl:invalid-argument], and a malformed waitMs when created', async () => {
    const fake = createFakeLimiterNamespace();
    const stub = fake.namespace.get(fake.namespace.idFromName('raw'));
    await expect(stub.execute(async () => ({ value: 1 }), { priority: 1.5 })).rejects.toThrow(
      '[drl:invalid-argument] priority must be an integer between -1000 and 1000 (received 1.5)',
    );
    await expect(stub.execute(async () => ({ value: 1 }), { maxWaitMs: -2 })).rejects.toThrow(
      '[drl:invalid-argument] maxWaitMs must be an integer between 0 and 31622400000 (received -2)',
    );
    expect(fake.calls).toEqual([]);
    expect(() => createFakeLimiterNamespace({ waitMs: -1 })).toThrow(
      'createFakeLimiterNamespace(options): options.waitMs must be an integer >= 0, in ms (received -1)',
    );
    expect(() => createFakeLimiterNamespace({ waitMs: '5' as never })).toThrow(TypeError);
  });
});
