// Verifies call(fn, { signal }): an aborted signal ends a waiting call with
// signal.reason, exactly as fetch does. Already aborted: nothing is sent and
// fn never runs. Aborted while queued: the object withdraws the call, which
// takes nothing and frees its place. Aborted during the client's wait before
// a drop retry: no further attempt. Aborted while the callback runs: the
// callback's outcome stands. Without a signal the relay goes along anyway,
// so a caller gone while queued leaves the queue at once. The first part
// drives the client through scripted namespaces (what the object answers is
// set by the test); the second runs against the real object.
import { runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import {
  CallDroppedError,
  defineLimiter,
  defineTestBinder,
  type DropEvent,
  type LimiterStub,
  type NamespaceLike,
} from '../../shim/client/index.ts';
import type { CallReport, ExecuteOptions } from '../../shim/envelope.ts';
import { createFakeLimiterNamespace } from '../../shim/testing/index.ts';
import { configured, gate, recordingNamespace, rejection, testEnv, waitFor, watch } from './helpers.ts';

type Execute = (
  fn: () => Promise<CallReport> | CallReport,
  options: ExecuteOptions,
  attempt: number,
) => Promise<unknown>;

/**
 * Asks the call's abort relay, as the object does: the callback's own
 * `whenAborted` on the wire-5 form (relaysAbort), which the client always
 * sends here.
 */
function askRelay(fn: () => Promise<CallReport> | CallReport, options: ExecuteOptions): Promise<boolean> {
  expect(options.relaysAbort).toBe(true);
  expect(options.whenAborted).toBeUndefined();
  return (fn as unknown as { whenAborted(): Promise<boolean> }).whenAborted();
}

/** A namespace whose every execute runs `script` (numbered from 1); `executes` counts them. */
function scripted(script: Execute) {
  const state = { executes: 0 };
  const namespace: NamespaceLike = {
    idFromName: (name) => name,
    get: () =>
      ({
        execute: (fn, options) => script(fn, options!, ++state.executes),
      }) as LimiterStub,
  };
  return { namespace, state };
}

/** The object as a fake: runs the callback at once and settles as data. */
const fake = createFakeLimiterNamespace();
const runAtOnce: Execute = (fn, options) => fake.namespace.get(fake.namespace.idFromName('abort')).execute(fn, options);
const dropped = () => Promise.reject(new Error('Network connection lost.'));

function bound(namespace: NamespaceLike, events: DropEvent[] = [], onDrop?: (event: DropEvent) => void) {
  return defineLimiter({
    binder: defineTestBinder(namespace),
    name: 'abort',
    onDrop: (event) => {
      events.push(event);
      onDrop?.(event);
    },
  }).for({});
}

/** A signal that counts the listeners added to it and removed from it. */
function countedSignal() {
  const controller = new AbortController();
  const { signal } = controller;
  const counts = { added: 0, removed: 0 };
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  Object.assign(signal, {
    addEventListener: (...args: Parameters<typeof add>) => {
      counts.added += 1;
      return add(...args);
    },
    removeEventListener: (...args: Parameters<typeof remove>) => {
      counts.removed += 1;
      return remove(...args);
    },
  });
  return { controller, signal, counts };
}

describe('signal: what the client does', () => {
  it('an already-aborted signal rejects with exactly its reason: nothing is sent and fn never runs', async () => {
    const { namespace, state } = scripted(runAtOnce);
    const limiter = bound(namespace);
    let ran = 0;
    const work = () => (ran += 1);
    const reason = { why: 'the user left' }; // any value, as fetch allows
    expect(await rejection(limiter.call(work, { read: (n) => n, signal: AbortSignal.abort(reason) }))).toBe(reason);
    const plain = await rejection(limiter.call(work, { read: (n) => n, signal: AbortSignal.abort() }));
    expect(plain).toBeInstanceOf(DOMException);
    expect(plain.name).toBe('AbortError');
    expect(ran).toBe(0);
    expect(state.executes).toBe(0);
  });

  it('the relay answers false once the attempt has ended without an abort', async () => {
    const answers: Promise<boolean>[] = [];
    const { namespace } = scripted((fn, options) => {
      answers.push(askRelay(fn, options));
      return runAtOnce(fn, options, 1);
    });
    const controller = new AbortController();
    expect(await bound(namespace).call(() => 'done', { read: (s) => s, signal: controller.signal })).toBe('done');
    expect(answers).toHaveLength(1);
    expect(await answers[0]).toBe(false);
    controller.abort(); // later aborts reach no one: the relay is gone
  });

  it('without a signal, the relay is still there, and answers false once the attempt has ended', async () => {
    const answers: Promise<boolean>[] = [];
    const { namespace } = scripted((fn, options) => {
      answers.push(askRelay(fn, options));
      return runAtOnce(fn, options, 1);
    });
    expect(await bound(namespace).call(() => 'done', { read: (s) => s })).toBe('done');
    expect(answers).toHaveLength(1);
    expect(await answers[0]).toBe(false);
  });

  it('asking the relay runs no attempt: the work does not run, and a withdrawal after it is not a drop', async () => {
    let ran = 0;
    const { namespace, state } = scripted(async (fn, options) => {
      expect(await Promise.race([askRelay(fn, options), 'pending'])).toBe('pending');
      throw new Error('[drl:cancelled] the caller gave up before its call started');
    });
    const events: DropEvent[] = [];
    const error = await rejection(bound(namespace, events).call(() => (ran += 1), { read: (n) => n }));
    expect((error as Error).message).toBe('[drl:cancelled] the caller gave up before its call started');
    expect(ran).toBe(0);
    expect(state.executes).toBe(1);
    expect(events).toEqual([]);
  });

  it('the relay answers true when the signal aborts while the object holds the call, and its withdrawal rejects with the reason, not as a drop', async () => {
    const controller = new AbortController();
    const reason = new Error('gave up');
    let answer: boolean | undefined;
    const { namespace, state } = scripted(async (fn, options) => {
      const asked = askRelay(fn, options);
      controller.abort(reason);
      answer = await asked;
      // What the object does on `true`: withdraws the call ([drl:cancelled] stays a rejection).
      throw new Error('[drl:cancelled] the caller gave up before its call started');
    });
    const events: DropEvent[] = [];
    expect(await rejection(bound(namespace, events).call(() => 1, { read: (n) => n, signal: controller.signal }))).toBe(
      reason,
    );
    expect(answer).toBe(true);
    expect(state.executes).toBe(1);
    expect(events).toEqual([]);
  });

  it('an abort before the object asks is already in the answer', async () => {
    const controller = new AbortController();
    let answer: boolean | undefined;
    const { namespace } = scripted(async (fn, options) => {
      controller.abort('early');
      answer = await askRelay(fn, options);
      throw new Error('[drl:cancelled] withdrawn');
    });
    expect(await rejection(bound(namespace).call(() => 1, { read: (n) => n, signal: controller.signal }))).toBe(
      'early',
    );
    expect(answer).toBe(true);
  });

  it('a call the object withdrew without its signal aborting (its connection to the caller broke) ends with that verdict, not retried', async () => {
    const { namespace, state } = scripted((fn, options, attempt) =>
      attempt === 1
        ? Promise.resolve({
            'drl:wire': 5,
            ok: false,
            error: { id: 'cancelled', kind: 'Error', message: '[drl:cancelled] the caller gave up' },
          })
        : runAtOnce(fn, options, attempt),
    );
    const events: DropEvent[] = [];
    const error = await rejection(
      bound(namespace, events).call(() => 'second', { read: (s) => s, signal: new AbortController().signal }),
    );
    expect((error as Error).message).toBe('[drl:cancelled] the caller gave up');
    expect(state.executes).toBe(1);
    expect(events).toEqual([]);
  });

  it('an abort during the wait before a drop retry ends the call with the reason: no further attempt, no further onDrop', async () => {
    const controller = new AbortController();
    const { namespace, state } = scripted(dropped);
    const events: DropEvent[] = [];
    // onDrop runs just before the wait starts; the abort lands inside it (the first wait is 50-100 ms).
    const limiter = bound(namespace, events, () => setTimeout(() => controller.abort('stop waiting'), 0));
    expect(await rejection(limiter.call(() => 1, { read: (n) => n, signal: controller.signal }))).toBe('stop waiting');
    expect(state.executes).toBe(1);
    expect(events.map((e) => [e.attempt, e.willRetry])).toEqual([[1, true]]);
  });

  it('a drop that arrives after the signal aborted is not retried or reported: the caller is gone', async () => {
    const controller = new AbortController();
    const { namespace, state } = scripted(async () => {
      controller.abort('gone');
      throw new Error('Network connection lost.');
    });
    const events: DropEvent[] = [];
    expect(await rejection(bound(namespace, events).call(() => 1, { read: (n) => n, signal: controller.signal }))).toBe(
      'gone',
    );
    expect(state.executes).toBe(1);
    expect(events).toEqual([]);
  });

  it('leaves no listener on the signal, across drop retries and their waits, whether the call succeeds or is dropped for good', async () => {
    // Each attempt waits first, so the object asks its relay (which then listens).
    const queuedThen =
      (answer: Execute): Execute =>
      (fn, options, attempt) => {
        void askRelay(fn, options);
        return answer(fn, options, attempt);
      };
    const through = countedSignal();
    const { namespace } = scripted(
      queuedThen((fn, options, attempt) => (attempt <= 3 ? dropped() : runAtOnce(fn, options, attempt))),
    );
    expect(await bound(namespace).call(() => 'fourth', { read: (s) => s, signal: through.signal })).toBe('fourth');
    expect(through.counts.added).toBeGreaterThanOrEqual(4); // one per attempt (asked), and per wait before a retry
    expect(through.counts.removed).toBe(through.counts.added);

    const exhausted = countedSignal();
    const { namespace: always } = scripted(queuedThen(dropped));
    const limiter = defineLimiter({ binder: defineTestBinder(always), name: 'abort', dropRetries: 2 }).for({});
    expect(await rejection(limiter.call(() => 1, { read: (n) => n, signal: exhausted.signal }))).toBeInstanceOf(
      CallDroppedError,
    );
    expect(exhausted.counts.added).toBeGreaterThanOrEqual(3);
    expect(exhausted.counts.removed).toBe(exhausted.counts.added);
  });

  it('a call that starts without waiting never listens on its signal: its relay was never asked', async () => {
    const counted = countedSignal();
    const { namespace } = scripted(runAtOnce);
    expect(await bound(namespace).call(() => 'at once', { read: (s) => s, signal: counted.signal })).toBe('at once');
    expect(counted.counts).toEqual({ added: 0, removed: 0 });
  });
});

describe('signal: against the real object', () => {
  it('an already-aborted signal takes nothing from the bucket and sends nothing', async () => {
    const { name, stub } = await configured({}, 'abort-early');
    const recording = recordingNamespace();
    const limiter = defineLimiter({ binder: defineTestBinder(recording.namespace), name }).for({});
    let ran = 0;
    const reason = new Error('request cancelled');
    expect(await rejection(limiter.call(() => (ran += 1), { read: (n) => n, signal: AbortSignal.abort(reason) }))).toBe(
      reason,
    );
    expect(ran).toBe(0);
    expect(recording.executes).toEqual([]);
    expect((await stub.stats()).used).toBe(0);
  });

  it('a caller gone while queued, without a signal, leaves the queue at once and takes no grant', async () => {
    const { name, stub } = await configured({ concurrency: 1 }, 'gone-queued');
    const limiter = defineLimiter({
      binder: defineTestBinder(testEnv.RATE_LIMITER as unknown as NamespaceLike),
      name,
    }).for({});
    const holder = gate();
    const started: string[] = [];
    const blocker = watch(
      limiter.call(async () => (started.push('blocker'), await holder.opened, 'blocker'), { read: (s) => s }),
    );
    await waitFor(() => started.length === 1, 10_000, 'the blocker to start');
    const caller = testEnv.PARKED_CLIENT.get(testEnv.PARKED_CLIENT.idFromName(name));
    await caller.park(name, 3);
    await waitFor(async () => (await stub.stats()).queued === 3, 10_000, "the parked caller's calls to queue");

    // The caller ends: its pending relay answers reject in the object.
    await runInDurableObject(caller, (_instance, state) => state.abort('ended by the test')).catch(() => undefined);
    // The queue empties while the blocker still holds the only slot (the
    // gate opens only after this): no turn came, only the relay told.
    await waitFor(async () => (await stub.stats()).queued === 0, 10_000, 'the gone calls to leave the queue');
    expect((await stub.stats()).used).toBe(1); // the blocker's grant alone

    holder.open();
    expect(await blocker.outcome).toEqual({ ok: true, value: 'blocker' });
    const final = await stub.stats();
    expect({ used: final.used, active: final.active, queued: final.queued }).toEqual({ used: 1, active: 0, queued: 0 });
  });

  it('aborting a queued call rejects it with the reason while the slot is still held, frees its place and takes no grant', async () => {
    const { name, stub } = await configured({ concurrency: 1 }, 'abort-queued');
    const events: DropEvent[] = [];
    const limiter = defineLimiter({
      binder: defineTestBinder(testEnv.RATE_LIMITER as unknown as NamespaceLike),
      name,
      onDrop: (e) => events.push(e),
    }).for({});
    const holder = gate();
    const started: string[] = [];
    const blocker = watch(
      limiter.call(async () => (started.push('blocker'), await holder.opened, 'blocker'), { read: (s) => s }),
    );
    await waitFor(() => started.length === 1, 10_000, 'the blocker to start');

    const controller = new AbortController();
    const reason = new Error('the user navigated away');
    const cancelled = watch(
      limiter.call(() => (started.push('cancelled'), 'cancelled'), { read: (s) => s, signal: controller.signal }),
    );
    await waitFor(async () => (await stub.stats()).queued === 1, 10_000, 'the call with a signal to queue');
    const next = watch(limiter.call(() => (started.push('next'), 'next'), { read: (s) => s }));
    await waitFor(async () => (await stub.stats()).queued === 2, 10_000, 'the next call to queue behind it');

    controller.abort(reason);
    // Settles while the blocker still holds the only slot (the gate opens
    // only after this): it did not wait for a start.
    const outcome = await cancelled.outcome;
    expect(outcome.ok).toBe(false);
    expect((outcome as { error: unknown }).error).toBe(reason);
    const afterAbort = await stub.stats();
    expect(afterAbort.queued).toBe(1);
    expect(afterAbort.used).toBe(1); // the blocker's grant alone

    holder.open();
    expect(await blocker.outcome).toEqual({ ok: true, value: 'blocker' });
    expect(await next.outcome).toEqual({ ok: true, value: 'next' });
    expect(started).toEqual(['blocker', 'next']);
    const final = await stub.stats();
    expect(final.used).toBe(2);
    expect(final.queued).toBe(0);
    expect(events).toEqual([]);
  });

  it('an abort while the callback runs leaves the outcome to the callback', async () => {
    const { name } = await configured({}, 'abort-running');
    const limiter = defineLimiter({
      binder: defineTestBinder(testEnv.RATE_LIMITER as unknown as NamespaceLike),
      name,
    }).for({});
    const controller = new AbortController();
    const value = await limiter.call(
      async () => {
        controller.abort('too late');
        await new Promise((resolve) => setTimeout(resolve, 50));
        return 'finished anyway';
      },
      { read: (s) => s, signal: controller.signal },
    );
    expect(value).toBe('finished anyway');
  });

  it('a retry the object would make after an abort during the callback becomes a rejection with the reason', async () => {
    // The failure is retryable and the retry waits 5 s: whether the object
    // learns of the abort before or after the report, the call never runs again.
    const { name } = await configured({ retry: { maxRetries: 2, minDelayInMs: 5_000 } }, 'abort-retry');
    const limiter = defineLimiter({
      binder: defineTestBinder(testEnv.RATE_LIMITER as unknown as NamespaceLike),
      name,
    }).for({});
    const controller = new AbortController();
    let ran = 0;
    const error = await rejection(
      limiter.call(
        () => {
          ran += 1;
          controller.abort('no more retries');
          return new Response('down', { status: 503 });
        },
        {
          read: (res) => res.status,
          error: () => ({ message: 'upstream down', retryable: true }),
          signal: controller.signal,
        },
      ),
    );
    expect(error).toBe('no more retries');
    expect(ran).toBe(1);
  });

  it('a drop retry asks only for what is left of maxWaitMs, so drops never stretch the wait', async () => {
    const asked: (number | undefined)[] = [];
    const { namespace } = scripted(async (fn, options, attempt) => {
      asked.push(options.maxWaitMs);
      if (attempt === 1) {
        await new Promise((resolve) => setTimeout(resolve, 150));
        throw new Error('Network connection lost.');
      }
      return runAtOnce(fn, options, attempt);
    });
    expect(await bound(namespace).call(() => 'ok', { read: (s) => s, maxWaitMs: 2000 })).toBe('ok');
    expect(asked[0]).toBe(2000);
    // At least the 150 ms the first attempt took, plus the drop's backoff, is gone.
    expect(asked[1]).toBeLessThanOrEqual(2000 - 150);
    expect(asked[1]).toBeGreaterThanOrEqual(0);
  });
});
