// Waiting with intent, on the real object: maxWaitMs (refused at once, or at
// the deadline), start-now-or-fail, withdrawal through whenAborted (an
// AbortSignal cannot cross RPC), priorities, and the predicted start in stats.
import { describe, expect, it } from 'vitest';
import type { LimiterStats } from '../../shim/envelope.ts';
import { MAX_DELAY_MS, MAX_PRIORITY, MAX_RETRIES } from '../../shim/limits.ts';
import { configured, rejection, sleep, typed, waitFor } from './helpers.ts';

/** A gate a callback can wait on, opened from the test. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

/**
 * Holds a bucket's only slot: a call that runs until release(), begun once
 * stats show it running. `done` settles with its value, `value`.
 */
async function holdOnlySlot(
  stub: Awaited<ReturnType<typeof configured>>['stub'],
  value: string,
  onRelease?: () => void,
): Promise<{ done: Promise<unknown>; release: () => void }> {
  const hold = gate();
  const done = stub.execute(async () => {
    await hold.wait;
    onRelease?.();
    return { value };
  });
  await waitFor(async () => (await stub.stats()).running === 1, 5000, `the ${value} call to start`);
  return { done, release: hold.open };
}

/** A whenAborted the test controls: resolves true on abort(), false on done(). */
function abortable(): {
  whenAborted: () => Promise<boolean>;
  abort: () => void;
  done: () => void;
  asked: () => number;
} {
  let settle!: (aborted: boolean) => void;
  const answer = new Promise<boolean>((resolve) => (settle = resolve));
  let asked = 0;
  return {
    whenAborted: () => {
      asked += 1;
      return answer;
    },
    abort: () => settle(true),
    done: () => settle(false),
    asked: () => asked,
  };
}

describe('maxWaitMs', () => {
  it('refuses at once, with the predicted wait, when the window is full; nothing is taken and fn never runs', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 1, windowInMs: 60_000 }, concurrency: 5 });
    await stub.execute(async () => ({ value: 'first' }));
    let ran = false;
    const before = Date.now();
    const settled = await typed(stub).execute(
      async () => {
        ran = true;
        return { value: 'second' };
      },
      { maxWaitMs: 30_000, settles: 'data' },
    );
    const took = Date.now() - before;
    expect(settled.ok).toBe(false);
    if (settled.ok) return;
    expect(settled.error.id).toBe('deadline-exceeded');
    // The window frees its one unit 60 s after the first take.
    expect(settled.error.retryAfterMs).toBeGreaterThan(55_000);
    expect(settled.error.retryAfterMs).toBeLessThanOrEqual(60_000);
    expect(settled.error.message).toMatch(/^\[drl:deadline-exceeded\] .*retry after \d+ ms/);
    // At once, not at the deadline: a deadline far longer than any round trip
    // on a busy machine tells the two apart (the predicted wait, > 55 s, is
    // still past it).
    expect(took).toBeLessThan(30_000);
    expect(ran).toBe(false);
    expect(await stub.stats()).toMatchObject({ used: 1, queued: 0, running: 0 });
  });

  it('the same as a rejection (without settles: data) carries retryAfterMs in its message', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 1, windowInMs: 60_000 }, concurrency: 5 });
    await stub.execute(async () => ({}));
    const error = await rejection(stub.execute(async () => ({}), { maxWaitMs: 0 }));
    expect(error.message).toMatch(/\[drl:deadline-exceeded\] .*\(retry after \d+ ms\)/);
  });

  it('rejects at the deadline when a slow callback holds the only slot', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 100, windowInMs: 60_000 }, concurrency: 1 });
    const { done: slow, release } = await holdOnlySlot(stub, 'slow');
    let ran = false;
    const before = Date.now();
    const settled = await typed(stub).execute(
      async () => {
        ran = true;
        return {};
      },
      { maxWaitMs: 300, settles: 'data' },
    );
    const waited = Date.now() - before;
    expect(settled).toMatchObject({ ok: false, error: { id: 'deadline-exceeded' } });
    // The window had room: only the slot was in the way, which no prediction can see.
    if (!settled.ok) expect(settled.error.retryAfterMs).toBe(0);
    expect(waited).toBeGreaterThanOrEqual(250);
    expect(ran).toBe(false);
    expect(await stub.stats()).toMatchObject({ used: 1, queued: 0, running: 1 });
    release();
    expect(await slow).toBe('slow');
  });

  it('maxWaitMs 0 starts at once on a bucket with room, and is refused at once on a full one', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 1, windowInMs: 60_000 }, concurrency: 1 });
    expect(await stub.execute(async () => ({ value: 'now' }), { maxWaitMs: 0 })).toBe('now');
    const settled = await stub.execute(async () => ({ value: 'never' }), { maxWaitMs: 0, settles: 'data' });
    expect(settled).toMatchObject({ ok: false, error: { id: 'deadline-exceeded' } });
    expect(await stub.stats()).toMatchObject({ used: 1, queued: 0 });
  });

  it('a call that waits within its maxWaitMs starts when the window frees', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 1, windowInMs: 400 }, concurrency: 5 });
    await stub.execute(async () => ({}));
    // When the window frees by the object's own clock: its one grant leaves
    // then. (Not measured from here: the first call's answer may take a
    // while to come back on a busy machine, and the window runs meanwhile.)
    const { resetAt } = await stub.stats();
    let startedAt = 0;
    const later = await stub.execute(
      async () => {
        startedAt = Date.now();
        return { value: 'later' };
      },
      { maxWaitMs: 5000 },
    );
    expect(later).toBe('later');
    expect(startedAt).toBeGreaterThanOrEqual(resetAt);
  });

  it('refuses a bad priority, maxWaitMs, whenAborted or relaysAbort before anything is queued or stored, naming it', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 10, windowInMs: 60_000 }, concurrency: 1 });
    const cases: [unknown, string, RegExp][] = [
      [
        { priority: 1.5 },
        'RangeError',
        /^\[drl:invalid-argument\] priority must be an integer between -1000 and 1000 \(received 1\.5\)$/,
      ],
      [{ priority: 1001 }, 'RangeError', /priority must be an integer between -1000 and 1000 \(received 1001\)$/],
      [
        { priority: 'high' },
        'TypeError',
        /^\[drl:invalid-argument\] priority must be a finite number, an integer between -1000 and 1000 \(received "high"\)$/,
      ],
      [{ priority: Number.NaN }, 'TypeError', /priority must be a finite number, .* \(received NaN\)$/],
      [{ maxWaitMs: -1 }, 'RangeError', /maxWaitMs must be an integer between 0 and 31622400000 \(received -1\)$/],
      [{ maxWaitMs: 2.5 }, 'RangeError', /maxWaitMs must be an integer between 0 and 31622400000 \(received 2\.5\)$/],
      [
        { maxWaitMs: Number.POSITIVE_INFINITY },
        'TypeError',
        /maxWaitMs must be a finite number, an integer between 0 and 31622400000, or left out to wait as long as needed \(received Infinity\)$/,
      ],
      // NaN is how the ABI says "no maxWaitMs": a caller must say that by leaving it out.
      [
        { maxWaitMs: Number.NaN },
        'TypeError',
        /^\[drl:invalid-argument\] maxWaitMs must be a finite number, .*received NaN\)$/,
      ],
      [{ maxWaitMs: '100' }, 'TypeError', /maxWaitMs must be a finite number, .*or left out .*received "100"\)$/],
      [{ whenAborted: 'soon' }, 'TypeError', /whenAborted must be a function .*received "soon"\)/],
      [
        { relaysAbort: 'yes' },
        'TypeError',
        /^\[drl:invalid-argument\] relaysAbort must be a boolean \(received "yes"\)$/,
      ],
      [
        { relaysAbort: true, whenAborted: () => Promise.resolve(false) },
        'TypeError',
        /^\[drl:invalid-argument\] relaysAbort and whenAborted both name the call's abort relay: send whenAborted, or relaysAbort: true, not both$/,
      ],
    ];
    for (const [options, kind, message] of cases) {
      let ran = false;
      const error = await rejection(
        stub.execute(async () => {
          ran = true;
          return {};
        }, options as never),
      );
      expect({ options, kind: error.name, message: error.message }).toEqual({
        options,
        kind,
        message: expect.stringMatching(message),
      });
      expect(ran).toBe(false);
    }
    expect(await stub.stats()).toMatchObject({ used: 0, queued: 0, running: 0, active: 0 });
  });

  it('takes priority, maxWaitMs and maxRetries at their bounds, and refuses one past them naming the bound', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 100, windowInMs: 60_000 }, concurrency: 1 });
    const atBounds = [
      { priority: MAX_PRIORITY },
      { priority: -MAX_PRIORITY },
      { maxWaitMs: MAX_DELAY_MS },
      { maxWaitMs: 0 },
      { maxRetries: MAX_RETRIES },
      { maxRetries: 0 },
    ];
    for (const options of atBounds) expect(await stub.execute(async () => ({ value: 'ran' }), options)).toBe('ran');
    const pastBounds: [Record<string, number>, string][] = [
      [{ priority: MAX_PRIORITY + 1 }, `priority must be an integer between -${MAX_PRIORITY} and ${MAX_PRIORITY}`],
      [{ priority: -MAX_PRIORITY - 1 }, `priority must be an integer between -${MAX_PRIORITY} and ${MAX_PRIORITY}`],
      [{ maxWaitMs: MAX_DELAY_MS + 1 }, `maxWaitMs must be an integer between 0 and ${MAX_DELAY_MS}`],
      [{ maxWaitMs: -1 }, `maxWaitMs must be an integer between 0 and ${MAX_DELAY_MS}`],
      [{ maxRetries: MAX_RETRIES + 1 }, `maxRetries must be an integer between 0 and ${MAX_RETRIES}`],
      [{ maxRetries: -1 }, `maxRetries must be an integer between 0 and ${MAX_RETRIES}`],
    ];
    for (const [options, rule] of pastBounds) {
      const value = Object.values(options)[0];
      const error = await rejection(stub.execute(async () => ({ value: 'ran' }), options));
      expect({ options, kind: error.name, message: error.message }).toEqual({
        options,
        kind: 'RangeError',
        message: `[drl:invalid-argument] ${rule} (received ${value})`,
      });
    }
    expect((await stub.stats()).used).toBe(atBounds.length);
  });
});

describe('withdrawing (whenAborted)', () => {
  it('an aborted queued call leaves at once, takes no grant, and the next caller starts no later than it would have', async () => {
    const { stub } = await configured({
      bucket: { limitPerWindow: 100, windowInMs: 60_000 },
      concurrency: 1,
      attemptTimeoutMs: 30_000,
    });
    const { done: blocker, release } = await holdOnlySlot(stub, 'blocker');
    const watch = abortable();
    let abortedRan = false;
    const aborted = rejection(
      stub.execute(
        async () => {
          abortedRan = true;
          return {};
        },
        { whenAborted: watch.whenAborted },
      ),
    );
    await waitFor(async () => (await stub.stats()).queued === 1, 5000, 'the call to queue');
    const next: number[] = [];
    const behind = stub.execute(async () => {
      next.push(Date.now());
      return { value: 'behind' };
    });
    await waitFor(async () => (await stub.stats()).queued === 2, 5000, 'the second call to queue');
    expect(watch.asked()).toBe(1);
    watch.abort();
    const error = await aborted;
    expect(error.message).toMatch(/^\[drl:cancelled\] /);
    expect(await stub.stats()).toMatchObject({ queued: 1, used: 1 }); // only the blocker took
    const released = Date.now();
    release();
    expect(await blocker).toBe('blocker');
    expect(await behind).toBe('behind');
    expect(abortedRan).toBe(false);
    // The one behind took the freed place: it started once the blocker
    // ended, not once a slot held for the withdrawn call timed out (30 s).
    expect(next[0]!).toBeGreaterThanOrEqual(released);
    expect(next[0]! - released).toBeLessThan(30_000);
    expect(await stub.stats()).toMatchObject({ used: 2, queued: 0 });
  });

  it("an abort while the callback runs changes nothing: the outcome is the callback's", async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 100, windowInMs: 60_000 }, concurrency: 1 });
    const watch = abortable();
    const running = gate();
    const finish = gate();
    const call = stub.execute(
      async () => {
        running.open();
        await finish.wait;
        return { value: 'finished' };
      },
      { whenAborted: watch.whenAborted },
    );
    await running.wait;
    // A call that started at once is not watched: no round trip to its caller for it.
    expect(watch.asked()).toBe(0);
    watch.abort();
    await sleep(50);
    finish.open();
    expect(await call).toBe('finished');
  });

  it('an abort while the call waits between attempts releases its slot and ends it without a retry', async () => {
    const { stub } = await configured({
      bucket: { limitPerWindow: 100, windowInMs: 60_000 },
      concurrency: 1,
      retry: { maxRetries: 3, minDelayInMs: 30_000, maxDelayInMs: 30_000 },
    });
    const watch = abortable();
    let attempts = 0;
    const call = rejection(
      stub.execute(
        async () => {
          attempts += 1;
          return { failure: { message: 'flaky', retryable: true } };
        },
        { whenAborted: watch.whenAborted },
      ),
    );
    await waitFor(async () => attempts === 1 && (await stub.stats()).running === 0, 5000, 'the first attempt to fail');
    expect((await stub.stats()).active).toBe(1); // it holds its slot through the backoff
    watch.abort();
    expect((await call).message).toMatch(/^\[drl:cancelled\] /);
    expect(attempts).toBe(1);
    expect(await stub.stats()).toMatchObject({ active: 0, queued: 0 });
    // The slot is free for the next caller at once, not after the backoff
    // (30 s: longer than any round trip on a busy machine).
    const before = Date.now();
    expect(await stub.execute(async () => ({ value: 'next' }))).toBe('next');
    expect(Date.now() - before).toBeLessThan(30_000);
  });

  it("a whenAborted that fails (the caller's connection broke) withdraws the queued call", async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 100, windowInMs: 60_000 }, concurrency: 1 });
    const { done: blocker, release } = await holdOnlySlot(stub, 'blocker');
    let fail!: (error: Error) => void;
    const broken = new Promise<boolean>((_, reject) => (fail = reject));
    broken.catch(() => {}); // the object hears of it over RPC; here it is handled, not an unhandled rejection
    const call = rejection(stub.execute(async () => ({}), { whenAborted: () => broken }));
    await waitFor(async () => (await stub.stats()).queued === 1, 5000, 'the call to queue');
    fail(new Error('Network connection lost.'));
    expect((await call).message).toMatch(/^\[drl:cancelled\] /);
    expect(await stub.stats()).toMatchObject({ queued: 0, used: 1 });
    release();
    await blocker;
  });

  it("with relaysAbort, the callback's own whenAborted is the relay: an aborted queued call leaves at once and never runs", async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 100, windowInMs: 60_000 }, concurrency: 1 });
    const { done: blocker, release } = await holdOnlySlot(stub, 'blocker');
    const watch = abortable();
    let ran = false;
    const callback = Object.assign(
      async () => {
        ran = true;
        return {};
      },
      { whenAborted: watch.whenAborted },
    );
    const aborted = rejection(stub.execute(callback, { relaysAbort: true }));
    await waitFor(async () => (await stub.stats()).queued === 1, 5000, 'the call to queue');
    // The object asks the callback's relay once the call waits (an RPC back to this isolate).
    await waitFor(() => watch.asked() === 1, 5000, "the object to ask the callback's relay");
    watch.abort();
    expect((await aborted).message).toMatch(/^\[drl:cancelled\] /);
    expect(await stub.stats()).toMatchObject({ queued: 0, used: 1 });
    release();
    expect(await blocker).toBe('blocker');
    expect(ran).toBe(false);
  });

  it('with relaysAbort, a callback without whenAborted (an adapter wrapped it) has no relay: it waits its turn and runs', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 100, windowInMs: 60_000 }, concurrency: 1 });
    const { done: blocker, release } = await holdOnlySlot(stub, 'blocker');
    const wrapped = stub.execute(async () => ({ value: 'wrapped' }), { relaysAbort: true });
    await waitFor(async () => (await stub.stats()).queued === 1, 5000, 'the call to queue');
    // The object asks the callback for its relay as the call queues, and
    // finds none: that answer must not withdraw it as a caller gone would.
    // (Given time to arrive before the blocker ends; if it came later, the
    // call would have started and a withdrawal could no longer show.)
    await sleep(200);
    expect(await stub.stats()).toMatchObject({ queued: 1, used: 1 });
    release();
    expect(await blocker).toBe('blocker');
    expect(await wrapped).toBe('wrapped');
  });

  it('a whenAborted resolving false (the call ended) never withdraws anything', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 100, windowInMs: 60_000 }, concurrency: 2 });
    const watch = abortable();
    watch.done();
    expect(await stub.execute(async () => ({ value: 7 }), { whenAborted: watch.whenAborted })).toBe(7);
  });
});

describe('priorities', () => {
  it('a high-priority call arriving behind 50 low-priority ones starts next', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 1000, windowInMs: 60_000 }, concurrency: 1 });
    const order: string[] = [];
    const { done: blocker, release } = await holdOnlySlot(stub, 'blocker', () => order.push('blocker'));
    const low = Array.from({ length: 50 }, (_, i) =>
      stub.execute(
        async () => {
          order.push(`low-${i}`);
          return {};
        },
        { priority: 0 },
      ),
    );
    await waitFor(async () => (await stub.stats()).queued === 50, 10_000, '50 low-priority calls to queue');
    const high = stub.execute(
      async () => {
        order.push('high');
        return {};
      },
      { priority: 1 },
    );
    await waitFor(async () => (await stub.stats()).queued === 51, 5000, 'the high-priority call to queue');
    const stats: LimiterStats = await stub.stats();
    expect(stats.queuedByPriority).toEqual([
      { priority: 1, queued: 1 },
      { priority: 0, queued: 50 },
    ]);
    release();
    await Promise.all([blocker, high, ...low]);
    expect(order[0]).toBe('blocker');
    expect(order[1]).toBe('high');
    // FIFO within a priority: the low ones in the order the object received them.
    expect(order.slice(2)).toHaveLength(50);
  });

  it('priorities never preempt a started call', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 1000, windowInMs: 60_000 }, concurrency: 1 });
    const hold = gate();
    const started = gate();
    const order: string[] = [];
    const low = stub.execute(
      async () => {
        order.push('low');
        started.open();
        await hold.wait;
        return {};
      },
      { priority: -5 },
    );
    await started.wait;
    const high = stub.execute(
      async () => {
        order.push('high');
        return {};
      },
      { priority: 1000 },
    );
    await waitFor(async () => (await stub.stats()).queued === 1, 5000, 'the high call to queue');
    expect(order).toEqual(['low']);
    hold.open();
    await Promise.all([low, high]);
    expect(order).toEqual(['low', 'high']);
  });
});

describe('predicted start in stats', () => {
  it('reports the head and the tail of the queue: when the window lets each start', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 2, windowInMs: 60_000 }, concurrency: 10 });
    const idle = await stub.stats();
    expect(idle.predictedStart).toEqual({ head: null, tail: null });
    expect(idle.queuedByPriority).toEqual([]);
    await stub.execute(async () => ({}));
    await stub.execute(async () => ({}));
    const first = (await stub.stats()).resetAt; // when the second take leaves the window
    // Three callers wait: two fit when the window turns over, the third one window later.
    const waiting = [0, 1, 2].map(() => stub.execute(async () => ({}), { settles: 'data', maxWaitMs: 200_000 }));
    await waitFor(async () => (await stub.stats()).queued === 3, 5000, 'three calls to queue');
    const stats = await stub.stats();
    // The head starts when the first take leaves the window (just before the second does).
    expect(stats.predictedStart.head).toBeLessThanOrEqual(first);
    expect(stats.predictedStart.head).toBeGreaterThan(first - 5000);
    // The third needs a unit freed by a take that has not happened yet: one window later.
    expect(stats.predictedStart.tail! - stats.predictedStart.head!).toBe(60_000);
    // Let the test end without waiting a minute: a larger limit lets them all start.
    await stub.reconfigure({ bucket: { limitPerWindow: 5 } });
    await Promise.all(waiting);
  });
});
