// Verifies the object's answers to callbacks that cannot be heard from: a
// caller that is gone (invoking its callback fails in transport) costs the
// one attempt that found it gone and frees its slot at once; an attempt that
// never reports is settled after attemptTimeoutMs, unretried, and its slot
// freed; a late report changes nothing.
import { describe, expect, it } from 'vitest';
import type { LimiterConfig } from '../../shim/envelope.ts';
import { configured, recorder, rejection, sleep, waitFor } from './helpers.ts';

const ONE_SLOT: LimiterConfig = {
  bucket: { limitPerWindow: 100, windowInMs: 60_000 },
  concurrency: 1,
  retry: { maxRetries: 3, minDelayInMs: 200 },
};

describe('a caller that is gone', () => {
  it('with reportsThrows, a throw from invoking fn is the caller gone: one grant, no retry, the slot free at once', async () => {
    const { stub } = await configured(ONE_SLOT, 'gone');
    let invoked = 0;
    const gone = async () => {
      invoked += 1;
      throw new Error('Network connection lost.');
    };
    const error = await rejection(stub.execute(gone, { reportsThrows: true }));
    expect(error.message).toContain('[drl:caller-gone]');
    expect(invoked).toBe(1);
    const next = recorder({ value: 'next' });
    expect(await stub.execute(next.fn)).toBe('next');
    const stats = await stub.stats();
    // The gone attempt's grant stays counted, and nothing more: no retry (nor
    // its backoff) of a dead caller stood in the next one's way.
    expect(stats.used).toBe(2);
    expect(stats.active).toBe(0);
  });

  it('without reportsThrows, what fn throws is the work: retried with backoff as before', async () => {
    const { stub } = await configured(ONE_SLOT, 'threw');
    let invoked = 0;
    const error = await rejection(
      stub.execute(async () => {
        invoked += 1;
        throw new Error('socket hang up');
      }),
    );
    expect(error.message).toContain('socket hang up');
    expect(invoked).toBe(4);
    expect((await stub.stats()).used).toBe(4);
  });

  it('a reported throw (CallReport.thrown) is retried like a throw, and settles with [drl:callback-threw] and its message', async () => {
    const { stub } = await configured({ ...ONE_SLOT, retry: { maxRetries: 1, minDelayInMs: 0 } }, 'reported-throw');
    let invoked = 0;
    const error = await rejection(
      stub.execute(
        async () => {
          invoked += 1;
          return { thrown: { message: `quota ${invoked}` } };
        },
        { reportsThrows: true },
      ),
    );
    expect(error.message).toContain('[drl:callback-threw]');
    expect(error.message).toContain('quota 2');
    expect(invoked).toBe(2);
  });
});

describe('attempt timeout', () => {
  it('settles a callback that never reports with [drl:attempt-timeout], unretried, and the next caller starts then', async () => {
    const { stub } = await configured({ ...ONE_SLOT, attemptTimeoutMs: 400 }, 'hung');
    let invoked = 0;
    const started: number[] = [];
    const hung = rejection(
      stub.execute(() => {
        invoked += 1;
        started.push(Date.now());
        return new Promise<never>(() => {});
      }),
    );
    // The next caller is sent once the hung one holds the slot: two calls
    // sent back to back on one stub can reach the object in either order
    // under load (the next one was admitted first, and done before the hung
    // one started), and this test is about the queue behind a hung attempt,
    // not about delivery order.
    await waitFor(() => started.length === 1, 10_000, 'the hung callback to start');
    const next = recorder({ value: 'after the hung one' });
    const nextCall = stub.execute(next.fn);
    const error = await hung;
    expect(error.message).toContain('[drl:attempt-timeout]');
    expect(error.message).toContain('400 ms');
    expect(await nextCall).toBe('after the hung one');
    expect(next.startedAt[0]!).toBeGreaterThanOrEqual(started[0]!);
    expect(invoked).toBe(1);
    const stats = await stub.stats();
    expect(stats.active).toBe(0);
    // By the object's own clock (its grants are dated when it started each
    // attempt; callbacks are invoked a commit later): the next caller started
    // only once the hung attempt's 400 ms had run out.
    const [hungAt, nextAt] = stats.grants.map(([at]) => at!).sort((a, b) => a - b);
    expect(stats.grants).toHaveLength(2);
    expect(nextAt! - hungAt!).toBeGreaterThanOrEqual(400);
  });

  it('ignores a report that arrives after the timeout', async () => {
    const { stub } = await configured({ ...ONE_SLOT, attemptTimeoutMs: 200 }, 'late');
    const late = stub.execute(async () => {
      await sleep(500);
      return { value: 'too late', status: 429 }; // would pause everyone if it counted
    });
    expect((await rejection(late)).message).toContain('[drl:attempt-timeout]');
    await sleep(400); // the late report has arrived by now
    const stats = await stub.stats();
    expect(stats.penalised).toBe(false);
    expect({ active: stats.active, running: stats.running }).toEqual({ active: 0, running: 0 });
    expect(await stub.execute(recorder({ value: 'fine' }).fn)).toBe('fine');
  });

  it('rejects an attemptTimeoutMs outside 1..86400000 with [drl:invalid-config], naming the field', async () => {
    const { stub } = await configured(ONE_SLOT, 'bad-timeout');
    for (const attemptTimeoutMs of [0, -1, 1.5, 86_400_001]) {
      const error = await rejection(stub.reconfigure({ attemptTimeoutMs }));
      expect(error.message).toContain('[drl:invalid-config]');
      expect(error.message).toContain('attemptTimeoutMs');
    }
    expect((await stub.stats()).effective.attemptTimeoutMs).toBe(120_000);
  });
});
