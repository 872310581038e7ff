// Verifies that configure/reconfigure while callers are queued keeps them queued and re-evaluates them under the new limits (only a caller whose cost can no longer fit is rejected), and that running callbacks keep their slot when concurrency is lowered.
import { describe, expect, it } from 'vitest';
import type { LimiterDO } from '../../shim/do/index.ts';
import type { LimiterConfig } from '../../shim/envelope.ts';
import { configured, recorder, rejection, sleep } from './helpers.ts';

/** Waits until `check` holds (polling), or fails after `ms`. */
async function until(check: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** A callback that records when it started and when it finished. */
function timed<T>(
  value: T,
  latencyMs: number,
): { fn: () => Promise<{ value: T }>; startedAt: number[]; endedAt: number[] } {
  const startedAt: number[] = [];
  const endedAt: number[] = [];
  return {
    startedAt,
    endedAt,
    fn: async () => {
      startedAt.push(Date.now());
      await sleep(latencyMs);
      endedAt.push(Date.now());
      return { value };
    },
  };
}

/**
 * Sends one call and waits until the object has queued it, so that calls sent
 * one after another arrive in that order: two calls sent back to back on one
 * stub can reach the object in either order under load (seen in this
 * harness), and these tests are about the queue, not about delivery order.
 */
async function enqueue<T>(
  stub: DurableObjectStub<LimiterDO>,
  queued: number,
  send: () => Promise<T>,
): Promise<{ done: Promise<T> }> {
  const done = send();
  done.catch(() => {}); // observed by the test later; never an unhandled rejection meanwhile
  await until(async () => (await stub.stats()).queued === queued, 10_000, `${queued} queued caller(s)`);
  return { done };
}

/**
 * A callback that runs until the test releases it (not for a fixed time: on
 * a busy machine the steps a test takes meanwhile may outlast any sleep),
 * recording when it started and when it finished.
 */
function held<T>(value: T): {
  fn: () => Promise<{ value: T }>;
  startedAt: number[];
  endedAt: number[];
  release: () => void;
} {
  const startedAt: number[] = [];
  const endedAt: number[] = [];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  return {
    startedAt,
    endedAt,
    release,
    fn: async () => {
      startedAt.push(Date.now());
      await gate;
      endedAt.push(Date.now());
      return { value };
    },
  };
}

// Long enough that "started at once" and "waited for the window" cannot be confused.
const MINUTE = 60_000;

describe('reconfigure with a queue', () => {
  it('(a) raising the limit starts a caller queued on the window at once', async () => {
    const { stub } = await configured(
      { bucket: { limitPerWindow: 1, windowInMs: MINUTE }, concurrency: 5 },
      'rq-limit',
    );
    const first = recorder({ value: 'first' });
    const second = recorder({ value: 'second' });
    expect(await stub.execute(first.fn)).toBe('first');
    const p2 = (await enqueue(stub, 1, () => stub.execute(second.fn))).done;
    await sleep(300);
    expect(second.startedAt).toEqual([]);
    expect((await stub.stats()).queued).toBe(1);

    const reconfiguredAt = Date.now();
    const stats = await stub.reconfigure({ bucket: { limitPerWindow: 2 } });
    expect(stats.limit).toBe(2);
    expect(stats.config).toEqual({ bucket: { limitPerWindow: 2, windowInMs: MINUTE }, concurrency: 5 });
    expect(await p2).toBe('second');
    expect(second.startedAt).toHaveLength(1);
    // Started by the reconfigure, not by the window (which had ~60 s to go).
    expect(second.startedAt[0]! - reconfiguredAt).toBeLessThan(MINUTE / 2);
    const after = await stub.stats();
    expect(after.used).toBe(2);
    expect(after.queued).toBe(0);
  });

  it('(b) raising concurrency starts queued callers while the slow holder still runs', async () => {
    const { stub } = await configured(
      { bucket: { limitPerWindow: 100, windowInMs: MINUTE }, concurrency: 1 },
      'rq-conc',
    );
    const holder = held('holder');
    const q1 = timed('q1', 0);
    const q2 = timed('q2', 0);
    const ph = stub.execute(holder.fn);
    await until(() => holder.startedAt.length === 1, 10_000, 'the holder to start');
    const p1 = (await enqueue(stub, 1, () => stub.execute(q1.fn))).done;
    const p2 = (await enqueue(stub, 2, () => stub.execute(q2.fn))).done;
    await sleep(200);
    expect(q1.startedAt).toEqual([]);
    expect(q2.startedAt).toEqual([]);

    const stats = await stub.reconfigure({ concurrency: 3 });
    expect(stats.config.concurrency).toBe(3);
    // Both run to the end while the holder still holds its slot.
    expect(await p1).toBe('q1');
    expect(await p2).toBe('q2');
    expect(holder.endedAt).toEqual([]);
    holder.release();
    expect(await ph).toBe('holder');
    expect(q1.startedAt[0]!).toBeLessThanOrEqual(q2.startedAt[0]!); // still FIFO
  });

  it('(c) a full configure with the same name keeps the queue and re-evaluates it (no rejection)', async () => {
    const { name, stub } = await configured(
      { bucket: { limitPerWindow: 1, windowInMs: MINUTE }, concurrency: 1 },
      'rq-configure',
    );
    const holder = held('holder');
    const q1 = recorder({ value: 'q1' });
    const q2 = recorder({ value: 'q2' });
    const ph = stub.execute(holder.fn);
    await until(() => holder.startedAt.length === 1, 10_000, 'the holder to start');
    const p1 = (await enqueue(stub, 1, () => stub.execute(q1.fn))).done;
    const p2 = (await enqueue(stub, 2, () => stub.execute(q2.fn))).done;

    // A new config that admits one more unit and one more slot: q1 starts;
    // q2 is not rejected but stays queued, now waiting on the new limit.
    const next: LimiterConfig = { bucket: { limitPerWindow: 2, windowInMs: MINUTE }, concurrency: 2 };
    const stats = await stub.configure(name, next);
    expect(stats.config).toEqual(next);
    expect(await p1).toBe('q1');
    await sleep(300);
    expect(q2.startedAt).toEqual([]);
    const mid = await stub.stats();
    expect(mid.queued).toBe(1);
    expect(mid.used).toBe(2);
    expect(mid.running).toBe(1); // the holder

    // Configured again with room for it: q2 starts at once, while the holder still runs.
    const roomier: LimiterConfig = { bucket: { limitPerWindow: 3, windowInMs: MINUTE }, concurrency: 2 };
    await stub.configure(name, roomier);
    expect(await p2).toBe('q2');
    expect(holder.endedAt).toEqual([]); // q2 ran to the end while the holder still held its slot
    holder.release();
    expect(await ph).toBe('holder');
    const after = await stub.stats();
    expect(after.config).toEqual(roomier);
    expect(after.used).toBe(3);
    expect(after.queued).toBe(0);
  });

  it('(d) lowering the limit below a queued cost rejects only that caller; the one behind it goes', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 5, windowInMs: MINUTE }, concurrency: 5 }, 'rq-cost');
    expect(await stub.execute(async () => ({ value: 'two' }), { cost: 2 })).toBe('two'); // used 2 of 5
    const big = recorder({ value: 'big' });
    const small = recorder({ value: 'small' });
    const pBig = rejection(stub.execute(big.fn, { cost: 5 })); // 2 + 5 > 5: waits for the window
    await until(async () => (await stub.stats()).queued === 1, 10_000, 'the big caller to queue');
    const pSmall = (await enqueue(stub, 2, () => stub.execute(small.fn))).done; // fits, but FIFO: waits behind `big`
    await sleep(200);
    expect(big.startedAt).toEqual([]);
    expect(small.startedAt).toEqual([]);

    const reconfiguredAt = Date.now();
    await stub.reconfigure({ bucket: { limitPerWindow: 4 } });
    const error = await pBig;
    expect(error.message).toContain('[drl:cost-too-large]');
    expect(big.startedAt).toEqual([]);
    expect(await pSmall).toBe('small');
    expect(small.startedAt[0]! - reconfiguredAt).toBeLessThan(MINUTE / 2);
    const after = await stub.stats();
    expect(after.used).toBe(3);
    expect(after.queued).toBe(0);
  });

  it('(e) lowering concurrency keeps running callbacks in their slot; newcomers wait for running < new cap', async () => {
    const { stub } = await configured(
      { bucket: { limitPerWindow: 100, windowInMs: MINUTE }, concurrency: 3 },
      'rq-lower',
    );
    const holders = [held('h0'), held('h1'), held('h2')];
    const pending = holders.map((h) => stub.execute(h.fn));
    await until(() => holders.every((h) => h.startedAt.length === 1), 10_000, 'three running holders');

    const stats = await stub.reconfigure({ concurrency: 1 });
    expect(stats.config.concurrency).toBe(1);
    expect(stats.running).toBe(3);
    expect(stats.active).toBe(3);

    const late = recorder({ value: 'late' });
    const pLate = (await enqueue(stub, 1, () => stub.execute(late.fn))).done;
    const mid = await stub.stats();
    expect(mid.running).toBe(3);
    expect(late.startedAt).toEqual([]);

    // Every holder completes normally (none was cancelled by the lower cap).
    for (const h of holders) h.release();
    expect(await Promise.all(pending)).toEqual(['h0', 'h1', 'h2']);
    expect(await pLate).toBe('late');
    // With a cap of 1, the newcomer could start only once all three were done.
    const lastEnd = Math.max(...holders.map((h) => h.endedAt[0]!));
    expect(late.startedAt[0]!).toBeGreaterThanOrEqual(lastEnd);
  });
});
