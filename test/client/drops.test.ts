// Verifies drop retries: an attempt rejected before its callback ran is
// retried on a fresh stub up to dropRetries times, onDrop hears of every
// drop (and cannot change the outcome), and an exhausted call ends with
// CallDroppedError. Drops are injected by a namespace whose first executes
// reject without invoking the callback; later ones reach the real object.
import { runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import {
  CallDroppedError,
  DEFAULT_DROP_RETRIES,
  defineBinder,
  defineLimiter,
  defineTestBinder,
  type DropEvent,
} from '../../shim/client/index.ts';
import { bucket, configured, recordingNamespace, rejection, testEnv, waitFor } from './helpers.ts';

async function setup(
  dropFirst: number,
  definition: { dropRetries?: number; onDrop?: (event: DropEvent) => unknown } = {},
) {
  const { name, stub } = await configured({}, 'drops');
  const recording = recordingNamespace({ dropFirst });
  const events: DropEvent[] = [];
  const limiter = defineLimiter({
    binder: defineTestBinder(recording.namespace),
    name,
    ...definition,
    onDrop: (event) => {
      events.push(event);
      return definition.onDrop?.(event) as void;
    },
  });
  return { bound: limiter.for({}), limiter, recording, events, name, stub };
}

describe('drop retries', () => {
  it('looks the object up by name once per namespace, and sends every call on a fresh stub', async () => {
    const { limiter, recording, name, stub } = await setup(0);
    // Two bindings of the same namespace (as two requests make), two calls each.
    for (const bound of [limiter.for({}), limiter.for({})]) {
      for (let i = 0; i < 2; i++)
        expect(await bound.call(() => new Response('ok'), { read: (res) => res.status })).toBe(200);
    }
    expect(recording.idFromNameCalls).toEqual([name]);
    expect(new Set(recording.executes.map((e) => e.stub)).size).toBe(4);
    // Another namespace (another env's binding) gets its own lookup.
    const other = recordingNamespace();
    const bound = defineLimiter({ binder: defineTestBinder(other.namespace), name }).for({});
    await bound.call(() => new Response('ok'), { read: (res) => res.status });
    expect(other.idFromNameCalls).toEqual([name]);
    expect((await stub.stats()).used).toBe(5);
  });

  it('retries a drop on a fresh stub and resolves once an attempt gets through', async () => {
    const { bound, recording, events, name, stub } = await setup(2);
    let ran = 0;
    const value = await bound.call(
      () => {
        ran += 1;
        return new Response('through');
      },
      { read: (res) => res.text() },
    );
    expect(value).toBe('through');
    expect(ran).toBe(1);
    expect(recording.executes.map((e) => e.outcome)).toEqual(['dropped', 'dropped', 'delegated']);
    // A fresh stub for every attempt (one whose connection broke fails
    // again), from the id the limiter looked up once.
    expect(recording.idFromNameCalls).toEqual([name]);
    expect(new Set(recording.executes.map((e) => e.stub)).size).toBe(3);
    expect(events.map(({ limiter, attempt, willRetry }) => ({ limiter, attempt, willRetry }))).toEqual([
      { limiter: name, attempt: 1, willRetry: true },
      { limiter: name, attempt: 2, willRetry: true },
    ]);
    expect((events[0]!.error as Error).message).toContain('fake drop 1');
    expect((await stub.stats()).used).toBe(1); // dropped attempts never took from the bucket
  });

  it('ends with CallDroppedError when every attempt is dropped, carrying attempts, limiter and cause', async () => {
    const { bound, recording, events, name, limiter } = await setup(Infinity, { dropRetries: 2 });
    expect(limiter.dropRetries).toBe(2);
    let ran = 0;
    const error = await rejection(
      bound.call(
        () => {
          ran += 1;
          return 1;
        },
        { read: (n) => n },
      ),
    );
    expect(error).toBeInstanceOf(CallDroppedError);
    const dropped = error as CallDroppedError;
    expect(dropped.attempts).toBe(3);
    expect(dropped.limiter).toBe(name);
    expect((dropped.cause as Error).message).toContain('fake drop 3');
    expect(dropped.message).toContain('fake drop 3');
    expect(ran).toBe(0);
    expect(recording.executes).toHaveLength(3);
    expect(events.map((e) => [e.attempt, e.willRetry])).toEqual([
      [1, true],
      [2, true],
      [3, false],
    ]);
  });

  it(`retries ${DEFAULT_DROP_RETRIES} times by default (13-26 s of backoff), and not at all with dropRetries 0`, async () => {
    const byDefault = await setup(Infinity);
    const error = await rejection(byDefault.bound.call(() => 1, { read: (n) => n }));
    expect((error as CallDroppedError).attempts).toBe(DEFAULT_DROP_RETRIES + 1);
    expect(byDefault.events.map((e) => e.willRetry)).toEqual([
      ...Array<boolean>(DEFAULT_DROP_RETRIES).fill(true),
      false,
    ]);

    const never = await setup(Infinity, { dropRetries: 0 });
    const once = await rejection(never.bound.call(() => 1, { read: (n) => n }));
    expect((once as CallDroppedError).attempts).toBe(1);
    expect(never.recording.executes).toHaveLength(1);
    expect(never.events.map((e) => [e.attempt, e.willRetry])).toEqual([[1, false]]);
  });

  it('ignores an onDrop that throws or rejects: the outcome is unchanged', async () => {
    const throwing = await setup(1, {
      onDrop: () => {
        throw new Error('metrics are down');
      },
    });
    expect(await throwing.bound.call(() => 'fine', { read: (s) => s })).toBe('fine');
    expect(throwing.events).toHaveLength(1);

    const rejecting = await setup(Infinity, {
      dropRetries: 1,
      onDrop: async () => {
        throw new Error('async metrics are down');
      },
    });
    const error = await rejection(rejecting.bound.call(() => 'never', { read: (s) => s }));
    expect(error).toBeInstanceOf(CallDroppedError);
    expect(rejecting.events).toHaveLength(2);
  });

  it('spaces retries by a jittered backoff long enough to outlast an object restart', async () => {
    const { bound, events } = await setup(Infinity, { dropRetries: 3 });
    const started = Date.now();
    await rejection(bound.call(() => 1, { read: (n) => n }));
    // Equal jitter over 100, 200, 400 ms: 350 to 700 ms of waiting (a busy
    // machine only makes it longer; the upper bound leaves generous slack).
    expect(Date.now() - started).toBeGreaterThanOrEqual(350 - 5);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(events).toHaveLength(4);
  });

  it('a refusal from the object before the callback ran is not a drop: a cost above the limit is thrown at once', async () => {
    const { name } = await configured({ bucket: { limitPerWindow: 2, windowInMs: 60_000 } }, 'refusal');
    const recording = recordingNamespace();
    const events: DropEvent[] = [];
    const bound = defineLimiter({
      binder: defineTestBinder(recording.namespace),
      name,
      onDrop: (e) => events.push(e),
    }).for({});
    const error = await rejection(bound.call(() => 1, { read: (n) => n, cost: 3 }));
    expect(error.message).toContain('[drl:cost-too-large]');
    expect(error).not.toBeInstanceOf(CallDroppedError);
    expect(recording.executes).toHaveLength(1);
    expect(events).toEqual([]);
  });

  it('a real drop: a caller queued when the object is reset is retried and served once the running slot is free; the caller whose callback had started settles from its own report', async () => {
    // The fresh object keeps the holder's slot until its start + attemptTimeoutMs (its work may still run).
    const { name, stub } = await configured({ concurrency: 1, attemptTimeoutMs: 2_000 }, 'evicted');
    const events: DropEvent[] = [];
    // The real path: a binder over env.RATE_LIMITER, no fakes.
    const bound = defineLimiter({
      binder: defineBinder.unchecked('RATE_LIMITER'),
      name,
      onDrop: (e) => events.push(e),
    }).for(testEnv);

    let holderRan = 0;
    let queuedRan = 0;
    // The holder runs until released after the reset (not for a fixed time:
    // the steps before the reset may outlast it on a busy machine, and then
    // the queued caller would have started before the reset).
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const holding = settle(
      bound.call(
        async () => {
          holderRan += 1;
          await gate;
          return 'holder';
        },
        { read: (s) => s },
      ),
    );
    await waitFor(() => holderRan === 1, 10_000, 'the holder to start');
    const queued = settle(
      bound.call(
        () => {
          queuedRan += 1;
          return 'served after the reset';
        },
        { read: (s) => s },
      ),
    );
    await waitFor(async () => (await stub.stats()).queued === 1, 10_000, 'the second caller to queue');

    // Reset the object as the runtime does: memory (the queue) is lost, in-flight requests reject.
    const aborted = await rejection(
      runInDurableObject(bucket(name), (_instance, state) => {
        state.abort('reset by the test');
      }),
    );
    expect(aborted.message).toContain('reset by the test');
    release();

    const second = await queued;
    expect(second).toEqual({ ok: true, value: 'served after the reset' });
    expect(queuedRan).toBe(1);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ limiter: name, attempt: 1, willRetry: true });

    // Its callback had started, so it is never run again and never a drop:
    // the work finished in this isolate, so the call resolves with its value.
    const first = await holding;
    expect(first).toEqual({ ok: true, value: 'holder' });
    expect(holderRan).toBe(1);
    expect(events).toHaveLength(1);
  });
  it('onDrop always receives an Error: a drop that rejected with something else is wrapped, the original as its cause', async () => {
    const { name } = await configured({}, 'drops-non-error');
    const recording = recordingNamespace({
      dropFirst: 2,
      dropError: (attempt) => (attempt === 1 ? 'socket closed' : { code: 'EPIPE', message: 'pipe broke' }),
    });
    const events: DropEvent[] = [];
    const bound = defineLimiter({
      binder: defineTestBinder(recording.namespace),
      name,
      onDrop: (e) => events.push(e),
    }).for({});
    expect(await bound.call(() => 'through', { read: (s) => s })).toBe('through');
    expect(events).toHaveLength(2);
    for (const event of events) expect(event.error).toBeInstanceOf(Error);
    expect(events[0]!.error.message).toBe('the call was dropped with a rejection that is not an Error: socket closed');
    expect(events[0]!.error.cause).toBe('socket closed');
    expect(events[1]!.error.message).toContain('pipe broke');
    expect(events[1]!.error.cause).toEqual({ code: 'EPIPE', message: 'pipe broke' });
    // An Error is passed as it is.
    const { bound: plain, events: plainEvents } = await setup(1);
    await plain.call(() => 1, { read: (n) => n });
    expect(plainEvents[0]!.error.message).toBe('Network connection lost. (fake drop 1)');
  });
});

function settle<T>(promise: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: Error }> {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: Error) => ({ ok: false as const, error }),
  );
}
