// Verifies the object's answers to callbacks that cannot be heard from: a
// caller that is gone (invoking its callback fails in transport), whatever
// options it sent, costs the one attempt that found it gone and frees its
// slot at once, while a callback's own throw is still retried; an attempt that
// never reports is settled after attemptTimeoutMs, unretried, and its slot
// freed; a late report changes nothing.
import { runInDurableObject } from 'cloudflare:test';
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { LimiterService } from '../../shim/do/index.ts';
import type { LimiterConfig } from '../../shim/envelope.ts';
import { configured, recorder, rejection, sleep, testEnv, uniqueName, waitFor } from './helpers.ts';

const service = (exports as unknown as { LimiterEntrypoint: LimiterService }).LimiterEntrypoint;

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

  it('without reportsThrows, a caller whose isolate is gone costs one grant, is never retried, and frees its slot at once', async () => {
    const { name, stub } = await configured(ONE_SLOT, 'gone-raw');
    // The slot is held, so the parked caller's three calls wait in the queue.
    let release!: () => void;
    const holder = stub.execute(() => new Promise((resolve) => (release = () => resolve({ value: 'held' }))));
    await waitFor(async () => (await stub.stats()).running === 1, 10_000, 'the holder to start');
    const caller = testEnv.PARKED_CALLER.get(testEnv.PARKED_CALLER.idFromName(uniqueName('parked')));
    await caller.park(name, 3);
    await waitFor(async () => (await stub.stats()).queued === 3, 10_000, 'the parked calls to queue');
    // The caller ends: its callbacks can no longer be invoked (without the
    // remote mark of an error the callback threw itself).
    await runInDurableObject(caller, (_instance, state) => state.abort('ended by the test')).catch(() => undefined);
    release();
    expect(await holder).toBe('held');
    await waitFor(
      async () => {
        const stats = await stub.stats();
        return stats.queued === 0 && stats.active === 0;
      },
      10_000,
      'the gone calls to leave',
    );
    // The holder's grant and one per gone call, the attempt that found it
    // gone: no retries (with ONE_SLOT's 3 retries, 4 each, and their backoff).
    expect((await stub.stats()).used).toBe(1 + 3);
    expect(await stub.execute(recorder({ value: 'next' }).fn)).toBe('next');
  });

  // What a callback throws crosses RPC marked as the callback's own, so the
  // object tells it from a broken connection: retried as the work's failure.
  // [what, the value thrown, the message the call rejects with]
  const THROWS: Array<[string, unknown, string]> = [
    ['an Error', new Error('socket hang up'), 'socket hang up'],
    ['a TypeError', new TypeError('socket hang up'), 'socket hang up'],
    ['a string', 'socket hang up', 'socket hang up'],
    ['what reads like a broken connection', new Error('Network connection lost.'), 'Network connection lost.'],
  ];
  const RETRY_TWICE: LimiterConfig = { ...ONE_SLOT, retry: { maxRetries: 2, minDelayInMs: 10 } };

  for (const [what, thrown, message] of THROWS) {
    it(`without reportsThrows, a callback that throws ${what} fails as the work: retried as configured`, async () => {
      const { name, stub } = await configured(RETRY_TWICE, 'threw');
      let invoked = 0;
      const fn = async () => {
        invoked += 1;
        throw thrown;
      };
      const direct = await rejection(stub.execute(fn));
      expect(direct.message).toBe(message);
      expect(invoked).toBe(3);
      // The same through LimiterEntrypoint, which hands the object the callback it was given.
      const entered = await rejection(service.execute(name, fn));
      expect(entered.message).toBe(direct.message);
      expect(invoked).toBe(6);
      const stats = await stub.stats();
      expect(stats.used).toBe(6);
      expect(stats.active).toBe(0);
    });
  }

  it("without reportsThrows, a throw from another application's isolate is its work's failure: retried", async () => {
    const { stub } = await configured(RETRY_TWICE, 'threw-other');
    const other = await testEnv.OTHER_APP.run((fn, options) => stub.execute(fn, options as never), {
      throws: 'quota exceeded',
    });
    expect(other.ok).toBe(false);
    expect(other.error).toContain('quota exceeded');
    expect(other.startedAt).toHaveLength(3);
    expect((await stub.stats()).used).toBe(3);
  });

  it("a function of the object's own isolate (not sent over RPC) has no connection to lose: its throws are retried", async () => {
    const { stub } = await configured(RETRY_TWICE, 'threw-local');
    const invoked = await runInDurableObject(stub, async (instance) => {
      let calls = 0;
      await rejection(
        instance.execute(async () => {
          calls += 1;
          throw new Error('local failure');
        }),
      );
      return calls;
    });
    expect(invoked).toBe(3);
    expect((await stub.stats()).used).toBe(3);
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
