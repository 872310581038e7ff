// Verifies maxWaitMs: a call the bucket cannot start in time ends with
// DeadlineError (limiter, retryAfterMs), whether refused when it arrives or
// removed from the queue at its deadline; its fn never ran, nothing was
// taken, and it is never a drop (no retry, no onDrop). maxWaitMs: 0 on a
// bucket with room starts at once. The first part checks how the client
// rebuilds the error from each form the object can answer with; the second
// runs against the real object.
import { describe, expect, it } from 'vitest';
import {
  DeadlineError,
  defineLimiter,
  defineTestBinder,
  type DropEvent,
  type LimiterStub,
  type NamespaceLike,
} from '../../shim/client/index.ts';
import { configured, gate, rejection, testEnv, waitFor, watch } from './helpers.ts';

/** A namespace whose every execute answers with `answer()`. */
function answering(answer: () => Promise<unknown>) {
  const state = { executes: 0 };
  const namespace: NamespaceLike = {
    idFromName: (name) => name,
    get: () => ({ execute: () => (state.executes++, answer()) }) as LimiterStub,
  };
  return { namespace, state };
}

describe('DeadlineError: how the client rebuilds it', () => {
  it('from a verdict settled as data, with its retryAfterMs; not a drop', async () => {
    const { namespace, state } = answering(async () => ({
      'drl:wire': 5,
      ok: false,
      error: {
        id: 'deadline-exceeded',
        kind: 'Error',
        message: '[drl:deadline-exceeded] predicted start too late (retry after 1234 ms)',
        retryAfterMs: 1234,
      },
    }));
    const events: DropEvent[] = [];
    const limiter = defineLimiter({
      binder: defineTestBinder(namespace),
      name: 'deadline-data',
      onDrop: (e) => events.push(e),
    }).for({});
    const error = await rejection(limiter.call(() => 1, { read: (n) => n, maxWaitMs: 100 }));
    expect(error).toBeInstanceOf(DeadlineError);
    const deadline = error as DeadlineError;
    expect(deadline.name).toBe('DeadlineError');
    expect(deadline.limiter).toBe('deadline-data');
    expect(deadline.retryAfterMs).toBe(1234);
    expect(deadline.message).toBe(
      '[drl:deadline-exceeded] limiter "deadline-data": the call could not start within its maxWaitMs, so it was not run and nothing was taken (retry after 1234 ms)',
    );
    expect(state.executes).toBe(1);
    expect(events).toEqual([]);
  });

  it('from a rejection (an RPC error keeps only its message), reading retryAfterMs from the message', async () => {
    const { namespace, state } = answering(() =>
      Promise.reject(new Error('Error: [drl:deadline-exceeded] the deadline passed in the queue (retry after 0 ms)')),
    );
    const events: DropEvent[] = [];
    const limiter = defineLimiter({
      binder: defineTestBinder(namespace),
      name: 'deadline-rejected',
      onDrop: (e) => events.push(e),
    }).for({});
    const error = await rejection(limiter.call(() => 1, { read: (n) => n, maxWaitMs: 5 }));
    expect(error).toBeInstanceOf(DeadlineError);
    expect((error as DeadlineError).retryAfterMs).toBe(0);
    expect((error.cause as Error).message).toContain('the deadline passed in the queue');
    expect(state.executes).toBe(1);
    expect(events).toEqual([]);

    const { namespace: later } = answering(() =>
      Promise.reject(new Error('[drl:deadline-exceeded] refused (retry after 61000 ms)')),
    );
    const refused = await rejection(
      defineLimiter({ binder: defineTestBinder(later), name: 'x' })
        .for({})
        .call(() => 1, { read: (n) => n }),
    );
    expect((refused as DeadlineError).retryAfterMs).toBe(61_000);
  });
});

describe('maxWaitMs against the real object', () => {
  it('a full window refuses the call at once with DeadlineError and the predicted wait: fn never ran, nothing taken, no onDrop', async () => {
    const { name, stub } = await configured({ bucket: { limitPerWindow: 1, windowInMs: 60_000 } }, 'deadline-full');
    const events: DropEvent[] = [];
    const limiter = defineLimiter({
      binder: defineTestBinder(testEnv.RATE_LIMITER as unknown as NamespaceLike),
      name,
      onDrop: (e) => events.push(e),
    }).for({});
    expect(await limiter.call(() => 'first', { read: (s) => s })).toBe('first');

    let ran = 0;
    const error = await rejection(limiter.call(() => (ran += 1), { read: (n) => n, maxWaitMs: 100 }));
    expect(error).toBeInstanceOf(DeadlineError);
    const deadline = error as DeadlineError;
    expect(deadline.limiter).toBe(name);
    // The window frees its one unit 60 s after the first take; a little of that has passed.
    expect(deadline.retryAfterMs).toBeGreaterThan(50_000);
    expect(deadline.retryAfterMs).toBeLessThanOrEqual(60_000);
    expect(deadline.message).toContain('[drl:deadline-exceeded]');
    expect(ran).toBe(0);
    expect(events).toEqual([]);
    const stats = await stub.stats();
    expect(stats.used).toBe(1);
    expect(stats.queued).toBe(0);
  });

  it('maxWaitMs: 0 on a bucket with room starts at once', async () => {
    const { name, stub } = await configured({ bucket: { limitPerWindow: 1, windowInMs: 60_000 } }, 'deadline-zero');
    const limiter = defineLimiter({
      binder: defineTestBinder(testEnv.RATE_LIMITER as unknown as NamespaceLike),
      name,
    }).for({});
    expect(await limiter.call(() => 'now', { read: (s) => s, maxWaitMs: 0 })).toBe('now');
    expect((await stub.stats()).used).toBe(1);
    // The window is full now: the same try fails at once.
    expect(await rejection(limiter.call(() => 'again', { read: (s) => s, maxWaitMs: 0 }))).toBeInstanceOf(
      DeadlineError,
    );
  });

  it('a queued call leaves the queue at its deadline when a slow callback holds the only slot, and never runs', async () => {
    const { name, stub } = await configured({ concurrency: 1 }, 'deadline-slot');
    const events: DropEvent[] = [];
    const limiter = defineLimiter({
      binder: defineTestBinder(testEnv.RATE_LIMITER as unknown as NamespaceLike),
      name,
      onDrop: (e) => events.push(e),
    }).for({});
    const holder = gate();
    let blockerStarted = false;
    const blocker = watch(
      limiter.call(async () => ((blockerStarted = true), await holder.opened, 'blocker'), { read: (s) => s }),
    );
    await waitFor(() => blockerStarted, 10_000, 'the blocker to start');

    let ran = 0;
    // The window has room, so the call is queued (only the slot is in the way) and times out there.
    const error = await rejection(limiter.call(() => (ran += 1), { read: (n) => n, maxWaitMs: 200 }));
    expect(error).toBeInstanceOf(DeadlineError);
    expect((error as DeadlineError).retryAfterMs).toBeGreaterThanOrEqual(0);
    expect(ran).toBe(0);
    expect(events).toEqual([]);
    const stats = await stub.stats();
    expect(stats.queued).toBe(0);
    expect(stats.used).toBe(1); // the blocker's grant alone

    holder.open();
    expect(await blocker.outcome).toEqual({ ok: true, value: 'blocker' });
  });

  it("the limiter's maxWaitMs applies to every call; a call site's null waits as long as the bucket needs", async () => {
    const { name, stub } = await configured({ concurrency: 1 }, 'deadline-default');
    const limiter = defineLimiter({
      binder: defineTestBinder(testEnv.RATE_LIMITER as unknown as NamespaceLike),
      name,
      maxWaitMs: 0,
    }).for({});
    const holder = gate();
    let blockerStarted = false;
    // maxWaitMs 0 on an idle bucket: the blocker starts.
    const blocker = watch(
      limiter.call(async () => ((blockerStarted = true), await holder.opened, 'blocker'), { read: (s) => s }),
    );
    await waitFor(() => blockerStarted, 10_000, 'the blocker to start');

    expect(await rejection(limiter.call(() => 'try', { read: (s) => s }))).toBeInstanceOf(DeadlineError);
    const patient = watch(limiter.call(() => 'waited', { read: (s) => s, maxWaitMs: null }));
    await waitFor(async () => (await stub.stats()).queued === 1, 10_000, 'the call without a deadline to queue');
    holder.open();
    expect(await blocker.outcome).toEqual({ ok: true, value: 'blocker' });
    expect(await patient.outcome).toEqual({ ok: true, value: 'waited' });
  });
});
