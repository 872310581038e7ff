// Verifies priority against the real object: the queue is ordered by
// priority, then arrival. A call with a higher priority (its own, or its
// limiter's default) arriving behind many lower ones starts next, never
// before a started call; within a priority, calls start in arrival order.
import { describe, expect, it } from 'vitest';
import { defineLimiter, defineTestBinder, type NamespaceLike } from '../../shim/client/index.ts';
import { configured, gate, testEnv, waitFor, watch } from './helpers.ts';

const namespace = testEnv.RATE_LIMITER as unknown as NamespaceLike;

describe('priority', () => {
  it('a priority-1 call arriving behind 50 priority-0 calls starts next; the 50 keep their order', async () => {
    const { name, stub } = await configured({ concurrency: 1 }, 'priority-50');
    const batch = defineLimiter({ binder: defineTestBinder(namespace), name }).for({});
    // The interactive limiter's default priority is what puts it ahead.
    const interactive = defineLimiter({ binder: defineTestBinder(namespace), name, priority: 1 }).for({});
    const started: string[] = [];
    const holder = gate();
    const blocker = watch(
      batch.call(async () => (started.push('blocker'), await holder.opened, 'blocker'), { read: (s) => s }),
    );
    await waitFor(() => started.length === 1, 10_000, 'the blocker to start');

    const lows: ReturnType<typeof watch<string>>[] = [];
    for (let i = 0; i < 50; i += 1) {
      lows.push(watch(batch.call(() => (started.push(`low-${i}`), `low-${i}`), { read: (s) => s })));
      // One at a time, so their arrival order is known.
      await waitFor(async () => (await stub.stats()).queued === i + 1, 10_000, `low-${i} to queue`);
    }
    const high = watch(interactive.call(() => (started.push('high'), 'high'), { read: (s) => s }));
    await waitFor(async () => (await stub.stats()).queued === 51, 10_000, 'the priority-1 call to queue');
    expect((await stub.stats()).queuedByPriority).toEqual([
      { priority: 1, queued: 1 },
      { priority: 0, queued: 50 },
    ]);
    expect(started).toEqual(['blocker']); // the started call is never preempted

    holder.open();
    expect(await blocker.outcome).toEqual({ ok: true, value: 'blocker' });
    expect(await high.outcome).toEqual({ ok: true, value: 'high' });
    for (const low of lows) expect((await low.outcome).ok).toBe(true);
    expect(started).toEqual(['blocker', 'high', ...Array.from({ length: 50 }, (_, i) => `low-${i}`)]);
  });

  it("a call site's priority replaces the limiter's default, and lower priorities wait behind the default", async () => {
    const { name, stub } = await configured({ concurrency: 1 }, 'priority-mixed');
    const limiter = defineLimiter({ binder: defineTestBinder(namespace), name, priority: 5 }).for({});
    const started: string[] = [];
    const holder = gate();
    const blocker = watch(
      limiter.call(async () => (started.push('blocker'), await holder.opened, 'blocker'), { read: (s) => s }),
    );
    await waitFor(() => started.length === 1, 10_000, 'the blocker to start');

    const queue: [string, number | undefined][] = [
      ['background', -3],
      ['default-a', undefined],
      ['urgent', 900],
      ['default-b', undefined],
    ];
    const calls = [];
    for (const [label, priority] of queue) {
      calls.push(
        watch(
          limiter.call(() => (started.push(label), label), {
            read: (s) => s,
            ...(priority === undefined ? {} : { priority }),
          }),
        ),
      );
      await waitFor(async () => (await stub.stats()).queued === calls.length, 10_000, `${label} to queue`);
    }
    holder.open();
    await blocker.outcome;
    for (const call of calls) expect((await call.outcome).ok).toBe(true);
    expect(started).toEqual(['blocker', 'urgent', 'default-a', 'default-b', 'background']);
  });
});
